"""``python -m trt_plugin_kit.specs docs|cpp|list``: the outputs derived from plugins/*/spec.yaml."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from trt_plugin_kit.specs import cpp as plugin_spec_cpp
from trt_plugin_kit.specs import docs as plugin_docs
from trt_plugin_kit.specs.spec import SpecError, all_specs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Outputs derived from plugins/*/spec.yaml.")
    commands = parser.add_subparsers(dest="command", required=True)
    docs = commands.add_parser("docs", help="rewrite the field tables of the plugin READMEs")
    docs.add_argument("--check", action="store_true", help="only report stale tables (exit 1)")
    cpp = commands.add_parser("cpp", help="write the C++ tools' spec table")
    cpp.add_argument("output", type=Path)
    commands.add_parser("list", help="one line per plugin")
    args = parser.parse_args(argv)
    try:
        if args.command == "docs":
            stale = plugin_docs.update(check=args.check)
            for path in stale:
                print(f"{'stale' if args.check else 'updated'}: {path}")
            return 1 if args.check and stale else 0
        if args.command == "cpp":
            plugin_spec_cpp.write(args.output)
            return 0
        for spec in all_specs().values():
            print(f"{spec.name:16} {spec.folder.name:16} fields: {', '.join(spec.field_names) or '-'}")
        return 0
    except SpecError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
