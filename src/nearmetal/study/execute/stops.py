"""Runs that are not worth starting: a program benchmark whose first run found no figure of
merit or success line (no other run would find one), and a cell one of whose runs was not
one MPI job (evidence/lone.py: every run of the cell would start alike). Their planned runs
are stored as skipped with the reason, unless the benchmark (or the study) says
`keep_going = true`; a resumed study reads the stops back from the skipped runs' text."""

from ..records import RunResult
from ..store import codec
from . import hang

CELL_STOPPED = "the cell of benchmark "  # a skipped run's text: its cell was stopped, not its benchmark


def keep_going(config, bench):
    """Whether a benchmark's runs go on after a run that stops its benchmark or its cell."""
    return bench.keep_going if bench.keep_going is not None else config.study.keep_going


class Stops:
    """The stopped benchmarks and cells of one study: (kind, label or cell key) -> the text
    their runs left are skipped with."""

    def __init__(self):
        self._why = {}

    def read_back(self, row):
        """A skipped run stored before (an interrupted study): its benchmark or cell stays stopped."""
        text = row["stderr_tail"]
        key = ("cell", hang.cell_key(row["run_key"])) if str(text or "").startswith(f"skipped: {CELL_STOPPED}") \
            else ("benchmark", row["benchmark"])
        self._why[key] = text

    def text_for(self, row):
        """Why a planned run is skipped (its benchmark or its cell was stopped), or None."""
        return self._why.get(("benchmark", row["benchmark"])) or self._why.get(("cell", hang.cell_key(row["run_key"])))

    def stop(self, store, study_id, spec, why, output, now, cell=False):
        """Store the benchmark's runs still planned (cell: the cell's only) as skipped; the line
        to say. why: the reason (no figure of merit matched; the run was no MPI job, with its
        remedy); output: the stopping run's own output, its end kept for the user."""
        from ...apps.fom import tail

        label = spec.cell.benchmark.label
        what = f"{CELL_STOPPED}'{label}' on {spec.cell.variant_id}" if cell else f"benchmark '{label}'"
        after = "a run" if cell else "its first run"
        text = (f"skipped: {what} stopped after {after} ({spec.key}): {why}; every run would fail "
                f"alike (keep_going = true runs them anyway)\nthe end of that run's output: {tail(output, 600)}")
        rows = [r for r in store.pending(study_id)
                if (hang.cell_key(r["run_key"]) == spec.cell.key if cell else r["benchmark"] == label)]
        self._why[("cell", spec.cell.key) if cell else ("benchmark", label)] = text
        for row in rows:
            codec.store_result(store, row["id"], RunResult.skipped(now, text))
        return (f"{what} stopped after {after}: {why}; its {len(rows)} other runs are skipped "
                f"(keep_going = true runs them anyway)")
