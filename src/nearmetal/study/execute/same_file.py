"""`study --resume`: is the study file the one the study was planned from? Compared as
TOML, not as text: a comment added to a long study's file while it was interrupted, or its
line endings changed by an editor, do not change one run, and the plan made from the stored
text is the one that goes on. When it really differs, the first key that does is named."""

import tomllib


def _first_difference(old, new, path=""):
    """The dotted key path (with [i] for a list item) where two parsed TOML values first
    differ, or None when they are equal."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in list(old) + [k for k in new if k not in old]:
            if key not in old or key not in new:
                return f"{path}.{key}" if path else key
            found = _first_difference(old[key], new[key], f"{path}.{key}" if path else key)
            if found:
                return found
        return None
    if isinstance(old, list) and isinstance(new, list):
        for i, (a, b) in enumerate(zip(old, new)):
            found = _first_difference(a, b, f"{path}[{i}]")
            if found:
                return found
        return None if len(old) == len(new) else f"{path} (a list of {len(old)}, now {len(new)})"
    return None if old == new and type(old) is type(new) else (path or "the whole file")


def difference(stored, text):
    """None when `text` plans the same study as the stored text; else where they differ."""
    if stored == text:
        return None
    try:
        return _first_difference(tomllib.loads(stored), tomllib.loads(text))
    except tomllib.TOMLDecodeError:
        return "the whole file"
