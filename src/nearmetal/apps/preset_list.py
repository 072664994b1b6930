"""`nearmetal presets`: every preset nearmetal can use here — the built-in ones, then the
preset files (apps/preset_file.py) — with where each comes from and its figures of merit."""

import os

from ..errors import NearmetalError
from . import preset_file, presets


def entries(cwd=None):
    """[{name, source, title, foms, command, problem}] in the order a lookup prefers them. A
    file whose name a built-in has is listed as not used; a TOML file in the current
    directory without a `fom` key is a study or another tool's file and is left out; any
    other file that is not a valid preset is listed with its problem."""
    import tomllib

    out = []
    for name in presets.names():
        p = presets.get(name)
        out.append({"name": name, "source": "built-in", "title": p.title, "foms": p.fom_summary(),
                    "command": list(p.command), "problem": None})
    here = os.path.abspath(cwd or os.getcwd())
    for name, path in preset_file.listed(cwd).items():
        row = {"name": name, "source": path, "title": "", "foms": "", "command": [], "problem": None}
        if name in presets.names():
            row["problem"] = f"not used: '{name}' is a built-in preset (rename the file)"
        else:
            try:
                spec = presets.FilePreset(name, path, preset_file.load(path))
                row.update(title=spec.title, foms=spec.fom_summary(), command=list(spec.command))
            except NearmetalError as e:
                row["problem"] = str(e)
        if row["problem"] and os.path.dirname(path) == here and not _has_fom(path, tomllib):
            continue
        out.append(row)
    return out


def _has_fom(path, tomllib):
    try:
        with open(path, "rb") as f:
            return "fom" in tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError, RecursionError, UnicodeDecodeError):
        return False


def render(rows, console):
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="presets: `preset = \"NAME\"` in a study, `bench --command --preset NAME`",
                  title_justify="left")
    for col in ("name", "from", "figures of merit", "program"):
        table.add_column(col, overflow="fold")
    for r in rows:
        foms = f"[red]{escape(r['problem'])}[/red]" if r["problem"] else escape(r["foms"])
        table.add_row(escape(r["name"]), escape(r["source"]), foms, escape(" ".join(r["command"]) or r["title"]))
    console.print(table)
    console.print(f"preset files are read from {escape(os.path.join(os.getcwd(), 'NAME.toml'))}, then "
                  f"{escape(preset_file.places('NAME')[1])} (docs/applications.md)")


def command(args):
    """`nearmetal presets [--json]`."""
    rows = entries()
    if args.json:
        import json

        print(json.dumps(rows, indent=2))
    else:
        from ..console import Console

        render(rows, Console())
    return 0
