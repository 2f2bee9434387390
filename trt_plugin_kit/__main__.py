"""The kit's front door: ``trt-plugin-kit COMMAND [options]`` (console script), or ``python -m trt_plugin_kit
COMMAND``. Each command is a module's own ``main``; ``python -m <that module>`` keeps working.

    trt-plugin-kit new-plugin NAME      plugins/NAME/: a working plugin to change into your own op
    trt-plugin-kit serve                what `make serve` runs
    trt-plugin-kit build-engines        TensorRT engines into model_repository/ (build_engines.py)
    trt-plugin-kit export | train       the models' ONNX files | LeNet-5's weights
    trt-plugin-kit specs docs|cpp|list  what plugins/*/spec.yaml derives
    trt-plugin-kit kubernetes           regenerate the Kubernetes files
    trt-plugin-kit bench                the plugin benchmark (GPU machine)
"""

from __future__ import annotations

import importlib
import sys

# command -> (module whose main() runs it, what it does)
COMMANDS = {
    "new-plugin": (
        "trt_plugin_kit.scaffold",
        "create plugins/NAME/, a working plugin to change into your own op",
    ),
    "serve": ("trt_plugin_kit.serving.cli", "start Triton behind the edge and keep it served (make serve)"),
    "build-engines": ("trt_plugin_kit.engines.cli", "build the TensorRT engines into model_repository/"),
    "export": (
        "trt_plugin_kit.models.export",
        "export the models to ONNX (both flavours) and calibrate INT8",
    ),
    "train": ("trt_plugin_kit.models.train", "train LeNet-5 on the MNIST dev digits"),
    "specs": ("trt_plugin_kit.specs.__main__", "what plugins/*/spec.yaml derives: docs, cpp, list"),
    "kubernetes": ("trt_plugin_kit.deploy.kubernetes", "regenerate the generated Kubernetes files"),
    "bench": ("trt_plugin_kit.benchmarks.cli", "the plugin benchmark (needs a GPU, PyTorch)"),
}


def usage() -> str:
    lines = ["usage: trt-plugin-kit COMMAND [options]   (python -m trt_plugin_kit COMMAND)", ""]
    lines += [f"  {command:14} {meaning}" for command, (_, meaning) in COMMANDS.items()]
    lines += [
        "",
        "COMMAND --help says more. Clients: trt-plugin-kit-client; load tests: trt-plugin-kit-loadtest.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in COMMANDS:
        wants_help = bool(argv) and argv[0] in ("-h", "--help")
        print(usage(), file=sys.stdout if wants_help else sys.stderr)
        return 0 if wants_help else 2
    module = importlib.import_module(COMMANDS[argv[0]][0])
    return module.main(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
