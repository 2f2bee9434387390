#!/usr/bin/env bash
# Command of the `builder` service (NVIDIA's TensorRT container, GPU attached): compiles
# libtrt_plugin_kit.so against this container's TensorRT and builds the TensorRT engines into the shared
# volume that the `triton` service serves from. The paths come from docker-compose.yml.
set -euo pipefail

: "${ARTIFACTS_DIR:?}" "${PLUGIN_LIBRARY:?}" "${MODEL_REPOSITORY:?}" "${TENSORRT_VERSION:?}"
cd "$(dirname "$0")/.."

# Written last: the triton service refuses to start without it, so a failed build never looks complete.
stamp="${ARTIFACTS_DIR}/TENSORRT_VERSION"
rm -f "${stamp}"

trt_version=$(python3 -c "import tensorrt; print(tensorrt.__version__)")
# Whole components of the pin: "11.3" takes 11.3.0.99, not 11.30.
if [[ "${trt_version}" != "${TENSORRT_VERSION}" && "${trt_version}" != "${TENSORRT_VERSION}".* ]]; then
  echo "builder: this image carries TensorRT ${trt_version}, docker-compose.yml pins ${TENSORRT_VERSION}" >&2
  exit 1
fi

header=$(find /usr/include /usr/local/include /usr/local/tensorrt/include /opt/tensorrt/include \
  -name NvInfer.h -print -quit 2>/dev/null || true)
if [[ -z "${header}" ]]; then
  echo "builder: NvInfer.h not found in this image" >&2
  exit 1
fi

echo "== builder: libtrt_plugin_kit.so against TensorRT ${trt_version} ($(dirname "${header}"))"
build_dir=/tmp/plugin-build
cmake -S plugins -B "${build_dir}" -DCMAKE_BUILD_TYPE=Release -DTENSORRT_INCLUDE_DIR="$(dirname "${header}")"
cmake --build "${build_dir}" -j "$(nproc)"
install -D -m 0755 "${build_dir}/libtrt_plugin_kit.so" "${PLUGIN_LIBRARY}"

echo "== builder: model repository and TensorRT engines in ${MODEL_REPOSITORY}"
rm -rf "${MODEL_REPOSITORY}"
mkdir -p "$(dirname "${MODEL_REPOSITORY}")"
cp -r model_repository "${MODEL_REPOSITORY}"
python3 build_engines.py --plugin-library "${PLUGIN_LIBRARY}" --model-repository "${MODEL_REPOSITORY}"
# The other engine models (mnist_vit, folders new-plugin wrote): each folder holding its plugin-flavour model.onnx.
for onnx in "${MODEL_REPOSITORY}"/*/model.onnx; do
  [[ -e "${onnx}" ]] || continue
  python3 build_engines.py --plugin-library "${PLUGIN_LIBRARY}" --model-repository "${MODEL_REPOSITORY}" \
    --model "$(basename "$(dirname "${onnx}")")"
done

echo "${trt_version}" > "${stamp}"
echo "== builder: done (TensorRT ${trt_version})"
