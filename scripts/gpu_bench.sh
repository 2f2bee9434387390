#!/usr/bin/env bash
# The plugin benchmark of the roofline and serving-size rounds in one command on a machine with an NVIDIA GPU:
#   1. builds libtrt_plugin_kit.so + libplugin_bench.so (Release, for this GPU) into build/bench,
#   2. runs python3 -m trt_plugin_kit.benchmarks: copy bandwidth, every plugin's enqueue and its PyTorch peers,
#      the LeNet plugin chain as one CUDA graph per forward against PyTorch's, targets; writes benchmark.json,
#      benchmark.md, benchmark.png. Exits with its status: 1 when a target fails, so that a regression fails the run.
# Usage: scripts/gpu_bench.sh [TENSORRT_HEADERS] [benchmark options (python3 -m trt_plugin_kit.benchmarks --help)...]
#   TENSORRT_HEADERS: a TensorRT version dir holding include/NvInferRuntime.h (or the include dir itself);
#                     default ../shared/vendor/tensorrt/11.1
#   Results go to $OUT when set (the device machine), else records/benchmarks; the two logs
#   (bench-build.log, bench-run.log) to $OUT, else build/bench. Five files in all.
#   e.g. scripts/gpu_bench.sh .device/tensorrt/11.1            (the full run, < 6 minutes on an H100)
#        scripts/gpu_bench.sh .device/tensorrt/11.1 --quick    (smoke test)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
HEADERS=${1:-../shared/vendor/tensorrt/11.1}
shift $(($# > 0 ? 1 : 0))
RESULTS=${OUT:-records/benchmarks}
LOGS=${OUT:-build/bench}
BUILD=build/bench
mkdir -p "$RESULTS" "$LOGS" "$BUILD"
export PYTHONUNBUFFERED=1

if [ -f "$HEADERS/include/NvInferRuntime.h" ]; then INCLUDE="$HEADERS/include"
elif [ -f "$HEADERS/NvInferRuntime.h" ]; then INCLUDE="$HEADERS"
else echo "gpu_bench: no NvInferRuntime.h under $HEADERS (pass a TensorRT version dir, e.g. .device/tensorrt/11.1)"; exit 2
fi
INCLUDE=$(cd "$INCLUDE" && pwd)
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader || true

start=$(date +%s)
echo "== build ($BUILD, TensorRT headers $INCLUDE); log: $LOGS/bench-build.log"
if ! { cmake -S plugins -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DTENSORRT_INCLUDE_DIR="$INCLUDE" \
         ${CUDA_ARCHS:+-DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCHS"} \
       && cmake --build "$BUILD" -j "$(nproc)" --target plugin_bench pack_rows_probe; } >"$LOGS/bench-build.log" 2>&1; then
  tail -40 "$LOGS/bench-build.log"
  echo "gpu_bench: build FAILED"
  exit 1
fi
echo "== built in $(($(date +%s) - start)) s"

python3 -m trt_plugin_kit.benchmarks --build-dir "$BUILD" --out "$RESULTS" "$@" 2>&1 | tee "$LOGS/bench-run.log"
status=${PIPESTATUS[0]}
echo "== gpu_bench: exit $status after $(($(date +%s) - start)) s; results in $RESULTS: $(find "$RESULTS" -maxdepth 1 -type f -printf '%f ')"
exit "$status"
