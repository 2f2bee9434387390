"""``python -m trt_plugin_kit.serving``: what `make serve` runs (trt_plugin_kit.serving.cli)."""

import sys

from trt_plugin_kit.serving.cli import main

sys.exit(main())
