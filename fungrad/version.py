"""fungrad's version string, in a module of its own so that code inside the package (the object
cache keys its entries and its directory on it) can read it without importing the package."""

__version__ = "0.1.0"
