"""The plugin libraries a build loads: ``--plugin-library`` paths and ``--plugin-config`` files."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from trt_plugin_kit.engines.errors import UsageError
from trt_plugin_kit.interface import BUILD_DIR, PLUGIN_LIBRARY_NAME


@dataclass(frozen=True)
class PluginLibrary:
    path: Path
    layers: tuple[str, ...] = ()  # DriveWorks-style layer list (informational: TensorRT maps by op type)
    source: str = "command line"


def load_plugin_config(path: Path) -> list[PluginLibrary]:
    """Plugin libraries listed in a JSON or YAML file.

    Accepted layouts (relative paths are relative to the file; keys starting with ``__`` are comments)::

        {"plugins": ["lib_a.so", {"path": "lib_b.so", "layers": ["pool1"]}]}
        ["lib_a.so", "lib_b.so"]
        {"__comment": "DriveWorks --pluginConfig style", "lib_a.so": ["pool1", "fc1"]}
    """
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"plugin config {path} does not exist")
    text = path.read_text()
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError as error:
            raise UsageError(
                f"plugin config {path}: reading YAML needs PyYAML (pip install pyyaml)"
            ) from error
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as error:
            raise UsageError(f"plugin config {path} is not valid YAML: {error}") from error
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise UsageError(f"plugin config {path} is not valid JSON: {error}") from error

    entries: list[tuple[object, object]] = []
    if isinstance(data, dict) and "plugins" in data:
        if not isinstance(data["plugins"], list):
            raise UsageError(f"plugin config {path}: 'plugins' must be a list")
        for item in data["plugins"]:
            if isinstance(item, dict):
                unknown = set(item) - {"path", "layers"}
                if unknown or "path" not in item:
                    raise UsageError(
                        f"plugin config {path}: entries are paths or {{path, layers}}, got {item!r}"
                    )
                entries.append((item["path"], item.get("layers", [])))
            else:
                entries.append((item, []))
    elif isinstance(data, list):
        entries = [(item, []) for item in data]
    elif isinstance(data, dict):
        entries = [(key, value) for key, value in data.items() if not str(key).startswith("__")]
    else:
        raise UsageError(
            f"plugin config {path}: expected a list of libraries or a mapping, got {type(data).__name__}"
        )
    if not entries:
        raise UsageError(f"plugin config {path} lists no plugin library")

    libraries = []
    for library, layers in entries:
        if not isinstance(library, str) or not library.strip():
            raise UsageError(
                f"plugin config {path}: a library path must be a non-empty string, got {library!r}"
            )
        if not isinstance(layers, list) or not all(isinstance(layer, str) for layer in layers):
            raise UsageError(
                f"plugin config {path}: layers of {library} must be a list of names, got {layers!r}"
            )
        resolved = Path(library).expanduser()
        if not resolved.is_absolute():
            resolved = path.parent / resolved
        libraries.append(PluginLibrary(resolved, tuple(layers), source=str(path)))
    return libraries


def collect_plugin_libraries(cli_paths: Iterable[Path], config_path: Path | None) -> list[PluginLibrary]:
    """Libraries from the command line and the config file, deduplicated, each checked to exist."""
    libraries = [PluginLibrary(Path(p).expanduser()) for p in cli_paths]
    if config_path is not None:
        libraries += load_plugin_config(config_path)
    unique: dict[Path, PluginLibrary] = {}
    for library in libraries:
        if not library.path.is_file():
            raise UsageError(f"plugin library {library.path} (from {library.source}) does not exist")
        unique.setdefault(library.path.resolve(), library)
    return list(unique.values())


def default_plugin_library(trt_version: str, build_dir: Path = BUILD_DIR) -> Path:
    """build/trt-<version>/libtrt_plugin_kit.so for the running TensorRT (as `make plugins` builds it)."""
    parts = trt_version.split(".")
    candidates = [".".join(parts[:n]) for n in (len(parts), 3, 2)]
    for version in dict.fromkeys(candidates):
        library = build_dir / f"trt-{version}" / PLUGIN_LIBRARY_NAME
        if library.is_file():
            return library
    raise UsageError(
        f"no plugin library given and none built for TensorRT {trt_version} in {build_dir}/trt-*/; "
        "build it (`make plugins TRT_VERSIONS=<version> TRT_VENDOR_DIR=...` or cmake -S plugins) and pass "
        "--plugin-library PATH or --plugin-config FILE"
    )
