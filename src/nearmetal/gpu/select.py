"""`--gpus all|N|ID,ID...`: what the switch names, checked twice — its spelling when the
command line is read (parse), the GPUs it names when a launch is planned (choose).

all: every GPU found; N (digits): a count, the first N GPUs in PCI bus order; a comma list:
GPU indices and/or UUIDs (GPU-...). A single index is a list of one: `--gpus 1,` (a bare
number is a count).
"""

import re

from ..errors import NearmetalError

_UUID = re.compile(r"^(GPU|MIG)-[0-9A-Za-z-]{1,80}$")


class GpuSpec:
    """A parsed --gpus value: kind "all", "count" (n) or "list" (items: int indices, str UUIDs)."""

    __slots__ = ("text", "kind", "count", "items")

    def __init__(self, text, kind, count=None, items=()):
        self.text, self.kind, self.count, self.items = text, kind, count, tuple(items)

    def __repr__(self):
        return f"GpuSpec({self.text!r})"


def parse(text):
    """The GpuSpec for a --gpus value, or a one-line error naming what is wrong."""
    value = str(text).strip()
    if value == "all":
        return GpuSpec(value, "all")
    if value.isdigit():
        n = int(value)
        if n < 1:
            raise NearmetalError(f"--gpus {text}: a count must be at least 1 (to name GPU {n}, write --gpus {n},)")
        return GpuSpec(value, "count", count=n)
    parts = [p.strip() for p in value.split(",")]
    if parts and parts[-1] == "" and len(parts) > 1:
        parts = parts[:-1]  # "1," names GPU 1
    if not parts or any(not p for p in parts):
        raise NearmetalError(f"--gpus {text!r}: expected all, a count, or a comma list of GPU indices/UUIDs")
    items = []
    for p in parts:
        if p.isdigit():
            items.append(int(p))
        elif _UUID.match(p):
            items.append(p)
        else:
            raise NearmetalError(f"--gpus {text!r}: '{p}' is neither a GPU index nor a GPU UUID (GPU-...)")
    if len(set(items)) != len(items):
        raise NearmetalError(f"--gpus {text!r}: a GPU is named twice")
    return GpuSpec(value, "list", items=items)


def canonical(text):
    """A --gpus value in one spelling (all, N, or the list without spaces, one item with its
    trailing comma): what a study stores and shows in variant ids. Refused as parse() does."""
    spec = parse(text)
    if spec.kind != "list":
        return spec.text
    return ",".join(str(i) for i in spec.items) + ("," if len(spec.items) == 1 else "")


def problem(text):
    """None when `text` is a valid --gpus value, else why not (without the "--gpus X: " that
    parse's errors start with): the one check the command line and study files share."""
    try:
        parse(text)
    except NearmetalError as e:
        return re.sub(r"^--gpus .*?: (?=[a-z'])", "", str(e), count=1)
    return None


def choose(spec, gpus):
    """The GPU records (discovery.gpu) that spec names, in the order given; one-line refusals:
    no GPU on this machine, a count above what it has, an index or UUID it does not have."""
    if isinstance(spec, str):
        spec = parse(spec)
    if not gpus:
        raise NearmetalError(f"--gpus {spec.text}: this machine has no NVIDIA GPU (no driver in /proc/driver/nvidia, "
                             "no NVML, no nvidia-smi)")
    ordered = sorted(gpus, key=lambda g: g["index"])
    if spec.kind == "all":
        return ordered
    if spec.kind == "count":
        if spec.count > len(ordered):
            raise NearmetalError(f"--gpus {spec.text}: this machine has {len(ordered)} GPU"
                                 f"{'s' if len(ordered) != 1 else ''}")
        return ordered[:spec.count]
    by_index = {g["index"]: g for g in ordered}
    by_uuid = {g.get("uuid"): g for g in ordered if g.get("uuid")}
    out = []
    for item in spec.items:
        g = by_index.get(item) if isinstance(item, int) else by_uuid.get(item)
        if g is None:
            have = ", ".join(str(g["index"]) for g in ordered)
            raise NearmetalError(f"--gpus {spec.text}: no GPU {item} on this machine (GPUs: {have})")
        if g in out:
            raise NearmetalError(f"--gpus {spec.text}: GPU {g['index']} is named twice (by index and by UUID)")
        out.append(g)
    return out
