"""Which I/O layer's time grew (netCDF, PnetCDF, HDF5, MPI-IO, POSIX), from the study's traces
(`trace = true`, `nearmetal trace`): each layer's inclusive time per traced process, median over
the variant's traced runs, against the baseline's. Says where, tests nothing."""

from . import EXPLAINERS
from .base import Explainer


@EXPLAINERS.register
class IoLayer(Explainer):
    title = "which I/O layer's time grew"

    def examine(self, slow, base):
        s, b = slow.io_layers, base.io_layers
        if not s or not b:
            return []
        grew = {k: s.get(k, 0.0) - b.get(k, 0.0) for k in set(s) | set(b)}
        up = sorted(((k, v) for k, v in grew.items() if v > 0), key=lambda kv: -kv[1])
        if not up:
            return []
        parts = [f"{k} {v * 1e3:+.1f} ms" for k, v in up[:3]]
        return [self.cause("I/O time per traced process (a layer's time includes the layers below it): "
                           + ", ".join(parts), 0.5, descriptive=True, details={"grew_s": grew, "top": up[0][0]})]
