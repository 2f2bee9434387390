"""`python -m loadtests` (what `make loadtest` runs): see loadtests/runner.py and loadtests/README.md."""

import sys

from loadtests.runner import main

sys.exit(main())
