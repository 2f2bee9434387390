"""One :class:`BuildJob` per model and flavour: everything decided and checked before TensorRT is needed."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import onnx

from trt_plugin_kit.engines.consistency import (
    Profile,
    check_io_against_config,
    check_profile_covers_config,
    onnx_io_specs,
    profile_shapes,
)
from trt_plugin_kit.engines.errors import UsageError
from trt_plugin_kit.engines.precision import PrecisionRecipe, choose_recipe
from trt_plugin_kit.interface import FLAVOURS, L2NORM, MODEL_ONNX_FILE
from trt_plugin_kit.interface import TENSORRT_MODELS as MODELS
from trt_plugin_kit.models import export
from trt_plugin_kit.tritonserver.config import ModelConfig, ModelConfigError, load_model_config

PLAN_FILE_NAME = "model.plan"  # what Triton's TensorRT backend loads from <model>/<version>/


@dataclass
class BuildJob:
    model: str
    flavour: str
    recipe: PrecisionRecipe
    config: ModelConfig
    onnx_source: Path
    output: Path  # where the plan is written
    profile: Profile
    network_api: bool = False
    onnx_model: object = field(default=None, repr=False)  # the ONNX variant to parse

    @property
    def title(self) -> str:
        return f"{self.model} {self.flavour} {self.recipe.precision}"

    def required_plugins(self) -> list[str]:
        if self.network_api:
            return ["L2Normalize"]
        nodes = self.onnx_model.graph.node
        return sorted({node.op_type for node in nodes if node.domain == export.PLUGIN_DOMAIN})


def selected(choice: str, everything: Sequence[str]) -> tuple[str, ...]:
    return tuple(everything) if choice in ("all", "both") else (choice,)


def model_folder(args: argparse.Namespace, model: str) -> Path:
    """The folder of ``model`` in the repository: ours, or any holding a config.pbtxt (and for a model of
    yours, its plugin-flavour ONNX as model.onnx, as new-plugin writes it)."""
    folder = args.model_repository / model
    if Path(model).name != model or model in ("", ".", ".."):
        raise UsageError(f"--model takes a model folder name, not {model!r}")
    if model not in MODELS and not (folder / "config.pbtxt").is_file():
        buildable = (
            sorted(p.name for p in args.model_repository.iterdir() if (p / "config.pbtxt").is_file())
            if args.model_repository.is_dir()
            else []
        )
        raise UsageError(
            f"{folder}/config.pbtxt not found: --model names a folder of {args.model_repository} holding a "
            f"config.pbtxt (there: {', '.join(buildable) or 'none'})"
        )
    return folder


def _source(args: argparse.Namespace, model: str, flavour: str) -> Path:
    if model in MODELS:
        source = export.onnx_path(model, flavour, args.onnx_dir)
        if not source.is_file():
            raise UsageError(f"{source} not found (python -m trt_plugin_kit.models.export writes it)")
        return source
    if flavour != "plugin":
        raise UsageError(f"{model} has one ONNX file, the plugin flavour: build it with --flavour plugin")
    source = args.model_repository / model / MODEL_ONNX_FILE
    if not source.is_file():
        raise UsageError(f"{source} not found: a model of yours is built from its {MODEL_ONNX_FILE}")
    return source


def make_build_jobs(args: argparse.Namespace, trt_major: int) -> list[BuildJob]:
    """Everything that can be decided and checked without TensorRT: configs, graphs, precision, profiles."""
    jobs = []
    scales = None
    for model in selected(args.model, MODELS):
        config_path = model_folder(args, model) / "config.pbtxt"
        try:
            config = load_model_config(config_path)
        except (FileNotFoundError, ModelConfigError) as error:
            raise UsageError(str(error)) from error
        if not config.is_tensorrt:
            raise UsageError(
                f"{config_path} is not a TensorRT model configuration (platform '{config.platform}', backend "
                f"'{config.backend}'): a {PLAN_FILE_NAME} there would not be served"
            )
        if config.name and config.name != model:
            raise UsageError(f"{config_path} names the model '{config.name}', expected '{model}'")
        if model not in MODELS and args.precision == "int8":
            raise UsageError(
                f"{model}: int8 needs calibrated scales, which only mnist has "
                "(models/lenet5_mnist_int8_scales.json); build fp32 or fp16"
            )
        profile = profile_shapes(model, config, args.opt_batch, getattr(args, "dim_range", None))
        check_profile_covers_config(profile, config)
        for flavour in selected(args.flavour, FLAVOURS):
            recipe = choose_recipe(args.precision, trt_major, model, args.strongly_typed)
            source = _source(args, model, flavour)
            fp32_graph = onnx.load(source)
            if recipe.graph == "int8" and scales is None:
                if not args.int8_scales.is_file():
                    raise UsageError(f"INT8 needs calibrated scales: {args.int8_scales} not found")
                scales = export.load_int8_scales(args.int8_scales)
            graph = export.make_variant(fp32_graph, recipe.graph, scales)
            onnx.checker.check_model(graph)
            if flavour == "plugin":
                output = args.model_repository / model / "1" / PLAN_FILE_NAME
            else:
                output = args.engine_dir / f"{model}_native_{args.precision}.plan"
            job = BuildJob(
                model, flavour, recipe, config, source, output, profile, args.network_api and model == L2NORM
            )
            job.onnx_model = graph
            # Fail before building when the graph cannot match the Triton config.
            check_io_against_config(
                onnx_io_specs(graph), config, f"ONNX graph {source.name} ({recipe.graph})"
            )
            jobs.append(job)
    return jobs


def describe(job: BuildJob) -> str:
    recipe = job.recipe
    source = (
        "TensorRT network API (l2norm)"
        if job.network_api
        else f"{job.onnx_source.name} [{recipe.graph} graph]"
    )
    flags = ", ".join([f"+{f}" for f in recipe.builder_flags] + [f"-{f}" for f in recipe.cleared_flags])
    profile = "; ".join(
        f"{name} {list(lo)}..{list(opt)}..{list(hi)}" for name, (lo, opt, hi) in job.profile.items()
    )
    lines = [
        f"{job.title}:",
        f"  source         {source}",
        f"  network        {'strongly' if recipe.strongly_typed else 'weakly'} typed, builder flags "
        f"{flags or 'none'}",
        f"  profile        {profile} (min..opt..max, max_batch_size {job.config.max_batch_size})",
        f"  plugins        {', '.join(job.required_plugins()) or 'none'}",
        f"  writes         {job.output}",
    ]
    if recipe.note:
        lines.append(f"  note           {recipe.note}")
    return "\n".join(lines)
