#!/usr/bin/env bash
# Nsight Compute on chosen plugin benchmark cases, on a machine with an NVIDIA GPU and ncu:
#   1. builds libtrt_plugin_kit.so + libplugin_bench.so with NVTX ranges around every enqueue
#      (-DTRT_PLUGIN_KIT_NVTX=ON, Release, for this GPU) into build/ncu,
#   2. runs python3 -m trt_plugin_kit.benchmarks.ncu: per case the tactic the plugin's timing picks, then ncu
#      on that tactic's enqueues (NVTX range "trt_plugin_kit@<Plugin> tactic <n>/"); writes ncu.json, ncu.md and
#      one raw CSV per case. Exits 1 when a case could not be profiled.
# Usage: scripts/gpu_ncu.sh [TENSORRT_HEADERS] [options of python3 -m trt_plugin_kit.benchmarks.ncu ...]
#   TENSORRT_HEADERS: a TensorRT version dir holding include/NvInferRuntime.h (or the include dir itself);
#                     default ../shared/vendor/tensorrt/11.1
#   Results go to $OUT when set (the device machine), else records/ncu; the build log to $OUT, else build/ncu.
#   e.g. scripts/gpu_ncu.sh .device/tensorrt/11.1                              (the default cases)
#        scripts/gpu_ncu.sh .device/tensorrt/11.1 --case fc/fp32/4096x800->500  (one case)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
HEADERS=${1:-../shared/vendor/tensorrt/11.1}
shift $(($# > 0 ? 1 : 0))
RESULTS=${OUT:-records/ncu}
LOGS=${OUT:-build/ncu}
BUILD=build/ncu
mkdir -p "$RESULTS" "$LOGS" "$BUILD"
export PYTHONUNBUFFERED=1

if [ -f "$HEADERS/include/NvInferRuntime.h" ]; then INCLUDE="$HEADERS/include"
elif [ -f "$HEADERS/NvInferRuntime.h" ]; then INCLUDE="$HEADERS"
else echo "gpu_ncu: no NvInferRuntime.h under $HEADERS (pass a TensorRT version dir, e.g. .device/tensorrt/11.1)"; exit 2
fi
INCLUDE=$(cd "$INCLUDE" && pwd)
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
if ! command -v ncu >/dev/null; then
  for d in /usr/local/cuda/bin /opt/nvidia/nsight-compute/*; do [ -x "$d/ncu" ] && export PATH="$d:$PATH" && break; done
fi
command -v ncu >/dev/null || { echo "gpu_ncu: no ncu (Nsight Compute) on this machine"; exit 2; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader || true
ncu --version | tail -1

start=$(date +%s)
echo "== build ($BUILD, NVTX on, TensorRT headers $INCLUDE); log: $LOGS/ncu-build.log"
if ! { cmake -S plugins -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DTENSORRT_INCLUDE_DIR="$INCLUDE" -DTRT_PLUGIN_KIT_NVTX=ON \
         ${CUDA_ARCHS:+-DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCHS"} \
       && cmake --build "$BUILD" -j "$(nproc)" --target trt_plugin_kit plugin_bench; } >"$LOGS/ncu-build.log" 2>&1; then
  tail -40 "$LOGS/ncu-build.log"
  echo "gpu_ncu: build FAILED"
  exit 1
fi
echo "== built in $(($(date +%s) - start)) s"

python3 -m trt_plugin_kit.benchmarks.ncu --build-dir "$BUILD" --out "$RESULTS" "$@"
status=$?
echo "== gpu_ncu: exit $status after $(($(date +%s) - start)) s; results in $RESULTS"
exit "$status"
