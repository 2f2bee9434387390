"""`python -m clients <command>`: see clients/README.md or `python -m clients --help`."""

import sys

from clients.cli import main

sys.exit(main())
