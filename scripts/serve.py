#!/usr/bin/env python3
"""`make serve`: start and supervise Triton on this repository's models (see trt_plugin_kit/serve.py)."""

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file from a checkout: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trt_plugin_kit.serve import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
