"""One spec per plugin: ``plugins/<folder>/spec.yaml`` holds every fact about that plugin.

What derives from a spec or is checked against it:

* the ONNX node helper (:mod:`trt_plugin_kit.specs.nodes`): op_type = creator name, one typed attribute per
  field, values checked against types and ranges; our export builds its plugin nodes with it;
* the NumPy reference registry (:mod:`trt_plugin_kit.specs.reference`: creator name -> the function named by
  ``reference`` in the folder's ``reference.py``) and the ONNX evaluator's plugin ops built from it;
* the C++ test tools: a table generated at build time (:mod:`trt_plugin_kit.specs.cpp`) gives the
  harness and the fuzzer the plugin names, fields, ranges and plausible shapes;
* the field tables of the READMEs (:mod:`trt_plugin_kit.specs.docs`);
* tests compare the built library (``getFieldNames``, defaults, accepted types) with the specs.

A new plugin folder with a ``spec.yaml`` is picked up by all of them (and by the CMake build) without an edit
elsewhere. The format, by example (plugins/pool/spec.yaml is the fullest)::

    creator: LeakyReLU          # getPluginName() and the ONNX op_type
    version: "1"                # getPluginVersion(); every plugin of the library has PLUGIN_VERSION
    summary: one line for plugins/README.md
    reference: leaky_relu       # function of this folder's reference.py (optional error_scale: another)
    inputs: [{name: x, types: [float32, float16], meaning: ...}]  # float32 float16 bfloat16 int8 int32
    outputs: [{name: y, types: [float32, float16], meaning: ...}]
    formats: [linear]
    fields:                     # in getFieldNames() order
      - name: negative_slope
        type: float32           # float32 | int32 | char (a string)
        length: 1               # getFieldNames() length: 1, 2, ... or -1 (any length >= 1)
        default: 0.01           # or default_from: <field>, required: true, optional: true (not set)
        meaning: ...            # valid values: min, max (inclusive), greater_than, choices,
                                # less_than: <field> (per element), length_equals, length_multiple_of
    example: {}                 # values of the required fields, for a plugin built from them alone
    lookalike: LeakyRelu        # only when an ONNX operator's name differs from the creator's only in case
    shapes: {inputs: [[2, 3]], outputs: [[2, 3]]}   # dims: ints or expressions over the fields

Shape expressions are a small subset of Python over integer fields: ``kernel[0] + stride[0]``,
``len(weights) // num_outputs``, ``3 if len(slopes) == 1 else len(slopes)``.

    python -m trt_plugin_kit.specs docs [--check]    # README field tables
    python -m trt_plugin_kit.specs cpp OUTPUT.cpp    # the C++ tools' table (CMake runs this)
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from trt_plugin_kit import interface
from trt_plugin_kit.interface import PLUGIN_VERSION

SPEC_FILE = "spec.yaml"
FIELD_TYPES = ("float32", "int32", "char")
TENSOR_TYPES = ("float32", "float16", "bfloat16", "int8", "int32")
FORMATS = ("linear",)
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
FLOAT32_MAX = 3.4028234663852886e38

_SPEC_KEYS = {"creator", "version", "summary", "reference", "error_scale", "inputs", "outputs", "formats"}
_SPEC_KEYS |= {"fields", "example", "shapes", "lookalike"}
_FIELD_KEYS = {"name", "type", "length", "meaning", "required", "default", "default_from", "optional"}
_FIELD_KEYS |= {"min", "max", "greater_than", "choices", "less_than", "length_equals", "length_multiple_of"}
_TENSOR_KEYS = {"name", "types", "meaning"}


class SpecError(ValueError):
    """A spec file is malformed, or field values break a spec (the message names the plugin and field)."""


@dataclass(frozen=True)
class FieldSpec:
    name: str
    type: str  # float32 | int32 | char
    length: int  # 1, 2, ... or -1 (any length >= 1; for char, a string)
    meaning: str
    required: bool = False
    default: Any = None  # scalar for length 1, list for arrays, str for char
    default_from: str | None = None
    optional: bool = False  # may be left unset (no default): what "not set" means is in `meaning`
    minimum: float | None = None
    maximum: float | None = None
    greater_than: float | None = None
    choices: tuple | None = None
    less_than: str | None = None
    length_equals: str | None = None
    length_multiple_of: str | None = None

    @property
    def is_scalar(self) -> bool:
        return self.type != "char" and self.length == 1


@dataclass(frozen=True)
class PluginTensor:
    """One input or output a plugin declares in its spec.yaml: the types it accepts and what it means."""

    name: str
    types: tuple[str, ...]
    meaning: str


@dataclass(frozen=True)
class PluginSpec:
    name: str
    version: str
    summary: str
    folder: Path
    reference: str
    error_scale: str | None
    inputs: tuple[PluginTensor, ...]
    outputs: tuple[PluginTensor, ...]
    formats: tuple[str, ...]
    fields: tuple[FieldSpec, ...]
    example: dict
    shape_inputs: tuple[tuple, ...]  # dims: int or expression string
    shape_outputs: tuple[tuple, ...]
    lookalike: str | None = None  # an ONNX operator whose name differs only in case (known, harmless)

    @property
    def field_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)

    def field(self, name: str) -> FieldSpec:
        for spec in self.fields:
            if spec.name == name:
                return spec
        raise SpecError(f"{self.name} has no field {name!r}; fields are {list(self.field_names)}")

    def complete(self, values: dict[str, Any]) -> dict[str, Any]:
        """Checks ``values`` (field name -> value) and returns every field: given values normalized (floats,
        ints, lists, str), defaults filled in, unset optional fields as ``None``. An empty list is not set (as
        the plugin reads an empty field). Raises SpecError naming the field for an unknown name, a wrong type
        or length, or a value outside the field's valid range."""
        unknown = sorted(set(values) - set(self.field_names))
        if unknown:
            raise SpecError(f"{self.name} has no field(s) {unknown}; fields are {list(self.field_names)}")
        result: dict[str, Any] = {}
        for spec in self.fields:
            value = values.get(spec.name)
            if value is not None and spec.type != "char" and not isinstance(value, int | float):
                value = value if len(_as_list(value)) else None  # empty = not set, as the plugin reads it
            if value is not None:
                result[spec.name] = _normalize(self.name, spec, value)
            elif spec.required:
                raise SpecError(f"{self.name}: required field {spec.name!r} is missing ({spec.meaning})")
            else:
                result[spec.name] = spec.default
        for spec in self.fields:  # defaults that copy another field, then the checks between fields
            if result[spec.name] is None and spec.default_from:
                result[spec.name] = result[spec.default_from]
        for spec in self.fields:
            if result[spec.name] is not None:
                _check_relations(self.name, spec, result)
        return result


