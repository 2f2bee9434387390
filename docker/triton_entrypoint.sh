#!/usr/bin/env bash
# Entrypoint of the `triton` service: refuse to start on artifacts built for another TensorRT, close the
# administrative APIs behind a key, then exec the command (tritonserver ...) from docker-compose.yml.
# LD_PRELOAD (the plugin library) is set by docker-compose.yml and inherited by tritonserver.
set -euo pipefail

: "${TENSORRT_VERSION:?set by docker-compose.yml: the TensorRT version both images carry}"
: "${ARTIFACTS_DIR:?set by docker-compose.yml: the volume the builder service fills}"

stamp="${ARTIFACTS_DIR}/TENSORRT_VERSION"
if [[ ! -f "${stamp}" ]]; then
  echo "triton: ${stamp} is missing: the builder service has not completed" >&2
  exit 1
fi
runtime_version=$(python3 - <<'PY'
import ctypes
for soname in ("libnvinfer.so.11", "libnvinfer.so.10"):
    try:
        encoded = ctypes.CDLL(soname).getInferLibVersion()
    except OSError:
        continue
    print(f"{encoded // 10000}.{encoded // 100 % 100}.{encoded % 100}")
    break
PY
)
built_version=$(cat "${stamp}")
# The pin may name major.minor ("11.3") or more; it matches whole components: "11.3" takes 11.3.0 and
# 11.3.0.99, not 11.30.
for version in "${runtime_version}" "${built_version}"; do
  if [[ "${version}" != "${TENSORRT_VERSION}" && "${version}" != "${TENSORRT_VERSION}".* ]]; then
    echo "triton: TensorRT mismatch: runtime '${runtime_version}', artifacts built with '${built_version}'," \
         "compose pins '${TENSORRT_VERSION}'. Keep both image tags on one NGC release (x-ngc-release)." >&2
    exit 1
  fi
done

# Without TRITON_ADMIN_KEY the restricted APIs are closed to everybody: the key holds a line break, which
# no HTTP header or gRPC metadata value can carry (trt_plugin_kit.serving.CLOSED_ADMIN_KEY, same text).
admin_key="${TRITON_ADMIN_KEY:-$'closed\n(no TRITON_ADMIN_KEY was set)'}"
restricted="model-repository,shared-memory,trace,logging:triton-admin-key=${admin_key}"
exec "$@" "--http-restricted-api=${restricted}" "--grpc-restricted-protocol=${restricted}"
