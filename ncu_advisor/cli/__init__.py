"""The command line: a typer app over the library, one module per command.

``main`` is the console entry point (``ncu-advise``); ``app`` the typer application.
"""

from .app import app, main

__all__ = ["app", "main"]
