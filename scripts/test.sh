#!/usr/bin/env bash
# Command 2: set everything up, then run the whole test suite.
#
# Without arguments: the unit tier first (pytest -m unit: no process, no MPI, no container;
# seconds), and only when it passes everything else (pytest -m "not unit"). With arguments:
# pytest with exactly those arguments (e.g. `bash scripts/test.sh -m unit`, or one file).
# docs/testing.md describes the tiers.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test
export USER=${USER:-$(id -un)}
if [ "$#" -gt 0 ]; then
    exec .venv/bin/python -m pytest "$@"
fi
.venv/bin/python -m pytest -m unit
exec .venv/bin/python -m pytest -m "not unit"
