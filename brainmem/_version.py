"""The package version, in a module of its own so nothing below the root imports the root."""

__version__ = "0.1.0"
