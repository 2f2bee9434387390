#!/usr/bin/env python3
"""`make serve`: start and supervise Triton on this repository's models (trt_plugin_kit/serving/cli.py)."""

import sys

from trt_plugin_kit.serving.cli import main

if __name__ == "__main__":
    sys.exit(main())
