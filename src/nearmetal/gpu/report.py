"""doctor's GPU section: the discovery record (discovery.gpu.discover) as JSON and as a table."""


def collect(found=None):
    """The doctor record: the GPUs, driver, device nodes, driver libraries and mechanisms."""
    from ..discovery.gpu import discover

    found = found if found is not None else discover()
    return {"gpus": found["gpus"], "driver": found["driver"], "cuda": found["cuda"], "devices": found["devices"],
            "libraries": found["libraries"], "library_dirs": found["library_dirs"],
            "mechanisms": found["mechanisms"], "sources": found["sources"]}


def render(gpu, console):
    """One line when there is no GPU; else a table of GPUs and lines for the rest."""
    from rich.table import Table

    if not gpu["gpus"]:
        console.print("[bold]GPUs[/] none found (no NVIDIA driver in /proc/driver/nvidia, no NVML, no nvidia-smi): "
                      "--gpus is refused on this machine", highlight=False)
        return
    t = Table(title=f"GPUs (driver {gpu['driver'] or '?'}, CUDA {gpu['cuda'] or '?'}; from {', '.join(gpu['sources'])})",
              title_justify="left", title_style="bold")
    for col in ("index", "model", "memory", "PCI bus id", "UUID"):
        t.add_column(col)
    for g in gpu["gpus"]:
        mem = f"{g['memory_mib']} MiB" if g.get("memory_mib") else "?"
        t.add_row(str(g["index"]), g.get("model") or "?", mem, g.get("pci_bus_id") or "?", g.get("uuid") or "?")
    console.print(t)
    console.print(f"  device nodes: {' '.join(gpu['devices']) or 'none'}", highlight=False)
    libs = gpu["libraries"]
    console.print(f"  driver libraries: {len(libs)} found"
                  + (f" ({', '.join(sorted(libs)[:6])}{', ...' if len(libs) > 6 else ''})" if libs else "")
                  + (f"; driver folders {', '.join(gpu['library_dirs'])}" if gpu["library_dirs"] else ""),
                  highlight=False)
    for name, how in gpu["mechanisms"].items():
        console.print(f"  {name}: {'[green]available[/] (' + how + ')' if how else '[red]not available[/]'}",
                      highlight=False)
