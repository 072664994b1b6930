"""`[[finding]]` entries of a study file: a published finding stated as data the analysis
can evaluate (analysis/findings.py), so a report says whether this machine reproduces it.

A finding compares a *subject* with a *reference* on one benchmark's points: a variant with
its baseline (the study's, or `baseline = NAME`), or one benchmark with another in the same
variant (`baseline_benchmark`). `expect` is the direction the paper found ("slower": the
subject costs more, i.e. takes longer or moves less per second), `at_least` the smallest
difference that counts as reproducing it, `paper` the size the paper reports, in words.
`needs` names what the finding needs beyond one machine (analysis/findings.py, NEEDS); where it
is missing the verdict is "not measurable here" with the reason. What a finding names is
checked against the planned cells by plan/finding_check.py.
"""

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, StrictStr, model_validator

NEED_NAMES = ("multi-node", "interconnect", "setuid")


class Finding(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: StrictStr = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
    statement: StrictStr = Field(min_length=1, max_length=2000)
    source: StrictStr = Field("", max_length=500)          # where the paper says it
    benchmark: StrictStr = Field(min_length=1, max_length=256)
    variant: StrictStr = Field(min_length=1, max_length=300)  # a named variant or a variant id
    baseline: StrictStr | None = Field(None, max_length=300)  # default: the variant's baseline in the study
    baseline_benchmark: StrictStr | None = Field(None, max_length=256)  # benchmark vs benchmark, same variant
    metric: StrictStr | None = Field(None, max_length=128)
    where: dict[StrictStr, StrictStr | StrictInt] = {}     # point parameters, e.g. {size = 1048576}
    ranks: StrictInt | None = Field(None, ge=1)
    threads: StrictInt | None = Field(None, ge=1)
    expect: Literal["slower", "faster", "same"]
    at_least: StrictFloat | None = Field(None, gt=0, lt=100, allow_inf_nan=False)
    paper: StrictStr = Field("", max_length=500)
    needs: list[Literal[NEED_NAMES]] = []

    @model_validator(mode="after")
    def _consistent(self):
        if self.expect == "same" and self.at_least is not None:
            raise ValueError("at_least applies to expect = \"slower\" or \"faster\" (\"same\" uses the study's margin)")
        if self.baseline_benchmark is not None and self.baseline_benchmark == self.benchmark:
            raise ValueError("baseline_benchmark names the benchmark itself")
        if self.baseline_benchmark is not None and self.baseline is not None:
            raise ValueError("give baseline (another variant) or baseline_benchmark (another benchmark), not both")
        return self
