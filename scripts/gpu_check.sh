#!/usr/bin/env bash
# The plugin library's GPU verification, in one command on a machine with an NVIDIA GPU:
#   1. builds libtrt_plugin_kit.so + plugin_harness against every TensorRT header set,
#   2. runs the full harness on the GPU (every plugin x dtype x shape, graph replay, bad fields, shapes),
#   3. cross-checks the dumped small cases with the NumPy references (trt_plugin_kit.specs.reference),
#   4. reruns the small cases under compute-sanitizer memcheck (with leak check) and racecheck.
# Usage: scripts/gpu_check.sh [HEADERS_DIR]   (default ../shared/vendor/tensorrt; logs in $OUT or build/gpu-check)
# The committed summaries of its runs are in records/harness/.
# Narrower runs (e.g. new plugins): HARNESS_FILTER="TEXT ..." (harness and sanitizers: cases whose name holds
# one of the words, one harness run per word), SANITIZER_FILTER="TEXT ..." (sanitizers only),
# HARNESS_MAX_ELEMENTS=N (skip larger cases everywhere), CUDA_ARCHS (e.g. 90-real: one GPU's build, minutes less).
# The Triton kernels (plugins/*/kernel.py) are compiled by the build with python3's triton (the GPU image has it).
set -uo pipefail
cd "$(dirname "$0")/.."
HEADERS=${1:-../shared/vendor/tensorrt}
LOGS=${OUT:-build/gpu-check}
mkdir -p "$LOGS"
SANITIZER_MAX_ELEMENTS=${SANITIZER_MAX_ELEMENTS:-300000}
# One harness run per filter word ("" = every case); the runs' logs follow one another.
filters=(${HARNESS_FILTER:-""}); [ -n "${HARNESS_FILTER:-}" ] || filters=("")
sanitizer_filters=(${SANITIZER_FILTER:-${HARNESS_FILTER:-""}}); [ ${#sanitizer_filters[@]} -gt 0 ] || sanitizer_filters=("")
harness_runs() {  # LOG BINARY_DIR FILTERS... -- ARGS...: the harness once per filter, appended to LOG; fails if one does
  local log=$1 dir=$2 rc=0; shift 2; local words=(); while [ "$1" != "--" ]; do words+=("$1"); shift; done; shift
  : >"$log"
  for w in "${words[@]}"; do
    "$@" --library "$dir/libtrt_plugin_kit.so" ${w:+--filter "$w"} >>"$log" 2>&1 || rc=$?
  done
  return $rc
}
status=0
summary=()
note() { summary+=("$1"); echo "== $1"; }

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$LOGS/device.txt"
versions=$(ls "$HEADERS")
newest=$(echo "$versions" | tail -1)
for v in $versions; do
  # The > 2^31-element case takes minutes of host-side reference work: run it once, with the newest headers.
  limit=""; [ "$v" != "$newest" ] && limit="--max-elements 2147483647"
  [ -n "${HARNESS_MAX_ELEMENTS:-}" ] && limit="--max-elements $HARNESS_MAX_ELEMENTS"
  build=build/gpu-$v
  cmake -S plugins -B "$build" -DCMAKE_BUILD_TYPE=Release -DTENSORRT_INCLUDE_DIR="$PWD/$HEADERS/$v/include" \
    ${CUDA_ARCHS:+-DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCHS"} \
    -DTRT_PLUGIN_KIT_PYTHON="$(command -v python3)" >>"$LOGS/cmake.log" 2>&1 \
    && cmake --build "$build" -j "$(nproc)" --target plugin_harness >>"$LOGS/cmake.log" 2>&1 || { note "build $v: FAILED"; tail -30 "$LOGS/cmake.log"; status=1; continue; }
  dump=build/gpu-dump-$v; rm -rf "$dump" && mkdir -p "$dump"
  harness_runs "$LOGS/harness-$v.log" "$build" "${filters[@]}" -- "$build/plugin_harness" --dump "$dump" $limit || status=1
  grep -v '^PASS' "$LOGS/harness-$v.log"; note "harness TensorRT $v headers: $(grep '^harness:' "$LOGS/harness-$v.log" | tr '\n' ' ')"
  PYTHONPATH=. python3 -m trt_plugin_kit.specs.harness_dumps "$dump" >"$LOGS/numpy-$v.txt" 2>&1 || status=1
  grep -v "^PASS" "$LOGS/numpy-$v.txt"; note "numpy cross-check TensorRT $v: $(tail -1 "$LOGS/numpy-$v.txt")"; cat "$LOGS/numpy-$v.txt" >> "$LOGS/numpy.log"; rm "$LOGS/numpy-$v.txt"
done
last=build/gpu-$(ls "$HEADERS" | tail -1)
# Kernels of the vendor's libraries whose racecheck reports we record but cannot act on: cuBLAS's Hopper GEMMs
# (nvjet_sm90_*, chosen by FullyConnected's padded-output tactics) report shared-memory hazards inside cuBLAS
# itself. Any hazard in another kernel (ours) fails the check.
VENDOR_KERNELS='^nvjet_'
for tool in memcheck racecheck; do
  extra=""; [ "$tool" = memcheck ] && extra="--leak-check full"
  log="$LOGS/sanitizer-$tool.log"
  harness_runs "$log" "$last" "${sanitizer_filters[@]}" -- compute-sanitizer --tool $tool $extra --error-exitcode 99 \
    "$last/plugin_harness" --max-elements "$SANITIZER_MAX_ELEMENTS"
  rc=$?
  detail=""
  if [ "$tool" = racecheck ]; then
    # Every "... access at KERNEL+0xOFFSET" line of a hazard report; a kernel name may hold spaces.
    kernels=$(sed -nE 's/.* access at (.*)\+0x[0-9a-f]+.*/\1/p' "$log" | sort -u)
    ours=$(printf '%s\n' "$kernels" | grep -vE "$VENDOR_KERNELS" | grep -v '^$')
    vendor=$(printf '%s\n' "$kernels" | grep -E "$VENDOR_KERNELS" | tr '\n' ' ')
    # A report whose kernel this parse cannot name counts as ours.
    [ "$(grep -c ' access at ' "$log")" -eq "$(grep -cE " access at ${VENDOR_KERNELS#^}" "$log")" ] || ours="${ours:-unparsed report}"
    [ -n "$vendor" ] && detail=" | hazards inside vendor kernels (recorded, not ours): $vendor"
    [ -n "$ours" ] && detail="$detail | HAZARDS IN OUR KERNELS: $(echo $ours)"
    # Harness failures still count; vendor-only hazards do not.
    if [ $rc -eq 99 ] && [ -z "$ours" ] && grep -q 'harness: .* 0 failed' "$log"; then rc=0; fi
  fi
  [ $rc -eq 0 ] || status=1
  note "compute-sanitizer $tool (cases <= $SANITIZER_MAX_ELEMENTS input elements): $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|harness:' "$log" | tr '\n' ' ')$detail"
done
printf '%s\n' "${summary[@]}" | tee "$LOGS/summary.txt"
exit $status
