"""Report formats, one module each (html, md, csv, json): a file name and a writer.

A new format is one module here whose class, registered with `@FORMATS.register`, has
`filename` and `write(analysis, path)`; `nearmetal report --format` lists it.
"""

from ...registry import Registry

FORMATS = Registry(__name__, "report format", first=("html", "md", "csv", "json"))


def names():
    return FORMATS.names()


def get(name):
    return FORMATS.get(name)()
