#!/usr/bin/env bash
# Command 1: set everything up, then run nearmetal's main job.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export USER=${USER:-$(id -un)}
.venv/bin/nearmetal doctor
.venv/bin/python bench/pingpong_modes.py --repetitions 3 --out results/quickstart
