"""The one exception type users see: its message is printed as a single line."""


class NearmetalError(Exception):
    """A problem with the user's input or environment, reported without a traceback."""
