"""Child process of tests/library/test_tensorrt_rtx.py: one TensorRT-RTX session per process.

    python tests/library/tensorrt_rtx_child.py creators LIBRARY   # JSON: our creators in the registry
    python tests/library/tensorrt_rtx_child.py parse MODEL.onnx LIBRARY
    python tests/library/tensorrt_rtx_child.py load LIBRARY [--then-load-library]   # build_engines' load path

``parse`` prints every message of TensorRT-RTX's logger as ``LOG <SEVERITY> <message>`` (flushed at once:
right after creating a custom plugin, TensorRT-RTX 1.7.1's parser aborts the process), then ``PARSED True``
or ``False`` and the parser's errors as ``PARSER_ERROR <text>``. Libraries are loaded as build_engines.py
loads them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from trt_plugin_kit.engines import tensorrt_api
from trt_plugin_kit.engines.builder import load_plugins
from trt_plugin_kit.engines.plugin_config import PluginLibrary
from trt_plugin_kit.interface import PLUGIN_NAMESPACE


def printing_logger(trt):
    class PrintingLogger(trt.ILogger):
        def __init__(self):
            trt.ILogger.__init__(self)

        def log(self, severity, message):
            print(f"LOG {severity.name} {message}", flush=True)

    return PrintingLogger()


def creators(api, library: Path) -> int:
    registry = api.trt.get_plugin_registry()
    handle = registry.load_library(str(library))
    found = {
        creator.name: {
            "version": creator.plugin_version,
            "namespace": creator.plugin_namespace,
            "interface": creator.interface_info.kind,
            "fields": [[field.name, field.type.name, field.size] for field in creator.field_names],
        }
        for creator in registry.all_creators
        if creator.plugin_namespace == PLUGIN_NAMESPACE
    }
    print(json.dumps({"loaded": handle is not None, "creators": found}))
    registry.deregister_library(handle)
    return 0


def load(api, library: Path, then_load_library: bool) -> int:
    """build_engines.py's load path; then, if asked, TensorRT's loadLibrary on the same library."""
    registry = api.trt.get_plugin_registry()
    (loaded,) = load_plugins(api, [PluginLibrary(library)], ())
    report = {"how": loaded.how, "creators": [name for name, _, namespace in loaded.creators
                                              if namespace == PLUGIN_NAMESPACE]}  # fmt: skip
    if then_load_library:
        report["load_library"] = registry.load_library(str(library)) is not None
        report["after_load_library"] = [
            creator.name for creator in registry.all_creators if creator.plugin_namespace == PLUGIN_NAMESPACE
        ]
    print(json.dumps(report), flush=True)
    return 0


def parse(api, model: Path, library: Path) -> int:
    trt = api.trt
    logger = printing_logger(trt)
    load_plugins(api, [PluginLibrary(library)], ())
    builder = trt.Builder(logger)
    network = builder.create_network(0)
    parser = trt.OnnxParser(network, logger)
    parsed = parser.parse(model.read_bytes(), str(model))
    print(f"PARSED {parsed}", flush=True)
    for index in range(parser.num_errors):
        print(f"PARSER_ERROR {parser.get_error(index)}", flush=True)
    return 0


def main(argv: list[str]) -> int:
    api = tensorrt_api.load(rtx=True)
    if argv[:1] == ["creators"] and len(argv) == 2:
        return creators(api, Path(argv[1]))
    if argv[:1] == ["load"] and len(argv) in (2, 3):
        return load(api, Path(argv[1]), argv[2:] == ["--then-load-library"])
    if argv[:1] == ["parse"] and len(argv) == 3:
        return parse(api, Path(argv[1]), Path(argv[2]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
