"""``python -m trt_plugin_kit COMMAND``: the kit's commands that are not a module of their own.

python -m trt_plugin_kit new-plugin NAME [options]   # plugins/NAME/: a working plugin (scaffold)
"""

from __future__ import annotations

import sys

COMMANDS = {"new-plugin": "create plugins/NAME/, a working plugin to change into your own op"}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in COMMANDS:
        print("usage: python -m trt_plugin_kit COMMAND ...", file=sys.stderr)
        for command, meaning in COMMANDS.items():
            print(f"  {command:12} {meaning}", file=sys.stderr)
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    from trt_plugin_kit import scaffold

    return scaffold.main(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
