"""The jinja2 set-up every HTML page of nearmetal shares (the study report, its I/O section,
the trace report): templates/NAME from this package, autoescaped, block lines trimmed."""

from functools import cache
from importlib import resources


@cache
def _environment():
    import jinja2  # only when a page is rendered

    return jinja2.Environment(autoescape=True, trim_blocks=True, lstrip_blocks=True)


def template(name):
    """templates/NAME as a jinja2 template."""
    text = resources.files(__package__).joinpath("templates", name).read_text(encoding="utf-8")
    return _environment().from_string(text)


def render(name, **context):
    """templates/NAME rendered with the context (values are escaped unless marked |safe)."""
    return template(name).render(**context)
