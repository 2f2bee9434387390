"""`python -m loadtests.soak`: see loadtests/soak/cli.py."""

import sys

from loadtests.soak.cli import main

sys.exit(main())
