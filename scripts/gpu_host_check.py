#!/usr/bin/env python3
"""`make gpu-host-check`: the GPU path end to end on a GPU host (trt_plugin_kit/deploy/gpu_host_check.py)."""

import sys

from trt_plugin_kit.deploy.gpu_host_check import main

if __name__ == "__main__":
    sys.exit(main())
