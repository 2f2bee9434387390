#!/usr/bin/env bash
# Issue 43's GPU half in one command, on a machine with an NVIDIA GPU, CUDA 13, CMake and a python3 with PyTorch
# and Triton (the device machine's image):
#   1. builds libtrt_plugin_kit.so, libplugin_bench.so and plugin_harness once (Release, $CUDA_ARCHS, default
#      90-real: the attention kernel's sm_90a PTX cannot be kept for later GPUs),
#   2. the harness of RmsNormLastAxis, FlashAttentionTriton and SwiGLUSplit (every type, shape and tactic),
#   3. the plugin benchmark of RMSNorm and attention against PyTorch (every tactic's time in its table),
#   4. mnist_vit's whole forward as one CUDA graph, plugins against PyTorch (trt_plugin_kit.models.vit_graph;
#      it checks both flavours against the NumPy model on the validation digits and writes PyTorch's logits),
#   5. mnist_vit's PyTorch module exported in both flavours and checked (trt_plugin_kit.models.vit_torch_export),
#   6. compute-sanitizer memcheck (leak check), racecheck and synccheck of the three plugins.
# Usage: scripts/gpu_transformer.sh [TENSORRT_HEADERS]   (a version dir holding include/NvInferRuntime.h;
#   default ../shared/vendor/tensorrt/11.1). MNIST_DIR names the digits' folder when ../shared is not there.
# STEPS picks steps 2-6 (default "harness bench graph export sanitizers"; e.g. STEPS=graph: build and the graph);
# BENCH_BUDGET (s, default 200) bounds step 3's measurements; PLUGINS (default "RmsNormLastAxis
# FlashAttentionTriton SwiGLUSplit") the harness's and sanitizers' plugins, BENCH_ONLY (default
# "rms_norm,attention") the benchmark's cases (e.g. PLUGINS=RmsNormLastAxis BENCH_ONLY=rms_norm).
# Everything goes to $OUT (the device machine) or build/gpu-transformer: logs, the benchmark's and the graph's
# records, summary.txt (one line per step). Exit status 1 when a step fails.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
HEADERS=${1:-../shared/vendor/tensorrt/11.1}
LOGS=${OUT:-build/gpu-transformer}
BUILD=build/gpu-transformer-build
read -r -a PLUGINS <<<"${PLUGINS:-RmsNormLastAxis FlashAttentionTriton SwiGLUSplit}"
BENCH_ONLY=${BENCH_ONLY:-rms_norm,attention}
SANITIZER_MAX_ELEMENTS=${SANITIZER_MAX_ELEMENTS:-300000}
mkdir -p "$LOGS" "$BUILD"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
STEPS=" ${STEPS:-harness bench graph export sanitizers} "
wants() { [[ "$STEPS" == *" $1 "* ]]; }
status=0
summary=()
note() { summary+=("$1"); echo "== $1"; }
step() {  # NAME SECONDS LOG COMMAND...: runs it with a time limit, notes its exit status
  local name=$1 limit=$2 log=$3 begin; shift 3; begin=$(date +%s)
  timeout "$limit" "$@" >"$log" 2>&1; local rc=$?
  [ $rc -eq 0 ] || status=1
  note "$name: exit $rc after $(($(date +%s) - begin)) s ($(basename "$log"))"
  return $rc
}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$LOGS/device.txt"
INCLUDE=$(cd "$HEADERS/include" && pwd) || { echo "no $HEADERS/include"; exit 2; }
step build 300 "$LOGS/build.log" bash -c "cmake -S plugins -B $BUILD -DCMAKE_BUILD_TYPE=Release \
  -DTENSORRT_INCLUDE_DIR=$INCLUDE -DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCHS:-90-real} \
  -DTRT_PLUGIN_KIT_PYTHON=$(command -v python3) && cmake --build $BUILD -j $(nproc) --target plugin_bench plugin_harness" \
  || { tail -40 "$LOGS/build.log"; printf '%s\n' "${summary[@]}" >"$LOGS/summary.txt"; exit 1; }

wants harness && for plugin in "${PLUGINS[@]}"; do
  step "harness $plugin" 120 "$LOGS/harness-$plugin.log" "$BUILD/plugin_harness" --library "$BUILD/libtrt_plugin_kit.so" --filter "$plugin"
  summary[-1]="${summary[-1]} $(grep -E '^harness:' "$LOGS/harness-$plugin.log")"; grep -E '^FAIL' "$LOGS/harness-$plugin.log" | head -5
done

wants bench && step "benchmark $BENCH_ONLY" 240 "$LOGS/bench-run.log" python3 -m trt_plugin_kit.benchmarks --build-dir "$BUILD" \
  --out "$LOGS" --only "$BENCH_ONLY" --no-chart --tactics --time-budget "${BENCH_BUDGET:-200}"
wants bench && summary[-1]="${summary[-1]} $(grep -m1 -E 'Targets:' "$LOGS/benchmark.md")"
wants graph && step "mnist_vit CUDA graph" 150 "$LOGS/vit-graph.log" python3 -m trt_plugin_kit.models.vit_graph --build-dir "$BUILD" --out "$LOGS"
wants export && step "mnist_vit torch export" 120 "$LOGS/vit-export.log" python3 -m trt_plugin_kit.models.vit_torch_export --out "$LOGS"

tools=(memcheck racecheck synccheck); wants sanitizers || tools=()
for tool in "${tools[@]}"; do
  extra=""; [ "$tool" = memcheck ] && extra="--leak-check full"
  log="$LOGS/sanitizer-$tool.log"; : >"$log"; begin=$(date +%s); rc=0
  for plugin in "${PLUGINS[@]}"; do
    echo "== $tool --filter $plugin" >>"$log"
    timeout 200 compute-sanitizer --tool $tool $extra --error-exitcode 99 "$BUILD/plugin_harness" \
      --library "$BUILD/libtrt_plugin_kit.so" --filter "$plugin" --max-elements "$SANITIZER_MAX_ELEMENTS" >>"$log" 2>&1 || rc=$?
  done
  [ $rc -eq 0 ] || status=1
  note "compute-sanitizer $tool (cases <= $SANITIZER_MAX_ELEMENTS elements): exit $rc after $(($(date +%s) - begin)) s: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|LEAK SUMMARY|harness:' "$log" | tr '\n' ' ')"
done
printf '%s\n' "${summary[@]}" | tee "$LOGS/summary.txt"
exit $status
