# `builder` service: NVIDIA's TensorRT container plus what build_engines.py needs. It compiles
# libtrt_plugin_kit.so against this container's TensorRT (the library target only), checks its links and
# creators and builds the engines (docker/build_artifacts.sh).
# The base image tag is pinned in docker-compose.yml (x-ngc-release), together with the tritonserver tag.
ARG TENSORRT_IMAGE
FROM ${TENSORRT_IMAGE}

# Ubuntu 24.04 based images mark the system Python as externally managed; this is a throw-away build image.
ENV PIP_BREAK_SYSTEM_PACKAGES=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY docker/builder-requirements.txt /tmp/builder-requirements.txt
RUN python3 -m pip install -r /tmp/builder-requirements.txt

WORKDIR /workspace/trt_plugin_kit
COPY plugins plugins
COPY trt_plugin_kit trt_plugin_kit
COPY models models
COPY model_repository model_repository
COPY build_engines.py build_engines.py
COPY docker/build_artifacts.sh docker/build_artifacts.sh
CMD ["bash", "docker/build_artifacts.sh"]
