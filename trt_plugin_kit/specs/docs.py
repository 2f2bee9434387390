"""README tables generated from the plugin specs (plugins/*/spec.yaml).

Each plugin's README.md holds its field table between ``<!-- fields:begin -->`` and ``<!-- fields:end -->``;
plugins/README.md holds the table of all plugins between ``<!-- plugins:begin -->`` and
``<!-- plugins:end -->``. Everything between the markers is generated; the rest of each README is prose.

    python -m trt_plugin_kit.specs docs           # rewrite the tables
    python -m trt_plugin_kit.specs docs --check   # exit 1 when one is stale (tests run this)
"""

from __future__ import annotations

from pathlib import Path

from trt_plugin_kit import interface
from trt_plugin_kit.specs import spec as plugin_spec

FIELDS_BEGIN, FIELDS_END = "<!-- fields:begin -->", "<!-- fields:end -->"
PLUGINS_BEGIN, PLUGINS_END = "<!-- plugins:begin -->", "<!-- plugins:end -->"
_NOTE = "<!-- generated from spec.yaml by `python -m trt_plugin_kit.specs docs`: edit the spec -->"
_TENSOR_TYPES = {"float32": "FP32", "float16": "FP16", "bfloat16": "BF16", "int8": "INT8", "int32": "INT32"}


def _value(value) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    return f"{value:g}" if isinstance(value, float) else str(value)


def field_type(field: plugin_spec.FieldSpec) -> str:
    if field.type == "char":
        return "string"
    return field.type if field.length == 1 else f"{field.type}[{'n' if field.length == -1 else field.length}]"


def field_default(field: plugin_spec.FieldSpec) -> str:
    if field.required:
        return "required"
    if field.default_from:
        return f"= `{field.default_from}`"
    if field.optional:
        return "not set"
    return f'`"{field.default}"`' if field.type == "char" else f"`{_value(field.default)}`"


def field_range(field: plugin_spec.FieldSpec) -> str:
    """The valid values in words, e.g. ``1 to 65536`` or ``> 0, finite``."""
    parts = []
    each = " each" if field.length != 1 and field.type != "char" else ""
    if field.choices:
        quoted = [f'`"{c}"`' if field.type == "char" else f"`{c}`" for c in field.choices]
        parts.append(" or ".join([", ".join(quoted[:-1]), quoted[-1]] if len(quoted) > 1 else quoted))
    if field.minimum is not None and field.maximum is not None:
        parts.append(f"{_value(field.minimum)} to {_value(field.maximum)}{each}")
    elif field.minimum is not None:
        parts.append(f">= {_value(field.minimum)}{each}")
    elif field.maximum is not None:
        parts.append(f"<= {_value(field.maximum)}{each}")
    if field.greater_than is not None:
        parts.append(f"> {_value(field.greater_than)}{each}")
    if field.less_than:
        parts.append(f"< `{field.less_than}`{each}")
    if field.length_equals:
        parts.append(f"`{field.length_equals}` values")
    if field.length_multiple_of:
        parts.append(f"a multiple of `{field.length_multiple_of}` values")
    if field.type == "float32":
        parts.append("finite")
    return ", ".join(parts) or "any"


def fields_table(spec: plugin_spec.PluginSpec) -> str:
    if not spec.fields:
        return f"{_NOTE}\n`{spec.name}` has no fields (unknown fields are ignored with a warning)."
    rows = [
        _NOTE,
        "| field | type | default | valid values | meaning |",
        "| --- | --- | --- | --- | --- |",
    ]
    for field in spec.fields:
        cells = (
            f"`{field.name}`",
            field_type(field),
            field_default(field),
            field_range(field),
            field.meaning,
        )
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def plugins_table(specs: dict[str, plugin_spec.PluginSpec]) -> str:
    """One row per plugin; fields are in each plugin's README (so that a field changes its folder only)."""
    rows = [
        _NOTE,
        "| plugin (creator name) | what it computes | types | input | fields |",
        "| --- | --- | --- | --- | --- |",
    ]
    for spec in sorted(specs.values(), key=lambda s: s.name):
        types = ", ".join(_TENSOR_TYPES[t] for t in spec.inputs[0].types)
        inputs = "; ".join(
            f"{t.name}: {t.meaning}" if len(spec.inputs) > 1 else t.meaning for t in spec.inputs
        )
        fields = f"[{spec.folder.name}/README.md]({spec.folder.name}/README.md)"
        rows.append(f"| `{spec.name}` | {spec.summary} | {types} | {inputs} | {fields} |")
    return "\n".join(rows)


def _replace(text: str, begin: str, end: str, table: str, path: Path) -> str:
    if text.count(begin) != 1 or text.count(end) != 1 or text.index(begin) > text.index(end):
        raise plugin_spec.SpecError(f"{path}: needs one {begin} ... {end} block for the generated table")
    head, rest = text.split(begin)
    _, tail = rest.split(end)
    return f"{head}{begin}\n{table}\n{end}{tail}"


def update(check: bool = False, plugins_dir: Path | None = None) -> list[Path]:
    """Rewrites the generated tables (with ``check``, only compares); returns the READMEs that were stale."""
    plugins_dir = Path(plugins_dir or interface.PLUGINS_DIR)
    specs = plugin_spec.all_specs(plugins_dir)
    wanted = {plugins_dir / "README.md": (PLUGINS_BEGIN, PLUGINS_END, plugins_table(specs))}
    for spec in specs.values():
        wanted[spec.folder / "README.md"] = (FIELDS_BEGIN, FIELDS_END, fields_table(spec))
    stale = []
    for path, (begin, end, table) in wanted.items():
        text = path.read_text() if path.exists() else f"# {path.parent.name}\n\n{begin}\n{end}\n"
        new = _replace(text, begin, end, table, path)
        if new != text:
            stale.append(path)
            if not check:
                path.write_text(new)
    return stale
