#!/usr/bin/env bash
# Reliability runs of the plugin library on a machine with an NVIDIA GPU (reliability round), in one command:
#   1. builds libtrt_plugin_kit.so + plugin_stress against one TensorRT header set ($BUILD_DIR/gpu-<version>,
#      default build/gpu-<version>, the folder scripts/gpu_check.sh uses: after it, nothing is rebuilt),
#   2. fuzz: 10,000 generated field collections per creator in kBUILD and kRUNTIME (+ serialize round trips,
#      build calls, random shapes),
#   3. lifecycle: 10,000 create -> attach -> onShapeChange -> enqueue -> destroy cycles per plugin with device
#      memory and host RSS sampled (bounds: GPU <= 2 MiB, host <= 8 MiB growth after the warm-up),
#   4. concurrency: 8 threads with their own attached clone and stream on every small conformance case,
#   5. compute-sanitizer: memcheck --leak-check full on a short lifecycle run, racecheck and synccheck on a
#      short concurrency run.
# Usage: scripts/gpu_stress.sh [TENSORRT_DIR]   (a folder with include/; default ../shared/vendor/tensorrt/11.1)
# Logs (4 files) in ${OUT:-$BUILD_DIR/gpu-stress}: stress.log (device, build, summary), fuzz.log, runs.log
# (lifecycle + concurrency), sanitizers.log. Exit status 0 when everything passed. About 5 minutes on an H100.
# The committed logs of its runs are in records/stress/ (described in docs/reliability.md).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
TRT_DIR=${1:-../shared/vendor/tensorrt/11.1}
BUILD_DIR=${BUILD_DIR:-build}
LOGS=${OUT:-$BUILD_DIR/gpu-stress}
FUZZ_ITERATIONS=${FUZZ_ITERATIONS:-10000}
LIFECYCLE_CYCLES=${LIFECYCLE_CYCLES:-10000}
SANITIZER_CYCLES=${SANITIZER_CYCLES:-100}
mkdir -p "$LOGS"
if [ ! -f "$TRT_DIR/include/NvInferRuntime.h" ]; then
  echo "gpu_stress.sh: $TRT_DIR/include/NvInferRuntime.h not found (pass the folder that holds include/)" >&2
  exit 2
fi
TRT_DIR=$(cd "$TRT_DIR" && pwd)
version=$(basename "$TRT_DIR")
build=$BUILD_DIR/gpu-$version
bin="$build/plugin_stress"
lib="$build/libtrt_plugin_kit.so"
status=0
summary=()
note() { summary+=("$1"); echo "== $1" | tee -a "$LOGS/stress.log"; }

for log in stress fuzz runs sanitizers; do : >"$LOGS/$log.log"; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$LOGS/stress.log"
start=$SECONDS
if ! { cmake -S plugins -B "$build" -DCMAKE_BUILD_TYPE=Release -DTENSORRT_INCLUDE_DIR="$TRT_DIR/include" \
       && cmake --build "$build" -j "$(nproc)" --target plugin_stress; } >>"$LOGS/stress.log" 2>&1; then
  note "build against TensorRT $version headers: FAILED"; tail -30 "$LOGS/stress.log"; exit 1
fi
note "build against TensorRT $version headers: ok ($((SECONDS - start)) s)"

run() {  # run LOG LABEL COMMAND...: appends to LOG, records the verdict
  local log=$1 label=$2; shift 2
  local t0=$SECONDS from
  from=$(($(wc -l <"$log") + 1))
  echo "### $label: $*" >>"$log"
  "$@" >>"$log" 2>&1 || status=1
  note "$label: $(tail -n +"$from" "$log" | grep -E '^stress:|ERROR SUMMARY' | tr '\n' ' ')($((SECONDS - t0)) s)"
}

run "$LOGS/fuzz.log" "fuzz, $FUZZ_ITERATIONS collections per creator" \
  "$bin" fuzz --library "$lib" --iterations "$FUZZ_ITERATIONS" --seed 9 --time-limit 400
grep -E '^(PASS|FAIL) fuzz' "$LOGS/fuzz.log" | cut -c1-400

run "$LOGS/runs.log" "lifecycle, $LIFECYCLE_CYCLES cycles per plugin" \
  "$bin" lifecycle --library "$lib" --cycles "$LIFECYCLE_CYCLES" --time-limit 400
run "$LOGS/runs.log" "concurrency, 8 threads x 200 enqueues per case" \
  "$bin" concurrency --library "$lib" --threads 8 --iterations 200 --time-limit 300
grep -E '^(FAIL|PASS lifecycle|  [A-Za-z0-9]+ samples)' "$LOGS/runs.log" | cut -c1-600

run "$LOGS/sanitizers.log" "memcheck --leak-check full, lifecycle $SANITIZER_CYCLES cycles per plugin" \
  compute-sanitizer --tool memcheck --leak-check full --error-exitcode 99 \
  "$bin" lifecycle --library "$lib" --cycles "$SANITIZER_CYCLES" --no-memory-bounds --time-limit 400
for tool in racecheck synccheck; do
  run "$LOGS/sanitizers.log" "$tool, concurrency 4 threads x 4 enqueues, 2 small cases per plugin" \
    compute-sanitizer --tool $tool --error-exitcode 99 \
    "$bin" concurrency --library "$lib" --threads 4 --iterations 4 --max-elements 4096 --max-cases-per-plugin 2 \
    --time-limit 300
done
grep -E '^FAIL|ERROR SUMMARY|^=========.*(Error|Leak|leak|hazard)' "$LOGS/sanitizers.log" | head -40

note "total $((SECONDS - start)) s; exit $status"
echo "== summary (also in $LOGS/stress.log)"
printf '%s\n' "${summary[@]}"
exit $status