# ------------------------------------------------------------------------------------------- values


def _as_list(value: Any) -> list:
    if hasattr(value, "tolist"):  # NumPy arrays and scalars
        value = value.tolist()
    return list(value) if isinstance(value, list | tuple) else [value]


def _normalize(plugin: str, spec: FieldSpec, value: Any) -> Any:
    """The value in its canonical form (str, float, int or list of them), or SpecError."""
    where = f"{plugin}: field {spec.name!r}"
    if spec.type == "char":
        if isinstance(value, bytes):
            value = value.decode()
        if not isinstance(value, str):
            raise SpecError(f"{where} must be a string, got {type(value).__name__} {value!r}")
        if "\0" in value:
            raise SpecError(f"{where} must not contain NUL characters")
        if spec.choices is not None and value not in spec.choices:
            raise SpecError(f"{where} must be one of {list(spec.choices)}, got {value!r}")
        return value
    items = _as_list(value)
    if spec.length == -1 and not items:
        raise SpecError(f"{where} must not be empty (leave it out instead)")
    if spec.length > 0 and len(items) != spec.length:
        raise SpecError(f"{where} must hold exactly {spec.length} value(s), got {len(items)}: {value!r}")
    if len(items) > 64 and spec.choices is None and not _has_range(spec):
        checked = _bulk(where, spec, items)  # weights: one pass in C rather than a check per value
    else:
        checked = [_element(where, spec, item) for item in items]
    return checked[0] if spec.is_scalar else checked


