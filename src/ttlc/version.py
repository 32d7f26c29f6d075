"""ttlc's version (also in pyproject.toml), in a module of its own so that every layer,
the back ends' cache keys included, can read it without importing the package's entry
points."""
__version__ = "0.1.0"
