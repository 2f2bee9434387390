"""`python -m loadtests.perf` (what `make perf` runs): see loadtests/perf/cli.py."""

import sys

from loadtests.perf.cli import main

sys.exit(main())