def _has_range(spec: FieldSpec) -> bool:
    return spec.minimum is not None or spec.maximum is not None or spec.greater_than is not None


def _bulk(where: str, spec: FieldSpec, items: list) -> list:
    allowed = {int} if spec.type == "int32" else {int, float}
    if not set(map(type, items)) <= allowed:
        return [_element(where, spec, item) for item in items]  # finds and names the bad value
    if spec.type == "int32":
        if not INT32_MIN <= min(items) and max(items) <= INT32_MAX:
            return [_element(where, spec, item) for item in items]
        return items
    items = list(map(float, items))
    if not all(map(math.isfinite, items)) or max(map(abs, items)) > FLOAT32_MAX:
        return [_element(where, spec, item) for item in items]
    return items


def _element(where: str, spec: FieldSpec, item: Any) -> float | int:
    if isinstance(item, bool) or not isinstance(item, int | float):
        raise SpecError(f"{where} holds {spec.type} values, got {type(item).__name__} {item!r}")
    if spec.type == "int32":
        if not isinstance(item, int):
            raise SpecError(f"{where} holds int32 values, got the float {item!r}")
        if not INT32_MIN <= item <= INT32_MAX:
            raise SpecError(f"{where} value {item} does not fit int32")
    else:
        item = float(item)
        if not math.isfinite(item) or abs(item) > FLOAT32_MAX:
            raise SpecError(f"{where} must be a finite float32, got {item!r}")
    if spec.choices is not None and item not in spec.choices:
        raise SpecError(f"{where} must be one of {list(spec.choices)}, got {item!r}")
    if spec.minimum is not None and item < spec.minimum:
        raise SpecError(f"{where} must be >= {spec.minimum:g}, got {item!r} (out of range)")
    if spec.maximum is not None and item > spec.maximum:
        raise SpecError(f"{where} must be <= {spec.maximum:g}, got {item!r} (out of range)")
    if spec.greater_than is not None and not item > spec.greater_than:
        raise SpecError(f"{where} must be > {spec.greater_than:g}, got {item!r} (out of range)")
    return item


def _check_relations(plugin: str, spec: FieldSpec, values: dict[str, Any]) -> None:
    where = f"{plugin}: field {spec.name!r}"
    items = _as_list(values[spec.name])
    if spec.less_than:
        bound = _as_list(values[spec.less_than])
        if any(a >= b for a, b in zip(items, bound, strict=False)):
            raise SpecError(f"{where} {items} must be smaller than {spec.less_than!r} {bound} (out of range)")
    if spec.length_equals and len(items) != values[spec.length_equals]:
        raise SpecError(
            f"{where} has {len(items)} values, must have {spec.length_equals} = {values[spec.length_equals]}"
        )
    if spec.length_multiple_of and len(items) % values[spec.length_multiple_of]:
        raise SpecError(
            f"{where} has {len(items)} values, not a multiple of {spec.length_multiple_of} = "
            f"{values[spec.length_multiple_of]}"
        )


# ------------------------------------------------------------------------------------ shape expressions

_COMPARE = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}
_BINARY = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//"}


