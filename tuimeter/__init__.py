"""tuimeter: live power and energy monitor for the terminal."""

__version__ = "0.1.0"
