"""Serving some of the repository's models (`make serve SERVE_ARGS="--models NAME,..."`): while a model of
yours is being written, the kit's models and the others keep serving without it, and one that fails to load
stops only a server that asked for it (tritonserver runs with --exit-on-error: one bad model stops it all).

The subset is a model repository of its own, in the server's work folder: a symbolic link per model chosen,
plus what an ensemble's steps need (mnist_pipeline: mnist_preprocess and mnist). Paths inside the configs
(`onnx_model: ../../models/...`) resolve through the links to the real folders (Path.resolve follows them).
The hardened flags stay as they are (--model-control-mode=none: nothing loads or unloads later).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from pathlib import Path

from trt_plugin_kit.interface import CPU_MODEL_CONFIG_NAME, repository_models
from trt_plugin_kit.serving.host import ServingError

# An ensemble's steps: `step [ { model_name: "mnist_preprocess" ... } ]` in its configuration.
STEP_MODEL = re.compile(r'model_name\s*:\s*"([^"]+)"')


def _configuration(folder: Path, config_name: str | None) -> str:
    for path in ([folder / "configs" / f"{config_name}.pbtxt"] if config_name else []) + [
        folder / "config.pbtxt"
    ]:
        if path.is_file():
            return path.read_text()
    return ""


def with_dependencies(model_repository: Path, models: Sequence[str], config_name: str | None) -> list[str]:
    """The models asked for and, for an ensemble, the models its steps run (transitively), sorted; a name the
    repository does not hold is refused with the closest one it does."""
    available = repository_models(model_repository)
    wanted, pending = set(), list(models)
    while pending:
        name = pending.pop()
        if name in wanted:
            continue
        if name not in available:
            close = difflib.get_close_matches(name, available, n=1)
            hint = f"did you mean '{close[0]}'? " if close else ""
            raise ServingError(
                f"--models: {model_repository} holds no model {name!r}; {hint}"
                f"it holds: {', '.join(available)}"
            )
        wanted.add(name)
        text = _configuration(model_repository / name, config_name)
        if re.search(r'platform\s*:\s*"ensemble"', text):
            pending += STEP_MODEL.findall(text)
    return sorted(wanted)


def link_subset(model_repository: Path, models: Sequence[str], into: Path, config_name: str | None) -> Path:
    """A repository at `into` with a link per model of `models` and their ensembles' steps; returns it."""
    into.mkdir(parents=True)
    for name in with_dependencies(model_repository, models, config_name):
        (into / name).symlink_to(model_repository / name, target_is_directory=True)
    return into


def config_name_of(variant: str) -> str | None:
    """What a variant's tritonserver reads (--model-config-name): configs/cpu.pbtxt on the CPU."""
    return CPU_MODEL_CONFIG_NAME if variant == "cpu" else None
