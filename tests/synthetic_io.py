"""A real results store (SQLite) holding a synthetic I/O study, for the report's Parallel I/O
tests: the records nm-iobench's parser gives, drawn around a model of seed 004's findings."""

import json

import numpy as np

from nearmetal.io.analysis import conf_from_args, conf_from_label
from nearmetal.study.plan.plan import variant_id
from nearmetal.study.store.store import Store


IO_PHASES = ("open_s", "write_s", "close_s", "read_s")
IO_BYTES = 2 * 48 * (1 << 20)  # 512x512x16 doubles + floats, 2 steps


def io_model(conf):
    """True median seconds per phase of one I/O configuration (an io.analysis.IOConf) on the
    slowest rank, and the share of rank 0 in the write (serial: rank 0 writes everything).
    Shaped like seed 004's findings: serial slowest, shared files fastest with aggregators
    matching the stripes, HDF5 dearer to open and close, chunking along x costly."""
    write = {"serial": 1.0, "file-per-rank": 0.30, "io-domains": 0.40, "shared": 0.25}[conf.pattern]
    if conf.pattern in ("io-domains", "shared") and conf.io_layout:
        ix, iy = (int(x) for x in conf.io_layout.split("x"))
        write *= 1.0 + 0.5 / (ix * iy)  # fewer I/O domains, fewer writers
    write *= {"posix": 1.0, "mpiio": 1.0, "pnetcdf": 1.08, "netcdf4": 1.3, "hdf5": 1.2}[conf.library]
    if conf.aggregators is not None:
        write *= 1.0 + 0.12 * abs(conf.aggregators - 2)
    if conf.stripes is not None:
        write *= 1.0 + 0.06 * abs(conf.stripes - (conf.aggregators or 1))
    if conf.chunk and conf.chunk != "default":
        cx, cy = (int(x) for x in conf.chunk.split("x"))
        write *= 1.0 + 0.35 * (cx - 1) + 0.04 * (cy - 1)
    elif conf.chunk == "default" and conf.library == "netcdf4":
        write *= 1.15
    heavy = conf.library in ("hdf5", "netcdf4")
    return {"open_s": 0.03 if heavy else 0.01, "write_s": write, "close_s": 0.02 if heavy else 0.004,
            "read_s": 0.0 if conf.read == "none" else (0.25 if conf.read == "serial" else 0.3)}


def synthetic_io_store(path, benchmarks, *, variants=None, ranks=2, reps=6, seed=0, name="io-synthetic",
                       not_honoured=None, model=io_model, noise=0.03, in_container=None):
    """Write a real results store (study.store.Store, SQLite at path) holding an I/O study:
    every benchmark x variant measured `reps` times in randomized blocks, with the records
    nm-iobench's parser gives (per rank and "max": open_s write_s close_s read_s total_s;
    rank "total": write_bw read_bw bytes files and hint.<key>). benchmarks: configuration
    labels, or (name, args) pairs for ordinary names whose configuration is in their
    kernel arguments (a regular study such as the quickstart). variants: dicts with mode,
    runtime, mpi, image (default: native Open MPI). not_honoured: {benchmark: [hint keys
    recorded as 0 = ignored]}. in_container: {benchmark: factor} scaling that configuration's
    times in every variant that is not native. Returns the store's path."""
    variants = variants or [{"mode": "native", "runtime": None, "mpi": "openmpi", "image": None}]
    rng = np.random.default_rng(seed)
    items = []
    toml = [f'[study]\nname = "{name}"\nrepetitions = {reps}\nwarmup = 0\nseed = {seed}\n',
            '[baseline]\nmode = "native"\n',
            "[matrix]\nmode = [" + ", ".join(sorted({f'"{v["mode"]}"' for v in variants})) + "]\nmpi = ["
            + ", ".join(sorted({f'"{v["mpi"]}"' for v in variants})) + f"]\nranks = [{ranks}]\n"]
    for b in benchmarks:
        bname, args = (b, None) if isinstance(b, str) else b
        conf = conf_from_label(bname) if args is None else conf_from_args(args)
        if conf is None:
            raise ValueError(f"not an I/O configuration: {b!r}")
        items.append((bname, conf))
        toml.append('[[benchmark]]\nkernel = "iobench"\nname = ' + json.dumps(bname)
                    + ("\nargs = " + json.dumps(list(args)) if args is not None else "") + "\n")
    store = Store(path)
    sid = store.create_study(name, "\n".join(toml), seed, 0.03, {"mode": "native"}, "0.1.0",
                             "2025-05-01T12:00:00+00:00")
    runs, records = [], []
    position = 0
    for block in range(reps):
        order = [(v, b) for v in variants for b in items]
        for i in rng.permutation(len(order)):
            v, (bname, conf) = order[i]
            true = model(conf)
            if v["mode"] != "native" and bname in (in_container or {}):
                true = {ph: t * in_container[bname] for ph, t in true.items()}
            files = {"serial": 1, "file-per-rank": ranks, "shared": 1}.get(conf.pattern)
            if files is None:
                ix, iy = (int(x) for x in (conf.io_layout or "1x1").split("x"))
                files = ix * iy
            per_rank = []
            for r in range(ranks):
                # serial: the others send and wait in the next gather for rank 0's write
                share = 1.0 if conf.pattern != "serial" or r == 0 else 0.9
                vals = {ph: true[ph] * (share if ph == "write_s" else 1.0) * float(np.exp(rng.normal(0, noise)))
                        for ph in IO_PHASES}
                vals["total_s"] = sum(vals[ph] for ph in IO_PHASES)
                per_rank.append(vals)
            recs = [{"metric": m, "unit": "s", "value": vals[m], "point": {"rank": r}}
                    for r, vals in enumerate(per_rank) for m in (*IO_PHASES, "total_s")]
            mx = {m: max(vals[m] for vals in per_rank) for m in (*IO_PHASES, "total_s")}
            recs += [{"metric": m, "unit": "s", "value": mx[m], "point": {"rank": "max"}} for m in mx]
            wtime = max(vals["open_s"] + vals["write_s"] + vals["close_s"] for vals in per_rank)
            recs += [{"metric": "write_bw", "unit": "MB/s", "value": IO_BYTES / wtime / 1e6,
                      "point": {"rank": "total"}},
                     {"metric": "bytes", "unit": "bytes", "value": float(IO_BYTES), "point": {"rank": "total"}},
                     {"metric": "files", "unit": "count", "value": float(files), "point": {"rank": "total"}}]
            if mx["read_s"] > 0:
                recs.append({"metric": "read_bw", "unit": "MB/s", "value": IO_BYTES / mx["read_s"] / 1e6,
                             "point": {"rank": "total"}})
            if conf.aggregators is not None or conf.stripes is not None:
                keys = (["cb_nodes", "cb_config_list"] if conf.aggregators is not None else []) + \
                    (["striping_factor"] if conf.stripes is not None else [])
                bad = set((not_honoured or {}).get(bname, ()))
                recs += [{"metric": f"hint.{k}", "unit": "bool", "value": 0.0 if k in bad else 1.0,
                          "point": {"rank": "total"}} for k in keys]
            vid = variant_id(v)
            runs.append({"run_key": f"{bname}|{vid}|n={ranks}|b{block}", "position": position, "block": block,
                         "repetition": block, "warmup": False, "benchmark": bname, "kernel": "iobench",
                         "variant": vid, "variant_json": v, "ranks": ranks, "threads": 1})
            records.append(recs)
            position += 1
    store.add_finished(sid, runs, records)
    store.close()
    return path
