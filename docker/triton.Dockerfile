# `triton` service, and the image of the Kubernetes gpu overlay and KServe runtime: NVIDIA's tritonserver
# container (TensorRT + Python backends) plus what the mnist_preprocess Python model imports (Pillow,
# trt_plugin_kit; aiohttp for the HTTP guard). The plugin library and the engines come from the `builder`
# service through the shared volume; the tag is pinned in docker-compose.yml.
ARG TRITONSERVER_IMAGE
FROM ${TRITONSERVER_IMAGE}

ENV PIP_BREAK_SYSTEM_PACKAGES=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
# aiohttp: trt_plugin_kit.http_guard, the HTTP guard sidecar of the Kubernetes gpu overlay.
RUN python3 -m pip install "pillow>=10.0" "aiohttp>=3.9" \
 && (command -v curl >/dev/null || (apt-get update && apt-get install -y --no-install-recommends curl \
     && rm -rf /var/lib/apt/lists/*))

COPY trt_plugin_kit /opt/trt_plugin_kit_src/trt_plugin_kit
COPY docker/triton_entrypoint.sh /usr/local/bin/trt_plugin_kit_entrypoint
ENV PYTHONPATH=/opt/trt_plugin_kit_src
# NVIDIA's entrypoint first (driver/compat checks), then ours (version check, admin key), then the command.
ENTRYPOINT ["/opt/nvidia/nvidia_entrypoint.sh", "/usr/local/bin/trt_plugin_kit_entrypoint"]
