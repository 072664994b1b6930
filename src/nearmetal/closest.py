"""The names a misspelt name could have meant, said in one phrase for a one-line error:
the known names (the first few) and the closest one (difflib's ratio, at least 0.6)."""

import difflib

MOST = 12  # names listed; the rest are counted


def closest(name, known, cutoff=0.6):
    """The known name most like `name`, or None when none is alike."""
    found = difflib.get_close_matches(str(name), list(known), n=1, cutoff=cutoff)
    return found[0] if found else None


def known_names(name, known, what="names"):
    """'known WHAT: a, b, c (and 4 more); the closest is 'x'' (no closest part when none is
    alike; 'no WHAT here' when there are none)."""
    known = sorted(dict.fromkeys(known))
    if not known:
        return f"no {what} here"
    listed = ", ".join(known[:MOST]) + (f" (and {len(known) - MOST} more)" if len(known) > MOST else "")
    near = closest(name, known)
    return f"known {what}: {listed}" + (f"; the closest is '{near}'" if near else "")
