"""Stand-in cudf for unit tests (see ../README.md)."""

__version__ = "0+stand-in"
