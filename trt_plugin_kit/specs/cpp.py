"""The C++ tools' copy of the plugin specs: ``harness::pluginSpecs()`` (plugins/harness/core/plugin_specs.h),
generated from plugins/*/spec.yaml when plugin_harness / plugin_stress are built
(plugins/harness/CMakeLists.txt runs ``python -m trt_plugin_kit.specs cpp OUTPUT``)."""

from __future__ import annotations

import json
from pathlib import Path

from trt_plugin_kit.specs import spec as plugin_spec

_FIELD_TYPES = {"float32": "kFLOAT32", "int32": "kINT32", "char": "kCHAR"}
_TENSOR_TYPES = {
    "float32": "kFLOAT",
    "float16": "kHALF",
    "bfloat16": "kBF16",
    "int8": "kINT8",
    "int32": "kINT32",
}


def _string(text: str) -> str:
    return json.dumps(text)  # a valid C++ string literal for the ASCII text of the specs


def _number(value: float | int) -> str:
    return repr(float(value)) if isinstance(value, float) else f"{value}.0"


def _numbers(values) -> str:
    return "{" + ", ".join(_number(v) for v in values) + "}"


def _field(field: plugin_spec.FieldSpec) -> list[str]:
    lines = [
        "{",
        "    FieldSpec f;",
        f"    f.name = {_string(field.name)};",
        f"    f.type = nvinfer1::PluginFieldType::{_FIELD_TYPES[field.type]};",
        f"    f.length = {field.length};",
        f"    f.required = {str(field.required).lower()};",
        f"    f.optional = {str(field.optional).lower()};",
    ]
    if field.default is not None:
        if field.type == "char":
            lines.append(f"    f.defaultString = {_string(field.default)};")
        else:
            values = field.default if isinstance(field.default, list) else [field.default]
            lines.append(f"    f.defaultNumbers = {_numbers(values)};")
    for attribute, member in (("default_from", "defaultFrom"), ("less_than", "lessThan")):
        if getattr(field, attribute):
            lines.append(f"    f.{member} = {_string(getattr(field, attribute))};")
    for attribute, member in (("length_equals", "lengthEquals"), ("length_multiple_of", "lengthMultipleOf")):
        if getattr(field, attribute):
            lines.append(f"    f.{member} = {_string(getattr(field, attribute))};")
    for attribute, member in (("minimum", "min"), ("maximum", "max"), ("greater_than", "greaterThan")):
        if getattr(field, attribute) is not None:
            lines.append(f"    f.{member} = {_number(getattr(field, attribute))};")
    if field.choices:
        if field.type == "char":
            lines.append("    f.stringChoices = {" + ", ".join(_string(c) for c in field.choices) + "};")
        else:
            lines.append(f"    f.numberChoices = {_numbers(field.choices)};")
    lines += ["    p.fields.push_back(f);", "}"]
    return lines


def _example(spec: plugin_spec.PluginSpec) -> list[str]:
    lines = []
    for name, value in spec.example.items():
        field = spec.field(name)
        values = value if isinstance(value, list) else [value]
        if field.type == "char":
            lines.append(f"p.example.addString({_string(name)}, {_string(value)});")
        elif field.type == "int32":
            lines.append(f"p.example.addInts({_string(name)}, {{{', '.join(str(v) for v in values)}}});")
        else:
            floats = ", ".join(f"{_number(v)}F" for v in values)
            lines.append(f"p.example.addFloats({_string(name)}, {{{floats}}});")
    return lines


def _shapes(member: str, shapes: tuple) -> list[str]:
    lines = [f"p.{member} = {{"]
    for dims in shapes:
        rules = []
        for dim in dims:
            expression = plugin_spec.dim_to_cpp(dim)
            parameter = "FieldValues const& f" if "f." in expression else "FieldValues const&"
            rules.append(f"[]({parameter}) -> int64_t {{ return {expression}; }}")
        lines.append("    {" + ", ".join(rules) + "},")
    lines.append("};")
    return lines


def source(specs: dict[str, plugin_spec.PluginSpec] | None = None) -> str:
    """The C++ source of ``harness::pluginSpecs()``."""
    specs = plugin_spec.all_specs() if specs is None else specs
    ordered = sorted(specs.values(), key=lambda s: s.folder.name)
    body: list[str] = []
    for spec in ordered:
        inputs = ", ".join(
            "{" + ", ".join(f"nvinfer1::DataType::{_TENSOR_TYPES[t]}" for t in tensor.types) + "}"
            for tensor in spec.inputs
        )
        block = [
            f"// {spec.folder.name}/spec.yaml",
            "{",
            "PluginSpec p;",
            f"p.name = {_string(spec.name)};",
            f"p.version = {_string(spec.version)};",
            f"p.inputTypes = {{{inputs}}};",
            f"p.nbOutputs = {len(spec.outputs)};",
        ]
        for field in spec.fields:
            block += _field(field)
        block += _example(spec)
        block += _shapes("shapeInputs", spec.shape_inputs)
        block += _shapes("shapeOutputs", spec.shape_outputs)
        block += ["specs.push_back(std::move(p));", "}"]
        body += ["        " + line if line else "" for line in block]
    return "\n".join(
        [
            "// Generated from plugins/*/spec.yaml (python -m trt_plugin_kit.specs cpp): do not edit.",
            '#include "core/plugin_specs.h"',
            "",
            "namespace harness",
            "{",
            "std::vector<PluginSpec> const& pluginSpecs()",
            "{",
            "    static std::vector<PluginSpec> const table = []",
            "    {",
            "        std::vector<PluginSpec> specs;",
            *body,
            "        return specs;",
            "    }();",
            "    return table;",
            "}",
            "}  // namespace harness",
            "",
        ]
    )


def write(output: Path) -> None:
    """Writes the source (always: the build compares its time with the specs')."""
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(source())
