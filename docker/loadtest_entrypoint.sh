#!/bin/sh
# Entrypoint of the `loadtest` service: `python -m loadtests` configured through the environment
# (docker-compose.yml). Without an MNIST set mounted at $MNIST_IMAGES it sends the ten sample digits of
# samples/digits/ instead, and says so.
set -eu
if [ -n "${MNIST_IMAGES:-}" ] && [ ! -e "${MNIST_IMAGES}" ]; then
  echo "loadtest: no MNIST set at ${MNIST_IMAGES}; sending the sample digits of samples/digits/ instead" >&2
  MNIST_IMAGES=/opt/trt_plugin_kit/samples/digits
  export MNIST_IMAGES
fi
exec python -m loadtests "$@"
