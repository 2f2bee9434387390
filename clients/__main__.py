"""`python -m clients <command>`: see clients/README.md or `python -m clients --help`."""

import os
import sys

# gRPC's C core logs TLS handshake failures itself; the CLI reports them as readable errors instead.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

from clients.cli import main  # noqa: E402 - after the environment is set for grpc

sys.exit(main())
