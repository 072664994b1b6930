"""Readers of the files `nearmetal io best` writes (best.hints, best.nml), for the tests that
check them: nearmetal itself only writes them."""


def parse_hints_file(text):
    """{key: value} of a ROMIO hints file ("key value" lines; '#' lines are comments)."""
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition(" ")
            out[key] = value.strip()
    return out


def parse_namelist(text):
    """{(group, key): value} of Fortran namelist text (enough for what io best writes)."""
    out, group = {}, None
    for raw in text.splitlines():
        line = raw.split("!", 1)[0].strip()
        if not line:
            continue
        if line.startswith("&"):
            group = line[1:].strip()
        elif line == "/":
            group = None
        elif "=" in line and group:
            key, _, value = line.partition("=")
            out[(group, key.strip())] = value.strip()
    return out
