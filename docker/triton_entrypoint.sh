#!/usr/bin/env bash
# Entrypoint of the `triton` service (docker-compose.yml), the Kubernetes gpu overlay and the KServe runtime:
# refuse to start on artifacts built for another TensorRT, then exec the command, `make serve`'s launcher:
#   python3 -m trt_plugin_kit serve --variant=tensorrt --host=0.0.0.0 ... --plugin-library=... --restart=never
# It starts tritonserver with trt_plugin_kit/serving/server.py's hardened flags on private Unix sockets, the plugin
# library in tritonserver's LD_PRELOAD only, and the edge (trt_plugin_kit/serving/edge/) on the public ports; the
# administrative APIs stay closed unless $TRITON_ADMIN_KEY is set (clients then send it to the edge).
set -euo pipefail

if [[ $# -eq 0 ]]; then
  echo "triton: no command (docker-compose.yml and the Kubernetes files give python3 -m" \
       "trt_plugin_kit serve ...)" >&2
  exit 1
fi
# tritonserver started by hand would hold the public ports itself, without the edge, with no admin key:
# the administrative APIs open to every client. Use `--entrypoint` to run it for debugging.
if [[ "$(basename -- "$1")" == tritonserver ]]; then
  echo "triton: refusing to start tritonserver directly: run python3 -m trt_plugin_kit serve (the" \
       "edge in front, serving.py's flags, the admin APIs behind \$TRITON_ADMIN_KEY);" \
       "tritonserver's own flags go after --" >&2
  exit 1
fi

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

exec "$@"
