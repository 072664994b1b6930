"""nm-coupled: '#' header lines (`# build=...`, `# world_size=W atm_ranks=A ocn_ranks=O
mode=spmd|mpmd`), per-rank rows `  rank ROLE RANK WORLD BLOCK INIT MAIN_LOOP COMPUTE HALO
EXCHANGE` (absent with -q), per-component rows `  component ROLE RANKS INIT MAIN_LOOP COMPUTE
HALO EXCHANGE` (each column's largest value over the component's ranks), and result lines
`exchanges N`, `messages N`, `exchanged_values N`, `checksum ROLE VALUE`,
`reference_checksum ROLE VALUE`.

Every record's params carry world_size, atm_ranks, ocn_ranks and launch ("spmd" or "mpmd":
how the roles were given; params "mode" stays nearmetal's launch mode), plus simd and build.
Records:
  per component (component=atm|ocn, rank="max") and per rank (component, rank=R,
  world_rank=W), unit "s": init_s, main_loop_s, compute_s, halo_s, exchange_s
  checksum, reference_checksum (component=atm|ocn, unit ""): sum of the component's final
      field in global order (identical for every rank split and launch style)
  exchanges, messages, exchanged_values (unit "count"): coupling exchanges, verified
      coupling messages and values received over all ranks
"""

from . import record
from .stream import build_info

from .. import KernelSpec, register

register(KernelSpec("coupled", "nm-coupled", "coupled", "coupled-model proxy: two components on split MPI_COMM_WORLD exchanging fluxes", 2,
                    primary="main_loop_s"))


TIMES = ("init_s", "main_loop_s", "compute_s", "halo_s", "exchange_s")
COUNTS = ("exchanges", "messages", "exchanged_values")
ROLES = ("atm", "ocn")


def world_info(text):
    """{"world_size", "atm_ranks", "ocn_ranks", "launch"} from the `# world_size=...` line."""
    for line in text.splitlines():
        if line.startswith("# world_size="):
            fields = dict(tok.split("=", 1) for tok in line[2:].split() if "=" in tok)
            try:
                return {"world_size": int(fields["world_size"]), "atm_ranks": int(fields["atm_ranks"]),
                        "ocn_ranks": int(fields["ocn_ranks"]), "launch": fields.get("mode", "unknown")}
            except (KeyError, ValueError):
                return {}
    return {}


def _floats(parts):
    try:
        return [float(p) for p in parts]
    except ValueError:
        return None


def parse(text, kernel, params):
    params = dict(params, **build_info(text), **world_info(text))
    out = []
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) == 10 and parts[0] == "rank" and parts[1] in ROLES and parts[2].isdigit() and parts[3].isdigit():
            values = _floats(parts[5:])
            if values is not None:
                for name, value in zip(TIMES, values):
                    out.append(record(kernel, params, name, value, "s", component=parts[1], rank=int(parts[2]),
                                      world_rank=int(parts[3])))
        elif len(parts) == 8 and parts[0] == "component" and parts[1] in ROLES and parts[2].isdigit():
            values = _floats(parts[3:])
            if values is not None:
                for name, value in zip(TIMES, values):
                    out.append(record(kernel, params, name, value, "s", component=parts[1], rank="max"))
        elif len(parts) == 3 and parts[0] in ("checksum", "reference_checksum") and parts[1] in ROLES:
            values = _floats(parts[2:])
            if values is not None:
                out.append(record(kernel, params, parts[0], values[0], "", component=parts[1]))
        elif len(parts) == 2 and parts[0] in COUNTS and parts[1].isdigit():
            out.append(record(kernel, params, parts[0], int(parts[1]), "count"))
    return out
