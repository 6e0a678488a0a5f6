"""Derived quantities: units, roofline, occupancy and launch shape, computed from a Report."""
