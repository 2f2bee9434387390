"""`python -m clients <command>` (console script `trt-plugin-kit-client`): see clients/README.md or --help."""

import os
import sys


def run() -> int:
    # gRPC's C core logs TLS handshake failures itself; the CLI reports them as readable errors instead.
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    from clients.cli import main  # after the environment is set for grpc

    return main()


if __name__ == "__main__":
    sys.exit(run())
