#!/usr/bin/env bash
# Command 1: set everything up, then run nearmetal's main job: the built-in quickstart
# study (native vs hybrid vs bind, both MPIs), its terminal summary and its HTML report.
# Re-running completes an interrupted study (--resume) or just reports a finished one.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export USER=${USER:-$(id -un)}
.venv/bin/nearmetal doctor
exec .venv/bin/nearmetal study --resume
