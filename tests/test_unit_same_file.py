"""study --resume: the study file compared as TOML (study/execute/same_file.py)."""

import pytest

from nearmetal.study.execute.same_file import difference

pytestmark = pytest.mark.unit

STUDY = """[study]
name = "tiny"
repetitions = 3
[matrix]
mode = ["native", "hybrid"]
[[benchmark]]
kernel = "latency"
args = ["-m", "8:8"]
"""


def test_comments_whitespace_and_line_endings_are_the_same_study():
    assert difference(STUDY, STUDY) is None
    assert difference(STUDY, STUDY + "# a note added while it was interrupted\n") is None
    assert difference(STUDY, STUDY.replace("\n", "\r\n").replace("= 3", "=   3")) is None


@pytest.mark.parametrize("changed, where", [
    (STUDY.replace("repetitions = 3", "repetitions = 4"), "study.repetitions"),
    (STUDY.replace('"hybrid"]', '"hybrid", "bind"]'), "matrix.mode (a list of 2, now 3)"),
    (STUDY.replace('"8:8"', '"8:16"'), "benchmark[0].args[1]"),
    (STUDY.replace("repetitions = 3", "repetitions = 3.0"), "study.repetitions"),  # 3 and 3.0: another type
    (STUDY + "seed = 1\n", "benchmark[0].seed"),
    ("not toml [", "the whole file"),
])
def test_a_real_change_is_named_by_its_first_key(changed, where):
    assert difference(STUDY, changed) == where
