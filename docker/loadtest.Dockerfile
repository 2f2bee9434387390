# `loadtest` service (compose profile "loadtest"): the project's Locust load test in a plain Python image.
FROM python:3.11-slim

ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /workspace
COPY pyproject.toml README.md ./
COPY trt_plugin_kit trt_plugin_kit
COPY clients clients
COPY loadtests loadtests
COPY samples/digits samples/digits
RUN python -m pip install ".[load]"
ENTRYPOINT ["python", "-m", "loadtests"]
