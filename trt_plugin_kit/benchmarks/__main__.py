"""``python3 -m trt_plugin_kit.benchmarks [options]``: see :mod:`trt_plugin_kit.benchmarks`."""

import sys

from trt_plugin_kit.benchmarks.cli import main

sys.exit(main())