def _check_dim(dim: Any, fields: dict[str, FieldSpec]) -> None:
    """Raises SpecError unless ``dim`` is an int or an expression of the allowed subset."""
    if isinstance(dim, int) and not isinstance(dim, bool):
        return
    if not isinstance(dim, str):
        raise SpecError(f"shape dimension {dim!r} is neither an integer nor an expression")
    tree = ast.parse(dim, mode="eval").body

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return
        if isinstance(node, ast.Name):
            spec = fields.get(node.id)
            if spec is None or spec.type != "int32" or spec.length != 1:
                raise SpecError(f"{dim!r}: {node.id!r} is not an int32 field of length 1")
            return
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
            spec = fields.get(node.value.id)
            index = node.slice
            if spec is None or spec.type != "int32" or not isinstance(index, ast.Constant):
                raise SpecError(f"{dim!r}: only int32 array fields with a constant index can be indexed")
            return
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "len":
            if len(node.args) != 1 or not isinstance(node.args[0], ast.Name) or node.args[0].id not in fields:
                raise SpecError(f"{dim!r}: len() takes one field name")
            return
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            return visit(node.left) or visit(node.right)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return visit(node.operand)
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _COMPARE:
            return visit(node.left) or visit(node.comparators[0])
        if isinstance(node, ast.IfExp):
            return visit(node.test) or visit(node.body) or visit(node.orelse)
        raise SpecError(f"{dim!r}: {ast.dump(node)} is not allowed in a shape expression")

    visit(tree)


