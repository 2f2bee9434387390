"""``python -m trt_plugin_kit.serve``: the command's first name, kept for those who type it; the launcher is
trt_plugin_kit.serving.cli (``python -m trt_plugin_kit.serving``)."""

import sys

from trt_plugin_kit.serving.cli import main

if __name__ == "__main__":
    sys.exit(main())
