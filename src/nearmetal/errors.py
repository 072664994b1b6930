"""The one exception type users see: its message is printed as a single line."""


class NearmetalError(Exception):
    """A problem with the user's input or environment, reported without a traceback."""


def one_line(text):
    """`text` with every character that could break the line (newlines, U+2028, control
    characters) escaped: errors quote user strings, and an error (or a log's note) is one line."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
