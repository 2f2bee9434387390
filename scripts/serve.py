#!/usr/bin/env python3
"""`make serve`: start and supervise Triton on this repository's models (see trt_plugin_kit/serve.py)."""

import sys

from trt_plugin_kit.serve import main

if __name__ == "__main__":
    sys.exit(main())
