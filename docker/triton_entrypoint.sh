#!/usr/bin/env bash
# Entrypoint of the `triton` service (docker-compose.yml), the Kubernetes gpu overlay and the KServe runtime:
# refuse to start on artifacts built with another TensorRT or a library that does not link this image's, then
# exec the command, `make serve`'s launcher:
#   python3 -m trt_plugin_kit serve --variant=tensorrt --host=0.0.0.0 ... --plugin-library=... --restart=never
# It starts tritonserver with trt_plugin_kit/serving/server.py's hardened flags on private Unix sockets, the plugin
# library loaded by its TensorRT backend alone (--backend-config=tensorrt,plugins=...), and the edge (trt_plugin_kit/serving/edge/) on the public ports; the
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

: "${ARTIFACTS_DIR:?set by docker-compose.yml: the volume the builder service fills}"
: "${PLUGIN_LIBRARY:?set by docker-compose.yml: the plugin library the builder service wrote}"

# The TensorRT the builder built with (its stamp, written last) must be this image's, read in full from the
# libnvinfer tritonserver loads; and the library must find libnvinfer and its CUDA libraries in this image.
python3 -m trt_plugin_kit.engines.artifact_checks serving --artifacts-dir "${ARTIFACTS_DIR}" \
  --library "${PLUGIN_LIBRARY}" | sed 's/^/triton: /'

exec "$@"
