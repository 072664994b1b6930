#!/bin/bash
# The on-GPU check of issue 30, in one command, on a machine with an NVIDIA GPU (docs/gpu.md):
#   bash bench/gpu_check.sh [CARRIED_FOLDER]     (default: .gpu-check, from bench/gpu_check_assemble.py)
# Needs Python 3 and the working tree's src/; writes $OUT/gpu_check.json and gpu_check.txt
# (OUT: the device machine's output folder; ./gpu-check-out elsewhere). About 1-2 minutes.
set -u
cd "$(dirname "$0")/.."
BUNDLE=${1:-.gpu-check}
OUT=${OUT:-$PWD/gpu-check-out}
mkdir -p "$OUT"
PY=$(command -v python3.12 || command -v python3)
{ echo "# $(date -u +%FT%TZ) $(uname -r)"; nvidia-smi -L 2>&1 | head -8; ls -l /usr/local/nvidia 2>&1 | head -5; } \
  > "$OUT/machine.txt"
timeout 290 "$PY" bench/gpu_check.py --bundle "$BUNDLE" --out "$OUT"
rc=$?
echo "gpu_check: exit $rc; results in $OUT/gpu_check.json"
exit $rc
