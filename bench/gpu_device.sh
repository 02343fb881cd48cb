#!/usr/bin/env bash
# The real-GPU run of issue 23: environment, benches, the GPU test files, threshold sweeps.
# Each section runs under its own timeout and logs into $OUT; a failing or timed-out section
# never stops the next. Results: $OUT/results.jsonl (one JSON line per measurement).
#   OUT=/tmp/out bash bench/gpu_device.sh [--quick]     (--quick: small sizes, lavapipe)
# Budgets (seconds; about 330 in all): GD_ENV GD_BENCH GD_TESTS GD_SWEEP.
set -u
OUT=${OUT:-/tmp/gpu_device_out}
export OUT
mkdir -p "$OUT"
QUICK=""
[ "${1:-}" = "--quick" ] && QUICK="--quick"
PY=${PYTHON:-python3}
HERE=$(cd "$(dirname "$0")" && pwd)
cd "$HERE/.."
export PYTHONUNBUFFERED=1
# the NVIDIA adapter where there is one (the tests use whatever runtime.select_adapter picks)
if [ -z "${FUNGRAD_GPU_ADAPTER:-}" ] && command -v nvidia-smi >/dev/null 2>&1; then
  export FUNGRAD_GPU_ADAPTER=nvidia
fi
T0=$(date +%s)
section() {  # name budget command...
  local name=$1 budget=$2; shift 2
  local s=$(date +%s)
  echo "=== $name (budget ${budget}s, at $(( s - T0 ))s) ==="
  timeout -k 5 "$budget" "$@" >>"$OUT/$name.log" 2>&1
  local rc=$?
  echo "=== $name: rc=$rc in $(( $(date +%s) - s ))s ===" >>"$OUT/$name.log"
  tail -n 25 "$OUT/$name.log"
}

{
  echo "date: $(date -u)"; uname -a; nproc
  if command -v nvidia-smi >/dev/null 2>&1; then nvidia-smi -q | head -40; nvidia-smi; fi
  echo "VK_DRIVER_FILES=${VK_DRIVER_FILES:-}"
  echo "FUNGRAD_GPU_ADAPTER=${FUNGRAD_GPU_ADAPTER:-}"
  "$PY" -c "import wgpu, numpy, llvmlite; print('wgpu', wgpu.__version__, 'numpy', numpy.__version__, 'llvmlite', llvmlite.__version__)"
} > "$OUT/env.log" 2>&1
head -c 3000 "$OUT/env.log"

section env "${GD_ENV:-20}" "$PY" bench/gpu_device.py env $QUICK
section bench "${GD_BENCH:-100}" "$PY" bench/gpu_device.py bench $QUICK

# the GPU test files, on the adapter chosen above
PYTEST_ARGS=(-q -p no:cacheprovider --maxfail 20 -rfE --junitxml "$OUT/gpu_tests.xml")
"$PY" -c "import pytest_timeout" 2>/dev/null && PYTEST_ARGS+=(--timeout 60)
if "$PY" -c "import xdist" 2>/dev/null && [ -z "$QUICK" ]; then PYTEST_ARGS+=(-n 8); fi
TEST_FILES=(tests/test_gpu_*.py)
section tests "${GD_TESTS:-110}" env CI=true "$PY" -m pytest "${TEST_FILES[@]}" "${PYTEST_ARGS[@]}"

section sweep "${GD_SWEEP:-90}" "$PY" bench/gpu_device.py sweep $QUICK
"$PY" bench/gpu_device.py summary 2>&1 | tee "$OUT/summary.log"
echo "total $(( $(date +%s) - T0 ))s; files: $(ls "$OUT" | tr '\n' ' ')"
