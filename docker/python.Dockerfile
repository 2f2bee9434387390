# Images on a plain Python base (no GPU, no NGC image), one target each:
#   triton-cpu  `make serve`'s CPU variant: PyTriton's tritonserver, Python backend, the CPU configurations
#               (compose profile "cpu"); started by `trt-plugin-kit serve`, so its flags come from serving/server.py;
#               gRPC served by the edge's compiled front, as `make serve` does (stage edge-native)
#   loadtest    the project's Locust load test, `python -m loadtests` (compose profile "loadtest")
# Both lay the project out as a checkout in /opt/trt_plugin_kit with an editable install in /opt/venv,
# exactly as `make venv` does on a host, so paths (model_repository/, models/onnx/, samples/) resolve alike.
#
# Build arguments (docker-compose.yml passes them on):
#   PYTHON_IMAGE         base image with python3 >= 3.10 and its venv module (default python:3.11-slim)
#   PIP_INSTALL_OPTIONS  extra options of pip and uv pip (where to find packages); offline:
#                        "--no-index --find-links=/wheelhouse", the wheels being in docker/wheelhouse/ (make
#                        compose-test fills it on the host, uv's among them)
#
# The project is installed with uv, as `make venv` does (pip bootstraps it, then leaves with it), bytecode
# compiled as pip would: make compose-test's two image builds took 36 s and 38 CPU-s with pip, 20 s and 29 with uv.
ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS base
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/venv/bin:${PATH}
# The unprivileged user the server runs as; it owns nothing in the image.
RUN groupadd --system --gid 10001 kit \
 && useradd --system --uid 10001 --gid kit --home-dir /nonexistent --no-create-home --shell /usr/sbin/nologin kit \
 && python3 -m venv /opt/venv
WORKDIR /opt/trt_plugin_kit
COPY pyproject.toml README.md ./
COPY trt_plugin_kit trt_plugin_kit
# Each plugin's spec and NumPy reference (trt_plugin_kit.specs.reference loads them; the CPU l2norm model uses one).
COPY plugins plugins

# The edge's compiled gRPC front (trt_plugin_kit/serving/edge/native): the binary the host built, when
# docker/wheelhouse/edge-native/ holds it (scripts/compose_test.py puts it there: its builds have no
# network; nghttp2 is linked in, the rest is in this base image), else built here from source (apt-get: the
# network).
FROM ${PYTHON_IMAGE} AS edge-native
WORKDIR /src
COPY cmake/ccache.cmake cmake/ccache.cmake
COPY trt_plugin_kit/serving/edge/native trt_plugin_kit/serving/edge/native
RUN --mount=type=bind,source=docker/wheelhouse,target=/wheelhouse \
    mkdir -p /out \
 && if [ -x /wheelhouse/edge-native/trt-plugin-kit-edge-grpc ]; then \
      cp /wheelhouse/edge-native/trt-plugin-kit-edge-grpc /out/; \
    else \
      apt-get update \
      && apt-get install -y --no-install-recommends g++ cmake make pkg-config libnghttp2-dev libssl-dev zlib1g-dev \
      && cmake -S trt_plugin_kit/serving/edge/native -B /tmp/build -DCMAKE_BUILD_TYPE=Release \
      && cmake --build /tmp/build -j "$(nproc)" \
      && cp /tmp/build/trt-plugin-kit-edge-grpc /out/; \
    fi

FROM base AS triton-cpu
ARG PIP_INSTALL_OPTIONS=""
RUN --mount=type=bind,source=docker/wheelhouse,target=/wheelhouse \
    pip install -q ${PIP_INSTALL_OPTIONS} uv \
 && UV_NO_CACHE=1 uv pip install --compile-bytecode --python /opt/venv/bin/python ${PIP_INSTALL_OPTIONS} -e ".[serve]" \
 && pip uninstall -q -y uv
COPY model_repository model_repository
COPY models/onnx models/onnx
# Where the edge looks for its compiled gRPC front (edge/native_front.py); it must run here: without its
# configuration on stdin it says so and exits, which proves its libraries are the image's.
COPY --from=edge-native /out/trt-plugin-kit-edge-grpc build/edge-native/trt-plugin-kit-edge-grpc
RUN build/edge-native/trt-plugin-kit-edge-grpc </dev/null | grep -q "configuration ended early"
# All interfaces of the container; docker-compose.yml publishes the ports on the host's loopback only.
ENV TRITON_VARIANT=cpu TRITON_HOST=0.0.0.0
USER kit
EXPOSE 8000 8001 8002
CMD ["trt-plugin-kit", "serve"]

FROM base AS loadtest
ARG PIP_INSTALL_OPTIONS=""
COPY clients clients
COPY loadtests loadtests
RUN --mount=type=bind,source=docker/wheelhouse,target=/wheelhouse \
    pip install -q ${PIP_INSTALL_OPTIONS} uv \
 && UV_NO_CACHE=1 uv pip install --compile-bytecode --python /opt/venv/bin/python ${PIP_INSTALL_OPTIONS} -e ".[load]" \
 && pip uninstall -q -y uv
# The digits sent when no MNIST set is mounted at the default place (docker-compose.yml).
COPY samples/digits samples/digits
# Matplotlib (the charts) needs a writable configuration folder; the root filesystem is read-only.
ENV MPLCONFIGDIR=/tmp/matplotlib
ENTRYPOINT ["python", "-m", "loadtests"]