def evaluate_dim(dim: Any, values: dict[str, Any]) -> int:
    """The value of a spec dimension for complete field values (:meth:`PluginSpec.complete`)."""

    def value(node: ast.AST) -> int:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return values[node.id]
        if isinstance(node, ast.Subscript):
            return values[node.value.id][node.slice.value]
        if isinstance(node, ast.Call):
            return len(_as_list(values[node.args[0].id]))
        if isinstance(node, ast.UnaryOp):
            return -value(node.operand)
        if isinstance(node, ast.BinOp):
            a, b = value(node.left), value(node.right)
            return {"+": a + b, "-": a - b, "*": a * b, "//": a // b if b else 0}[_BINARY[type(node.op)]]
        if isinstance(node, ast.Compare):
            a, b = value(node.left), value(node.comparators[0])
            op = _COMPARE[type(node.ops[0])]
            return int({"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op])
        if isinstance(node, ast.IfExp):
            return value(node.body) if value(node.test) else value(node.orelse)
        raise SpecError(f"cannot evaluate {ast.dump(node)}")

    return dim if isinstance(dim, int) else int(value(_tree(dim)))


@functools.cache
def _tree(dim: str) -> ast.AST:
    return ast.parse(dim, mode="eval").body


def dim_to_cpp(dim: Any) -> str:
    """A dimension as a C++ expression over ``FieldValues const& f``
    (see plugins/harness/core/plugin_specs.h)."""
    if isinstance(dim, int):
        return f"int64_t{{{dim}}}"

    def cpp(node: ast.AST) -> str:
        if isinstance(node, ast.Constant):
            return f"int64_t{{{node.value}}}"
        if isinstance(node, ast.Name):
            return f'f.value("{node.id}", 0)'
        if isinstance(node, ast.Subscript):
            return f'f.value("{node.value.id}", {node.slice.value})'
        if isinstance(node, ast.Call):
            return f'f.length("{node.args[0].id}")'
        if isinstance(node, ast.UnaryOp):
            return f"(-{cpp(node.operand)})"
        if isinstance(node, ast.BinOp):
            op = _BINARY[type(node.op)]
            if op == "//":
                return f"floorDiv({cpp(node.left)}, {cpp(node.right)})"
            return f"({cpp(node.left)} {op} {cpp(node.right)})"
        if isinstance(node, ast.Compare):
            op = _COMPARE[type(node.ops[0])]
            return f"int64_t{{{cpp(node.left)} {op} {cpp(node.comparators[0])}}}"
        if isinstance(node, ast.IfExp):
            return f"({cpp(node.test)} ? {cpp(node.body)} : {cpp(node.orelse)})"
        raise SpecError(f"cannot translate {ast.dump(node)}")

    return cpp(_tree(dim))


# ------------------------------------------------------------------------------------------- loading


def _require(condition: bool, where: str, message: str) -> None:
    if not condition:
        raise SpecError(f"{where}: {message}")


def _load_field(where: str, raw: Any) -> FieldSpec:
    _require(isinstance(raw, dict), where, "each field is a mapping")
    name = raw.get("name")
    where = f"{where}: field {name!r}"
    _require(isinstance(name, str) and name.isidentifier(), where, "needs a name (an identifier)")
    _require(not set(raw) - _FIELD_KEYS, where, f"unknown key(s) {sorted(set(raw) - _FIELD_KEYS)}")
    _require(raw.get("type") in FIELD_TYPES, where, f"type must be one of {FIELD_TYPES}")
    length = raw.get("length")
    _require(isinstance(length, int) and (length == -1 or length >= 1), where, "length must be -1 or >= 1")
    _require(raw["type"] != "char" or length == -1, where, "a char field (a string) has length -1")
    _require(raw["type"] != "char" or "optional" not in raw, where, "a char field cannot be left unset")
    kinds = [k for k in ("required", "default", "default_from", "optional") if k in raw]
    _require(len(kinds) == 1, where, "give exactly one of required, default, default_from, optional")
    _require(isinstance(raw.get("meaning"), str), where, "needs a meaning")
    choices = raw.get("choices")
    _require(choices is None or (isinstance(choices, list) and choices), where, "choices is a non-empty list")
    return FieldSpec(
        name=name,
        type=raw["type"],
        length=length,
        meaning=raw["meaning"].strip(),
        required=raw.get("required", False) is True,
        default=raw.get("default"),
        default_from=raw.get("default_from"),
        optional=raw.get("optional", False) is True,
        minimum=raw.get("min"),
        maximum=raw.get("max"),
        greater_than=raw.get("greater_than"),
        choices=tuple(choices) if choices else None,
        less_than=raw.get("less_than"),
        length_equals=raw.get("length_equals"),
        length_multiple_of=raw.get("length_multiple_of"),
    )


def _load_tensors(where: str, raw: Any) -> tuple[PluginTensor, ...]:
    _require(isinstance(raw, list) and raw, where, "needs a non-empty list")
    tensors = []
    for item in raw:
        _require(isinstance(item, dict) and not set(item) - _TENSOR_KEYS, where, f"bad tensor entry {item!r}")
        types = item.get("types")
        _require(isinstance(types, list) and types and set(types) <= set(TENSOR_TYPES), where, "bad types")
        meaning = str(item.get("meaning", "")).strip()
        tensors.append(PluginTensor(str(item.get("name")), tuple(types), meaning))
    return tuple(tensors)


def load(folder: Path) -> PluginSpec:
    """The spec of one plugin folder, checked (SpecError names the file and what is wrong)."""
    path = Path(folder) / SPEC_FILE
    where = str(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        raise SpecError(f"{where}: not valid YAML: {error}") from error
    _require(isinstance(raw, dict), where, "must be a mapping")
    _require(not set(raw) - _SPEC_KEYS, where, f"unknown key(s) {sorted(set(raw) - _SPEC_KEYS)}")
    name = raw.get("creator")
    _require(isinstance(name, str) and name.isidentifier(), where, "creator must be an identifier")
    _require(
        raw.get("version") == PLUGIN_VERSION,
        where,
        f"version must be {PLUGIN_VERSION!r}: the library registers every creator at PLUGIN_VERSION",
    )
    fields_raw = raw.get("fields") or []
    _require(isinstance(fields_raw, list), where, "fields must be a list")
    fields = tuple(_load_field(where, item) for item in fields_raw)
    try:  # defaults in canonical form, each a valid value of its field
        fields = tuple(
            dataclasses.replace(f, default=_normalize(name, f, f.default)) if f.default is not None else f
            for f in fields
        )
    except SpecError as error:
        raise SpecError(f"{where}: {error}") from error
    by_name = {f.name: f for f in fields}
    _require(len(by_name) == len(fields), where, "field names must be unique")
    for f in fields:
        for key in ("default_from", "less_than", "length_equals", "length_multiple_of"):
            other = getattr(f, key)
            _require(other is None or other in by_name, where, f"{f.name}.{key}: no field {other!r}")
        for key in ("length_equals", "length_multiple_of"):
            other = getattr(f, key)
            _require(other is None or by_name[other].is_scalar, where, f"{f.name}.{key} needs a scalar")
    shapes = raw.get("shapes") or {}
    spec = PluginSpec(
        name=name,
        version=raw["version"],
        summary=str(raw.get("summary", "")).strip(),
        folder=Path(folder),
        reference=raw.get("reference", ""),
        error_scale=raw.get("error_scale"),
        inputs=_load_tensors(f"{where}: inputs", raw.get("inputs")),
        outputs=_load_tensors(f"{where}: outputs", raw.get("outputs")),
        formats=tuple(raw.get("formats") or ()),
        fields=fields,
        example=dict(raw.get("example") or {}),
        shape_inputs=tuple(tuple(dims) for dims in shapes.get("inputs", ())),
        shape_outputs=tuple(tuple(dims) for dims in shapes.get("outputs", ())),
        lookalike=raw.get("lookalike"),
    )
    _require(isinstance(spec.reference, str) and spec.reference.isidentifier(), where, "reference: a name")
    _require(spec.formats and set(spec.formats) <= set(FORMATS), where, f"formats must be from {FORMATS}")
    _require(
        set(spec.example) == {f.name for f in fields if f.required}, where, "example: the required fields"
    )
    try:
        complete = spec.complete(spec.example)  # the example and every default must be valid values
        _require(len(spec.shape_inputs) == len(spec.inputs), where, "shapes: one per input")
        _require(len(spec.shape_outputs) == len(spec.outputs), where, "shapes: one per output")
        for dims in (*spec.shape_inputs, *spec.shape_outputs):
            _require(1 <= len(dims) <= 8, where, f"shape {list(dims)}: rank 1 to 8")
            for dim in dims:
                _check_dim(dim, by_name)
                evaluate_dim(dim, complete)
    except SpecError as error:
        raise SpecError(f"{where}: {error}") from error
    return spec


def folders(plugins_dir: Path | None = None) -> list[Path]:
    """Plugin folders: the subfolders of plugins/ (or `plugins_dir`) with a spec.yaml, sorted by name."""
    return sorted(path.parent for path in Path(plugins_dir or interface.PLUGINS_DIR).glob(f"*/{SPEC_FILE}"))


@functools.cache
def _all(plugins_dir: Path) -> dict[str, PluginSpec]:
    specs: dict[str, PluginSpec] = {}
    for folder in folders(plugins_dir):
        spec = load(folder)
        if spec.name in specs:
            raise SpecError(f"{folder}: creator {spec.name} is also in {specs[spec.name].folder}")
        specs[spec.name] = spec
    return specs


def reload() -> None:
    """The next all_specs() reads plugins/ again (after a plugin folder was added: new-plugin)."""
    _all.cache_clear()


def all_specs(plugins_dir: Path | None = None) -> dict[str, PluginSpec]:
    """Creator name -> spec of each plugin folder of plugins/ or `plugins_dir` (loaded once per directory)."""
    return _all(Path(plugins_dir or interface.PLUGINS_DIR).resolve())


def get(name: str) -> PluginSpec:
    """The spec of the plugin whose creator is ``name``."""
    specs = all_specs()
    if name not in specs:
        raise SpecError(f"no plugin named {name!r}; plugins are {sorted(specs)}")
    return specs[name]
