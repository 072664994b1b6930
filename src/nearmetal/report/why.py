"""The "Why" section (analysis["why"], computed by explain/why.py): per slower answer its cause,
evidence, recovered share and fix; per answer undecided by modes, whether the baseline shares
them. Rendered only: on the terminal (render_why) and as an HTML fragment (render_html)."""

from rich.syntax import Syntax
from rich.text import Text


def render_why(why, console):
    """The Why section on a rich Console; nothing when there is nothing to say."""
    if not why or not (why.get("answers") or why.get("noise")):
        return
    console.print(Text("Why", style="bold"))
    for a in why.get("answers") or []:
        console.print(Text(a["text"]))
        if a.get("fix_toml"):
            console.print(Text("  the fix as a study variant, and as run flags:", style="dim"))
            console.print(Syntax(a["fix_toml"], "toml", theme="ansi_light", background_color="default"))
            # one line whatever the width: wrapped, a pasted command would be two
            console.print(Text("  " + a["fix_flags"]), soft_wrap=True)
        others = [c for c in a.get("causes") or [] if c is not a.get("cause") and (c.get("share") or {}).get("share")
                  is not None]
        for c in others[1:] if not a.get("cause") else others:
            if c.get("ablation_id") == (a.get("cause") or {}).get("ablation_id"):
                continue
            sh = c["share"]
            console.print(Text(f"  also tested: {c['fact']}: recovered {sh['share'] * 100:.0f}% of the gap", style="dim"))
    for n in why.get("noise") or []:
        console.print(Text(n["text"]))
    console.print()


def render_html(why):
    """The section's HTML (a string for the page template), or '' when it is empty."""
    if not why or not (why.get("answers") or why.get("noise")):
        return ""
    from .templating import render as render_template

    return render_template("why_section.html", why=why)


def render_markdown(why, escape):
    """The section's Markdown lines ([] when empty); escape: the report's own escaping of text."""
    if not why or not (why.get("answers") or why.get("noise")):
        return []
    out = ["## Why", ""]
    for a in why.get("answers") or []:
        out.append(f"- {escape(a['text'])}")
        if a.get("fix_toml"):
            out += ["", "  ```toml"] + [f"  {line}" for line in a["fix_toml"].splitlines()] + ["  ```", "",
                                                                                            f"  `{a['fix_flags']}`"]
    out += [f"- {escape(n['text'])}" for n in why.get("noise") or []]
    return out + [""]
