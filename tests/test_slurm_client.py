"""Slurm's client commands as nearmetal calls them (slurm/batch.py): one that hangs or is
missing is a one-line NearmetalError, never a TimeoutExpired or FileNotFoundError traceback.
Real programs stand in for a slurmctld that stopped answering (sleep) and a missing sbatch."""

import pytest

from nearmetal.errors import NearmetalError
from nearmetal.slurm.batch import _scancel, _slurm

pytestmark = pytest.mark.integration


def test_a_client_command_that_hangs_is_a_clear_error():
    with pytest.raises(NearmetalError, match=r"`sleep` gave no answer in 0.2 s: is slurmctld running\?"):
        _slurm(["sleep", "30"], 0.2)


def test_a_missing_client_command_is_a_clear_error():
    with pytest.raises(NearmetalError, match="cannot run `nm-no-such-sbatch`: No such file or directory"):
        _slurm(["nm-no-such-sbatch", "--parsable"], 5)


def test_a_client_command_that_answers_is_returned():
    assert _slurm(["echo", "JobState=COMPLETED"], 5).stdout == "JobState=COMPLETED\n"


def test_cancelling_on_the_way_out_never_raises(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")  # no scancel: the caller's own error is what counts
    assert _scancel("123") is None
