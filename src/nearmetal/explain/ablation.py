"""An explainer's ablation made a study variant: validated by the study file's own Variant
model (a variant a study file could name), named after the slow variant and the factor it
changes ("tcp--no-ompi-mca-btl"), with the slow variant's placement, and shown as a
ready-to-paste [[variant]] and as `nearmetal run` flags."""

import hashlib
import json
import re
import shlex

from ..errors import NearmetalError
from ..models import in_container, names
from ..networks import is_default
from ..study.config import placement

_NAME = re.compile(r"[^A-Za-z0-9._-]+")
MAX_NAME = 64


def name_for(slow_id, factor):
    """A variant name (^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$) saying which variant and which factor."""
    tail = "--" + (_NAME.sub("-", factor).strip("-") or "ablation")
    head = _NAME.sub("-", slow_id).strip("-._") or "variant"
    if len(head) + len(tail) > MAX_NAME:
        digest = hashlib.sha256(slow_id.encode()).hexdigest()[:6]
        head = head[:MAX_NAME - len(tail) - 7].rstrip("-._") + "-" + digest
    return (head + tail)[:MAX_NAME]


def as_variant(ablation, name):
    """The stored variant dict of an ablation (its placement kept), validated as a [[variant]];
    a NearmetalError saying why when the change makes no valid variant."""
    from pydantic import ValidationError

    from ..study.config.config import Variant

    fields = {k: v for k, v in ablation.items() if k in Variant.model_fields and k != "name" and v is not None}
    if fields.get("mode") in names() and not in_container(fields["mode"]):  # unknown: the Variant's error
        for k in ("runtime", "image", "image_format", "image_place", "runtime_args"):
            fields.pop(k, None)
    try:
        v = Variant(name=name, **fields)
    except ValidationError as e:
        first = e.errors()[0]
        raise NearmetalError(f"ablation {name}: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None
    return {**v.as_dict(), **placement.of(ablation)}


def toml_of(variant):
    """A ready-to-paste [[variant]] table of a stored variant dict."""
    lines = ["[[variant]]"]
    first = ("name", "mode", "runtime", "mpi", "image")
    for key, value in sorted(variant.items(), key=lambda kv: (first.index(kv[0]) if kv[0] in first else len(first))):
        if key in placement.DIMS or value in (None, "", False, {}, []):
            continue
        if isinstance(value, dict):
            inner = ", ".join(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in value.items())
            lines.append(f"{key} = {{ {inner} }}")
        else:
            lines.append(f"{key} = {json.dumps(value)}")
    return "\n".join(lines)


def run_flags(variant):
    """The same variant as `nearmetal run` flags (an argv, joined for display)."""
    argv = ["--mode", variant["mode"], "--mpi", variant["mpi"]]
    if in_container(variant["mode"]):
        argv += ["--runtime", variant.get("runtime") or "", "--image", variant.get("image") or "default"]
    for k, v in (variant.get("env") or {}).items():
        argv += ["--env", f"{k}={v}"]
    for a in variant.get("runtime_args") or []:
        argv.append(f"--runtime-arg={a}")
    if not is_default(variant.get("network")):
        argv += ["--network", variant["network"]]
    if variant.get("audit"):
        argv.append("--audit")
    if variant.get("user"):
        argv += ["--user", variant["user"]]
    return shlex.join(["nearmetal", "run", *argv, "--", "PROGRAM"])
