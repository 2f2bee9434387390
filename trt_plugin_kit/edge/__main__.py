import sys

from trt_plugin_kit.edge.app import main

sys.exit(main())
