# `triton` service, and the image of the Kubernetes gpu overlay and KServe runtime: NVIDIA's tritonserver
# container (TensorRT + Python backends) plus trt_plugin_kit, whose launcher
# (`python3 -m trt_plugin_kit serve --variant=tensorrt`, as `make serve`) starts tritonserver on private Unix
# sockets behind the edge. The plugin library and the engines come from the `builder` service through the
# shared volume; the tag is pinned in docker-compose.yml.
ARG TRITONSERVER_IMAGE
FROM ${TRITONSERVER_IMAGE}

ENV PIP_BREAK_SYSTEM_PACKAGES=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
# For the image's system python3, which runs serve.py, the edge and the Python backend's model: the pinned
# versions of docker/triton-requirements.txt (which says what each is for). curl: the compose healthcheck.
COPY docker/triton-requirements.txt /tmp/triton-requirements.txt
RUN python3 -m pip install -r /tmp/triton-requirements.txt \
 && (command -v curl >/dev/null || (apt-get update && apt-get install -y --no-install-recommends curl \
     && rm -rf /var/lib/apt/lists/*))

COPY trt_plugin_kit /opt/trt_plugin_kit_src/trt_plugin_kit
COPY docker/triton_entrypoint.sh /usr/local/bin/trt_plugin_kit_entrypoint
ENV PYTHONPATH=/opt/trt_plugin_kit_src
# A missing dependency fails the build, not the first start on a GPU node.
RUN python3 -c "import trt_plugin_kit.serving.edge.app, trt_plugin_kit.serving.cli, trt_plugin_kit.tritonserver.protocol, \
tritonclient.grpc, tritonclient.http"
# NVIDIA's entrypoint first (driver/compat checks), then ours (the artifacts' TensorRT against this image's,
# the library's links here), then the command:
# python3 -m trt_plugin_kit serve ... (docker-compose.yml, the Kubernetes files).
ENTRYPOINT ["/opt/nvidia/nvidia_entrypoint.sh", "/usr/local/bin/trt_plugin_kit_entrypoint"]
