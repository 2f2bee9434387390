#!/usr/bin/env bash
# Command of the `builder` service and of the Kubernetes gpu overlay's init container (NVIDIA's TensorRT
# container, GPU attached): compiles libtrt_plugin_kit.so against this container's TensorRT, checks what it
# links and that its creators register themselves, and builds the TensorRT engines into the shared volume
# the `triton` service serves from. The paths come from docker-compose.yml (or the Kubernetes files).
#   BUILD_JOBS  parallel compile jobs (default 4: nvcc takes up to about 1.5 GiB a job, the service 8 GiB)
set -euo pipefail

: "${ARTIFACTS_DIR:?}" "${PLUGIN_LIBRARY:?}" "${MODEL_REPOSITORY:?}"
jobs="${BUILD_JOBS:-4}"
if ! [[ "${jobs}" =~ ^[1-9][0-9]?$ ]]; then
  echo "builder: BUILD_JOBS must be a number from 1 to 99, not '${jobs}'" >&2
  exit 2
fi
cd "$(dirname "$0")/.."
checks=(python3 -m trt_plugin_kit.engines.artifact_checks)

# Written last: the triton service refuses to start without it, so a failed build never looks complete.
stamp="${ARTIFACTS_DIR}/TENSORRT_VERSION"
rm -f "${stamp}"

# The TensorRT of this image, read from the libnvinfer its loader finds (the library links it, the engines
# are built with it) and from its Python package: they must be one release.
trt_version=$("${checks[@]}" version)
python_version=$(python3 -c "import re, tensorrt; print(re.match(r'[0-9.]*[0-9]', tensorrt.__version__)[0])")
if [[ "${trt_version}" != "${python_version}" ]]; then
  echo "builder: libnvinfer here is TensorRT ${trt_version}, the tensorrt Python package ${python_version}" >&2
  exit 1
fi

header=$(find /usr/include /usr/local/include /usr/local/tensorrt/include /opt/tensorrt/include \
  -name NvInfer.h -print -quit 2>/dev/null || true)
if [[ -z "${header}" ]]; then
  echo "builder: NvInfer.h not found in this image" >&2
  exit 1
fi

# The library target only (not the harness, stress tool or benchmarks), in a build tree of its own that is
# removed however the build ends: nothing of it stays in the container or the volume.
build_dir=$(mktemp -d /tmp/plugin-build.XXXXXX)
trap 'rm -rf "${build_dir}"' EXIT
echo "== builder: libtrt_plugin_kit.so against TensorRT ${trt_version} ($(dirname "${header}")), ${jobs} jobs"
cmake -S plugins -B "${build_dir}" -DCMAKE_BUILD_TYPE=Release -DTENSORRT_INCLUDE_DIR="$(dirname "${header}")"
cmake --build "${build_dir}" --target trt_plugin_kit -j "${jobs}"
install -D -m 0755 "${build_dir}/libtrt_plugin_kit.so" "${PLUGIN_LIBRARY}"
rm -rf "${build_dir}"

echo "== builder: the library's links and creators"
"${checks[@]}" library "${PLUGIN_LIBRARY}" --creators

echo "== builder: model repository and TensorRT engines in ${MODEL_REPOSITORY}"
rm -rf "${MODEL_REPOSITORY}"
mkdir -p "$(dirname "${MODEL_REPOSITORY}")"
cp -r model_repository "${MODEL_REPOSITORY}"
# Timing caches persist in the volume, one file per GPU model and TensorRT version: a rebuild on the same
# GPU reuses the tactics TensorRT timed there.
python3 build_engines.py --plugin-library "${PLUGIN_LIBRARY}" --model-repository "${MODEL_REPOSITORY}" \
  --timing-cache-dir "${ARTIFACTS_DIR}/timing_caches"
# The other engine models (mnist_vit, folders new-plugin wrote): each folder holding its plugin-flavour model.onnx.
for onnx in "${MODEL_REPOSITORY}"/*/model.onnx; do
  [[ -e "${onnx}" ]] || continue
  python3 build_engines.py --plugin-library "${PLUGIN_LIBRARY}" --model-repository "${MODEL_REPOSITORY}" \
    --timing-cache-dir "${ARTIFACTS_DIR}/timing_caches" --model "$(basename "$(dirname "${onnx}")")"
done

echo "${trt_version}" > "${stamp}"
echo "== builder: done (TensorRT ${trt_version})"
