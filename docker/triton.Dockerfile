# `triton` service, and the image of the Kubernetes gpu overlay and KServe runtime: NVIDIA's tritonserver
# container (TensorRT + Python backends) plus trt_plugin_kit, whose launcher
# (`python3 -m trt_plugin_kit serve --variant=tensorrt`, as `make serve`) starts tritonserver on private Unix
# sockets behind the edge. The plugin library and the engines come from the `builder` service through the
# shared volume; the tag is pinned in docker-compose.yml.
ARG TRITONSERVER_IMAGE

# The edge's compiled gRPC front (trt_plugin_kit/serving/edge/native), so that the GPU image serves gRPC through
# the same front as `make serve` and the CPU image (issue 39: one front everywhere; the Python gRPC front has
# fewer budgets). Built on the same base as the image it runs in, from source: a GPU host has the network the
# NGC pull needs. nghttp2 is linked statically (its Ubuntu package has the archive); OpenSSL and zlib are in
# NVIDIA's image.
FROM ${TRITONSERVER_IMAGE} AS edge-native
WORKDIR /src
RUN apt-get update \
 && apt-get install -y --no-install-recommends g++ cmake make pkg-config libnghttp2-dev libssl-dev zlib1g-dev \
 && rm -rf /var/lib/apt/lists/*
COPY cmake/ccache.cmake cmake/ccache.cmake
COPY trt_plugin_kit/serving/edge/native trt_plugin_kit/serving/edge/native
RUN cmake -S trt_plugin_kit/serving/edge/native -B /tmp/build -DCMAKE_BUILD_TYPE=Release \
 && cmake --build /tmp/build -j "$(nproc)" \
 && mkdir -p /out && cp /tmp/build/trt-plugin-kit-edge-grpc /out/

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
# The compiled gRPC front where the launcher looks for it ($TRT_PLUGIN_KIT_EDGE_GRPC); a binary that does not
# start (a library missing here) fails the build: with no configuration on stdin it says so and exits.
COPY --from=edge-native /out/trt-plugin-kit-edge-grpc /opt/trt_plugin_kit_src/build/edge-native/trt-plugin-kit-edge-grpc
ENV TRT_PLUGIN_KIT_EDGE_GRPC=/opt/trt_plugin_kit_src/build/edge-native/trt-plugin-kit-edge-grpc
RUN "${TRT_PLUGIN_KIT_EDGE_GRPC}" </dev/null | grep -q "configuration ended early"
# A missing dependency fails the build, not the first start on a GPU node.
RUN python3 -c "import trt_plugin_kit.serving.edge.app, trt_plugin_kit.serving.cli, trt_plugin_kit.tritonserver.protocol, \
tritonclient.grpc, tritonclient.http"
# NVIDIA's entrypoint first (driver/compat checks), then ours (the artifacts' TensorRT against this image's,
# the library's links here), then the command:
# python3 -m trt_plugin_kit serve ... (docker-compose.yml, the Kubernetes files).
ENTRYPOINT ["/opt/nvidia/nvidia_entrypoint.sh", "/usr/local/bin/trt_plugin_kit_entrypoint"]
