"""The package version, in a module of its own so that no stage imports the package face."""

__version__ = "0.1.0"
