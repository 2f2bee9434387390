import sys

from trt_plugin_kit.serving.edge.app import main

sys.exit(main())
