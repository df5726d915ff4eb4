#!/usr/bin/env bash
# Formalize GPU checks in one go (see benchmarks/gpu_check.py). On the lent GPU machine:
#   bash benchmarks/gpu_check.sh            -> $OUT/gpu_check.json (+ gpu_check.log)
# The hard timeout keeps the run under 5 minutes; the JSON is rewritten after every
# check, so whatever finished is reported even if the full-size checks run long.
set -u
cd "$(dirname "$0")/.."
out_dir="${OUT:-benchmarks/out}"
mkdir -p "$out_dir"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$out_dir/nvidia-smi.txt" 2>&1 || true
timeout -k 5 285 python benchmarks/gpu_check.py --out "$out_dir/gpu_check.json" "$@" 2>&1 | tail -c 200000 > "$out_dir/gpu_check.log"
rc=${PIPESTATUS[0]}
grep '^\[' "$out_dir/gpu_check.log" || true
echo "gpu_check exit status $rc; summary in $out_dir/gpu_check.json"
exit "$rc"
