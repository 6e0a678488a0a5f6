"""Running ncu around a program.

The command line, the session, finding the install, and the advisor's section file.
"""
