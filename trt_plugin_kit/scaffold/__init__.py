"""``python -m trt_plugin_kit new-plugin NAME``: a plugin folder that builds, registers and passes checks.

The folder ``plugins/<name>/`` gets a complete elementwise plugin to change into one's own op: its spec, an
FP32/FP16 vectorized CUDA kernel, the IPluginV3 class and creator on ``plugins/common``, harness cases, the
NumPy reference and a README. The build (plugins/CMakeLists.txt), the creator registration, the ONNX node
helper, the harness, the fuzzer and ``make docs`` pick it up from the folder alone. What it computes::

    t = x0 + x1 + ...                    (--inputs N, every input the same shape and type)
    f(t) = scale * p(t)                  p(t) = c0 + c1 t + c2 t^2 ... (--array-field), else p(t) = t
    y_m = (m + 1) * f(t)                 (--outputs M; m + 1 tells the outputs apart)
    --reduce: y_m = (m + 1) * sum of f(t) over the last axis, which becomes 1

    python -m trt_plugin_kit new-plugin scaled_sum --inputs 2 --array-field coefficients --reduce

``--kernel triton`` writes the kernel in Python instead: ``kernel.py``, an OpenAI Triton ``@triton.jit``
kernel compiled ahead of time by the CMake build into the library (trt_plugin_kit/triton_aot.py), and
``<name>_launch.cpp``, which picks its variant and launches it (plugins/common/triton_kernel.h). With
``--reduce`` its kernel runs one program per row of the last axis (a loop over the row in BLOCK-wide chunks,
summed in FP32, one store per output).
"""

from __future__ import annotations

import argparse
import keyword
import re
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from string import Template

from trt_plugin_kit.interface import MODEL_REPOSITORY, PLUGINS_DIR, REPO_ROOT
from trt_plugin_kit.scaffold import model as served_model
from trt_plugin_kit.specs import docs as plugin_docs
from trt_plugin_kit.specs import nodes as plugin_nodes
from trt_plugin_kit.specs import spec as plugin_spec

TEMPLATES = Path(__file__).parent / "templates"
MAX_TENSORS = 4
FOLDER_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
# Folders of plugins/ that are not plugins (no spec.yaml) but whose names are taken.
RESERVED_FOLDERS = {"common", "harness", "benchmarks"}
KERNEL_LANGUAGES = ("cuda", "triton")
# Names the generated Triton kernel uses itself: a float field may not take one of them.
TRITON_NAMES = {
    "count",
    "coefficients",
    "n_coefficients",
    "i",
    "mask",
    "t",
    "acc",
    "value",
    "k",
    "tl",
    "triton",
    "op",
}


class ScaffoldError(ValueError):
    """A name or option the scaffold refuses, with the reason."""


@dataclass(frozen=True)
class Options:
    name: str  # folder and reference function: snake_case
    creator: str  # plugin name, ONNX op_type, C++ class prefix
    inputs: int = 1
    outputs: int = 1
    float_field: str | None = "scale"
    array_field: str | None = None
    reduce: bool = False
    kernel: str = "cuda"  # or "triton": kernel.py compiled ahead of time

    @property
    def formula(self) -> str:
        inputs = " + ".join(f"x{n}" for n in range(self.inputs))
        t = f"t = {inputs}" if self.inputs > 1 else "t = x0"
        scale = f"{self.float_field} * " if self.float_field else ""
        poly = f"p(t), p's coefficients `{self.array_field}` in ascending powers" if self.array_field else "t"
        outputs = "y0" if self.outputs == 1 else f"y_m (m < {self.outputs}) = (m + 1) *"
        body = f"{scale}{poly}"
        if self.reduce:
            return f"{outputs} sum over the last axis (kept, as 1) of {body}, with {t}."
        return f"{outputs} {'= ' if self.outputs == 1 else ''}{body}, with {t}."


def camel_case(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_") if part)


def validate(options: Options, plugins_dir: Path = PLUGINS_DIR) -> None:
    """Refuses names that would break the build, collide with a plugin, or be taken by TensorRT's parser."""
    name, creator = options.name, options.creator
    if keyword.iskeyword(name):
        raise ScaffoldError(
            f"{name!r} is a Python keyword: the name is also reference.py's function, choose another"
        )
    if not FOLDER_NAME.match(name):
        raise ScaffoldError(f"{name!r}: the folder name must be a lowercase identifier (letters, digits, _)")
    if not creator.isidentifier() or not creator[:1].isupper():
        raise ScaffoldError(f"{creator!r}: the creator name must be an identifier starting with a capital")
    if name in RESERVED_FOLDERS or (plugins_dir / name).exists():
        raise ScaffoldError(f"plugins/{name} already exists: choose another name")
    for existing in plugin_spec.all_specs(plugins_dir).values():
        if existing.name.lower() == creator.lower() or existing.reference == name:
            raise ScaffoldError(
                f"{creator!r} collides with the plugin {existing.name} (plugins/{existing.folder.name})"
            )
    builtins = {b.lower(): b for b in plugin_nodes.builtin_names()}
    if creator.lower() in builtins:
        raise ScaffoldError(
            f"{creator!r} collides with the operator {builtins[creator.lower()]!r} that TensorRT's ONNX "
            "parser imports with its own importer (it matches op_type, whatever the domain; a name "
            "differing only in case is an easy mistake): pass another --creator"
        )
    if not 1 <= options.inputs <= MAX_TENSORS or not 1 <= options.outputs <= MAX_TENSORS:
        raise ScaffoldError(f"--inputs and --outputs: 1 to {MAX_TENSORS}")
    fields = [f for f in (options.float_field, options.array_field) if f]
    for field in fields:
        if keyword.iskeyword(field):
            raise ScaffoldError(f"field {field!r} is a Python keyword (reference.py takes it as an argument)")
        if not FOLDER_NAME.match(field):
            raise ScaffoldError(f"field {field!r}: a lowercase identifier")
    if len(set(fields)) != len(fields):
        raise ScaffoldError("the float field and the array field need different names")
    if options.kernel not in KERNEL_LANGUAGES:
        raise ScaffoldError(f"--kernel {options.kernel!r}: one of {', '.join(KERNEL_LANGUAGES)}")
    if options.kernel == "triton":
        taken = TRITON_NAMES | {f"x{n}" for n in range(MAX_TENSORS)} | {f"y{n}" for n in range(MAX_TENSORS)}
        if options.float_field in taken:
            raise ScaffoldError(f"field {options.float_field!r}: the Triton kernel uses that name itself")


# ------------------------------------------------------------------------------------------ snippets


def _tensors_yaml(prefix: str, count: int, meaning: str) -> str:
    return "\n".join(
        f"  - name: {prefix}{n}\n    types: [float32, float16]\n    meaning: {meaning}" for n in range(count)
    )


def _fields_yaml(o: Options) -> str:
    lines = []
    if o.float_field:
        lines.append(
            f"  - name: {o.float_field}\n    type: float32\n    length: 1\n    default: 1.0\n"
            "    meaning: factor applied to p(t)"
        )
    if o.array_field:
        lines.append(
            f"  - name: {o.array_field}\n    type: float32\n    length: -1\n    default: [0.0, 1.0]\n"
            "    meaning: coefficients of p(t) = c0 + c1 t + c2 t^2 ..., lowest power first"
        )
    return "\n".join(lines) if lines else "  []"


def float_identifiers(o: Options) -> tuple[str, str]:
    """The C++ names of the float field: its own name and the member (``beta`` -> ``beta``, ``mBeta``);
    ``scale`` where the plugin has none (the factor is then 1)."""
    field = o.float_field or "scale"
    camel = "".join(part[:1].upper() + part[1:] for part in field.split("_"))
    return field, f"m{camel}"


def _cpp_snippets(o: Options) -> dict[str, str]:
    cls = o.creator
    s: dict[str, str] = {}
    if o.reduce:
        s["output_shapes_body"] = (
            '    check(inputs[0].nbDims >= 1, "the input needs rank >= 1 (the last axis is reduced)");\n'
            f"    for (int32_t m = 0; m < k{cls}Outputs; ++m)\n    {{\n        outputs[m] = inputs[0];\n"
            "        outputs[m].d[inputs[0].nbDims - 1] = exprBuilder.constant(1);\n    }\n"
        )
        s["configure_check"] = (
            '    check(dims[0].nbDims >= 1, "the input needs rank >= 1 (the last axis is reduced)");\n'
        )
        s["shape_changed_body"] = (
            '    check(dims[0].nbDims >= 1, "the input needs rank >= 1 (the last axis is reduced)");\n'
            "    mLength = dims[0].d[dims[0].nbDims - 1];\n"
            "    mRows = mLength == 0 ? 0 : volume(dims[0]) / mLength;\n"
            "    Dims expected = dims[0];\n    expected.d[expected.nbDims - 1] = 1;\n"
        )
        s["shape_members"] = "    int64_t mRows{0};\n    int64_t mLength{0};\n"
        s["args_fill"] = "    args.rows = mRows;\n    args.length = mLength;\n"
        s["args_shape"] = (
            "    int64_t rows;    // rows of the last axis\n    int64_t length;  // the last axis\n"
        )
    else:
        s["output_shapes_body"] = (
            "    static_cast<void>(exprBuilder);  // the output's dims are the input's expressions\n"
            f"    for (int32_t m = 0; m < k{cls}Outputs; ++m)\n"
            "    {\n        outputs[m] = inputs[0];\n    }\n"
        )
        s["configure_check"] = ""
        s["shape_changed_body"] = "    mCount = volume(dims[0]);\n    Dims const& expected = dims[0];\n"
        s["shape_members"] = "    int64_t mCount{0};\n"
        s["args_fill"] = "    args.count = mCount;\n"
        s["args_shape"] = "    int64_t count;  // elements per tensor\n"
    name, member = float_identifiers(o)
    serialize, declare, create = [], [], []
    if o.float_field:
        serialize.append(f'    writer.addFloat("{o.float_field}", {member});\n')
        declare.append(f'FieldDeclaration{{"{o.float_field}", nvinfer1::PluginFieldType::kFLOAT32, 1}}')
        create.append(f'    float const {name} = fields.getFloat("{o.float_field}").value_or(1.F);\n')
    else:
        create.append(f"    float const {name} = 1.F;\n")
    if o.array_field:
        serialize.append(f'    writer.addFloats("{o.array_field}", mCoefficients);\n')
        declare.append(f'FieldDeclaration{{"{o.array_field}", nvinfer1::PluginFieldType::kFLOAT32, -1}}')
        create.append(
            f'    std::vector<float> coefficients = fields.getFloats("{o.array_field}").value_or('
            "std::vector<float>{0.F, 1.F});\n"
        )
    else:
        create.append("    std::vector<float> coefficients;\n")
    if not declare:
        # No fields to read; the creator's FieldReader still checks the collection.
        create.insert(0, "    static_cast<void>(fields);  // no fields\n")
    create.append(f"    return std::make_unique<{cls}Plugin>({name}, std::move(coefficients));\n")
    s["serialize_body"] = "".join(serialize) or "    static_cast<void>(writer);  // no fields\n"
    # std::array's deduction needs an element; a plugin without fields names the type.
    s["fields_array"] = "std::array" if declare else "std::array<FieldDeclaration, 0>"
    s["field_declarations"] = ", ".join(declare)
    s["create_body"] = "".join(create)
    return s


def _cases_snippets(o: Options) -> dict[str, str]:
    fields, custom, rejects = [], [], []
    if o.float_field:
        name = float_identifiers(o)[0]
        fields.append(f'        c.fields.addFloat("{o.float_field}", f.{name});\n')
        custom.append(f"    custom.{name} = 0.75F;\n")
        f = o.float_field
        rejects += [
            f'reject("NaN {f}", FieldSet().addFloat("{f}", NAN), "{f}");',
            f'reject("two {f}", FieldSet().addFloats("{f}", {{1.F, 2.F}}), "{f}");',
            f'reject("{f} as string", FieldSet().addString("{f}", "1"), "{f}");',
        ]
    if o.array_field:
        fields.append(f'        c.fields.addFloats("{o.array_field}", f.coefficients);\n')
        custom.append("    custom.coefficients = {0.5F, -1.F, 0.25F};\n")
        a = o.array_field
        rejects += [
            f'reject("infinite {a}", FieldSet().addFloats("{a}", {{1.F, INFINITY}}), "{a}");',
            f'reject("{a} as ints", FieldSet().addInts("{a}", {{1, 2}}), "{a}");',
        ]
    if not o.array_field:
        custom.append("    custom.coefficients = {};\n")
    shape = "{2, 3, 4}"
    out_shape = "{2, 3, 1}" if o.reduce else shape
    errors = []
    if o.inputs > 1:
        errors.append(
            f'suite.shapeErrors.push_back({{"{o.creator}", "inputs of different shapes", FieldSet(), '
            f"{{{', '.join(['{f32, harness::makeDims(' + shape + ')}'] * (o.inputs - 1))}, "
            "{f32, harness::makeDims({2, 3, 5})}}, "
            f"std::vector<harness::TensorSpec>({o.outputs}, {{f32, harness::makeDims({out_shape})}}), "
            '"differs"});'
        )
    if o.reduce:
        errors.append(
            f'suite.shapeErrors.push_back({{"{o.creator}", "rank 0 input", FieldSet(), '
            f"std::vector<harness::TensorSpec>({o.inputs}, {{f32, harness::makeDims({{}})}}), "
            f'std::vector<harness::TensorSpec>({o.outputs}, {{f32, harness::makeDims({{}})}}), "rank"}});'
        )
    if not rejects:  # no fields: nothing to refuse
        rejects = ["static_cast<void>(reject);"]
    return {
        "case_fields": "".join(fields) or "        static_cast<void>(f);\n",
        "custom_fields": "".join(custom),
        "rejects": "".join(f"    {r}\n" for r in rejects),
        "shape_errors": ("    DataType const f32 = DataType::kFLOAT;\n" if errors else "")
        + "".join(f"    {e}\n" for e in errors),
        "reduce_cpp": "true" if o.reduce else "false",
    }


def _op_snippets(o: Options) -> dict[str, str]:
    """The op's own lines after t = the inputs' sum, in the CUDA kernel, the reference and the harness: the
    polynomial only where there is an array field, so that the op one changes holds nothing unused."""
    f = float_identifiers(o)[0]
    if not o.array_field:
        return {
            "cuda_op_tail": f"    return args.{f} * t;\n",
            "reference_op_body": (
                f"    scale, _ = _fields({_call_fields(o)})\n    value = scale * sum(xs)\n"
                "    return value, np.abs(value)\n"
            ),
            "evaluate_tail": f"    value = f.{f} * t;\n    magnitude = std::fabs(value);\n",
        }
    return {
        "cuda_op_tail": (
            "    if (args.coefficients == nullptr)\n    {\n"
            f"        return args.{f} * t;\n    }}\n"
            "    float acc = 0.F;\n"
            "    for (int32_t k = args.nbCoefficients - 1; k >= 0; --k)\n    {\n"
            "        acc = acc * t + args.coefficients[k];\n    }\n"
            f"    return args.{f} * acc;\n"
        ),
        "reference_op_body": (
            f"    scale, coefficients = _fields({_call_fields(o)})\n    t = sum(xs)\n"
            "    terms = [scale * np.float64(c) * t**k for k, c in enumerate(coefficients)]\n"
            "    return sum(terms), sum(np.abs(term) for term in terms)\n"
        ),
        "evaluate_tail": (
            "    if (f.coefficients.empty())\n    {\n"
            f"        value = f.{f} * t;\n        magnitude = std::fabs(value);\n        return;\n    }}\n"
            "    value = 0;\n    magnitude = 0;\n    double power = 1;\n"
            "    for (float c : f.coefficients)\n    {\n"
            f"        value += f.{f} * c * power;\n        magnitude += std::fabs(f.{f} * c * power);\n"
            "        power *= t;\n    }\n"
        ),
    }


def _call_fields(o: Options) -> str:
    return ", ".join(f for f in (o.float_field, o.array_field) if f)


def _python_snippets(o: Options) -> dict[str, str]:
    params = []
    if o.float_field:
        params.append(f"{o.float_field}: float = 1.0")
    if o.array_field:
        params.append(f"{o.array_field}=(0.0, 1.0)")
    body = []
    scale = f"checks.float_field({o.float_field}, {o.float_field!r}, OP)" if o.float_field else "1.0"
    coefficients = (
        f"checks.float_array_field({o.array_field}, {o.array_field!r}, OP)" if o.array_field else "None"
    )
    body.append(f"return {scale}, {coefficients}")
    return {
        "signature_fields": ", ".join(params) if params else "",
        "call_fields": _call_fields(o),
        "call_kwargs": ", ".join(f"{f}={f}" for f in (o.float_field, o.array_field) if f),
        "fields_body": "\n    ".join(body),
        "reduce_rank_check": (
            "    if xs[0].ndim < 1:\n"
            '        raise ValueError(f"{OP}: the input needs rank >= 1 (the last axis is reduced)")\n'
            if o.reduce
            else ""
        ),
        "reduce_values": "    values = values.sum(axis=-1, keepdims=True)\n" if o.reduce else "",
        "reduce_magnitude": "    magnitude = magnitude.sum(axis=-1, keepdims=True)\n" if o.reduce else "",
    }


def _kernel_snippets(o: Options) -> dict[str, str]:
    """What differs between the kernel languages: the kernel files and the object the plugin prepares."""
    cls, float_name = o.creator, float_identifiers(o)[0]
    if o.kernel == "cuda":
        return {
            "kernels_include": "",
            "kernels_struct": (
                "//! What the kernels need before enqueue: nothing for CUDA kernels, compiled into the "
                f"library with it.\nstruct {cls}Kernels\n{{\n"
                "    void prepare(ElementType /*type*/) {}\n};\n"
            ),
            "kernel_files": f"`{o.name}_kernel.h`, `{o.name}_kernel.cu`",
            "kernel_what": "the CUDA kernel",
            "kernel_where": f"`op()` in `{o.name}_kernel.cu`",
        }
    ins = [f"x{n}" for n in range(o.inputs)]
    outs = [f"y{n}" for n in range(o.outputs)]
    coeffs = ["coefficients", "n_coefficients"] if o.array_field else []
    shape_params = ["rows", "length"] if o.reduce else ["count"]  # the launch's grid: rows, or elements
    params = [*ins, *outs, *coeffs, float_name, *shape_params]
    signature = [f'"{a}": pointer' for a in ins + outs]
    if o.array_field:
        signature += ['"coefficients": "*fp32"', '"n_coefficients": "i32"']
    signature += [f'"{float_name}": "fp32"'] + [f'"{p}": "i64"' for p in shape_params]
    # op() receives each input's values (FP32) and returns the op's: the one function to make yours.
    op_params = [*ins, *coeffs, float_name]
    op_body = ["    t = " + " + ".join(ins)]
    if o.array_field:
        op_body += [
            "    # p(t) by Horner's rule; the coefficients (device memory) lowest power first",
            "    acc = tl.zeros_like(t)",
            "    for k in range(0, n_coefficients):",
            "        acc = acc * t + tl.load(coefficients + (n_coefficients - 1 - k))",
            f"    return {float_name} * acc",
        ]
    else:
        op_body.append(f"    return {float_name} * t")
    loaded = [f"tl.load({x} + i, mask=mask).to(tl.float32)" for x in ins]
    body = [f"    value = op({', '.join([*loaded, *coeffs, float_name])})"]
    # --reduce: the same value inside the row's loop, then one store of the row's sum per output.
    reduce_value = textwrap.indent("\n".join(body), "    ")
    reduce_stores = [
        f"    tl.store({y} + row, ({m + 1}.0 * total).to({y}.dtype.element_ty))" for m, y in enumerate(outs)
    ]
    body += [
        f"    tl.store({y} + i, ({m + 1}.0 * value).to({y}.dtype.element_ty), mask=mask)"
        for m, y in enumerate(outs)
    ]
    # What interpreter_launch passes, in the kernel's order: the fields' values from the node's fields.
    interpreter_args = ["*inputs", "*outputs"]
    if o.array_field:
        interpreter_args += [
            f'np.asarray(fields["{o.array_field}"], np.float32)',
            f'len(fields["{o.array_field}"])',
        ]
    interpreter_args += [f'float(fields["{o.float_field}"])' if o.float_field else "1.0", *shape_params]
    args = [f"args.inputs[{n}]" for n in range(o.inputs)] + [f"args.outputs[{m}]" for m in range(o.outputs)]
    if o.array_field:
        args += ["args.coefficients", "args.nbCoefficients"]
    args += [f"args.{float_name}"] + [f"args.{p}" for p in shape_params]
    return {
        "kernels_include": '#include "../common/triton_kernel.h"\n',
        "kernels_struct": (
            "//! The Triton kernel's variants (kernel.py), loaded by prepare() in onShapeChange, never in "
            "enqueue;\n//! the plugin object's copies share the module, unloaded with the last of them.\n"
            f"struct {cls}Kernels\n{{\n"
            f'    TritonKernel fp32{{"{o.name}", "fp32"}};\n'
            f'    TritonKernel fp16{{"{o.name}", "fp16"}};\n'
            "    int64_t block{0};  // kernel.py's BLOCK: elements per program\n"
            "    void prepare(ElementType type);\n};\n"
        ),
        "kernel_files": f"`kernel.py`, `{o.name}_kernel.h`, `{o.name}_launch.cpp`",
        "kernel_what": "the OpenAI Triton kernel (compiled ahead of time into the library) and its launch",
        "kernel_where": "`op()` in `kernel.py` (check it on the CPU: `TRITON_INTERPRET=1 python -m "
        f"trt_plugin_kit.triton_interpret plugins/{o.name}`)",
        "triton_params": ", ".join(params),
        "triton_signature": ", ".join(signature),
        "triton_body": "\n".join(body),
        "triton_reduce_value": reduce_value,
        "triton_reduce_stores": "\n".join(reduce_stores),
        "triton_op_params": ", ".join(op_params),
        "interpreter_args": ", ".join(interpreter_args),
        "numpy_import": "import numpy as np\n" if o.array_field else "",
        "triton_op_body": "\n".join(op_body),
        "launch_args": ", ".join(args),
    }


def render(o: Options, command_args: str) -> dict[str, str]:
    """File name (relative to the plugin folder) -> content."""
    shape = [2, 3, 5]
    out_shape = [2, 3, 1] if o.reduce else shape
    values = {
        "name": o.name,
        "creator": o.creator,
        "cls": o.creator,
        "n_inputs": str(o.inputs),
        "n_outputs": str(o.outputs),
        "formula": o.formula,
        "formula_py": textwrap.fill(o.formula, 100),
        "summary": o.formula.replace('"', "'").rstrip("."),
        "command_args": command_args,
        "kernel_note": (
            "one program per row of the last axis"
            if o.kernel == "triton"
            else "one warp per row of the last axis"
        )
        if o.reduce
        else "16-byte vector loads and streaming stores",
        "inputs_yaml": _tensors_yaml(
            "x",
            o.inputs,
            "any rank" + (" >= 1" if o.reduce else "") + "; every input the same shape and type",
        ),
        "outputs_yaml": _tensors_yaml(
            "y", o.outputs, "the input's type; its shape" + (" with the last axis 1" if o.reduce else "")
        ),
        "fields_yaml": _fields_yaml(o),
        "float_name": float_identifiers(o)[0],
        "float_member": float_identifiers(o)[1],
        "shape_inputs": str([shape] * o.inputs),
        "shape_outputs": str([out_shape] * o.outputs),
        **_cpp_snippets(o),
        **_cases_snippets(o),
        **_python_snippets(o),
        **_op_snippets(o),
        **_kernel_snippets(o),
    }

    def fill(template: str) -> str:
        return Template((TEMPLATES / template).read_text()).substitute(values)

    if o.kernel == "triton":
        suffix = "_reduce" if o.reduce else ""
        kernel_files = {
            "kernel.py": fill(f"kernel_triton{suffix}.py.tmpl"),
            f"{o.name}_launch.cpp": fill(f"kernel_triton{suffix}_launch.tmpl"),
        }
    else:
        kernel = fill("kernel_common.tmpl") + fill("kernel_reduce.tmpl" if o.reduce else "kernel_same.tmpl")
        kernel_files = {f"{o.name}_kernel.cu": kernel + fill("kernel_launch.tmpl")}
    return {
        "spec.yaml": fill("spec.yaml.tmpl"),
        f"{o.name}_kernel.h": fill("kernel.h.tmpl"),
        **kernel_files,
        f"{o.name}_plugin.h": fill("plugin.h.tmpl"),
        f"{o.name}_plugin.cpp": fill("plugin.cpp.tmpl"),
        "harness/cases.cpp": fill("cases.cpp.tmpl"),
        "reference.py": fill("reference.py.tmpl"),
        "README.md": fill("README.md.tmpl"),
    }


def _format(folder: Path, files: dict[str, str]) -> None:
    """Lays the files out as `make lint` wants them (clang-format with the repository's style, ruff format):
    names and formulas of any length make hand-wrapped templates wrong."""
    cpp = [str(folder / f) for f in files if f.endswith((".h", ".cpp", ".cu"))]
    python = [str(folder / f) for f in files if f.endswith(".py")]
    if shutil.which("clang-format"):
        # The repository's style wherever the folder is (outside the checkout no .clang-format is found).
        style = f"--style=file:{REPO_ROOT / '.clang-format'}"
        subprocess.run(["clang-format", "-i", style, *cpp], check=True)
    else:
        print(
            "warning: clang-format not found; the C++ files are not laid out as `make lint` wants",
            file=sys.stderr,
        )
    subprocess.run([sys.executable, "-m", "ruff", "format", "-q", *python], check=False)


def create(
    o: Options,
    command_args: str = "",
    plugins_dir: Path = PLUGINS_DIR,
    model_repository: Path | None = MODEL_REPOSITORY,
) -> Path:
    """Writes plugins/<name>/ and fills its README's field table from the new spec; then the served model
    model_repository/<name>/ (scaffold/model.py; None: no model). Nothing else."""
    validate(o, plugins_dir)
    if model_repository is not None and (Path(model_repository) / o.name).exists():
        raise ScaffoldError(f"model_repository/{o.name} already exists: choose another name")
    folder = Path(plugins_dir) / o.name
    files = render(o, command_args or o.name)
    for relative, text in files.items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    try:
        spec = plugin_spec.load(folder)
    except plugin_spec.SpecError:
        for relative in files:
            (folder / relative).unlink()
        raise
    _format(folder, files)
    readme = folder / "README.md"
    table = plugin_docs.fields_table(spec)
    readme.write_text(
        readme.read_text().replace(
            f"{plugin_docs.FIELDS_BEGIN}\n{plugin_docs.FIELDS_END}",
            f"{plugin_docs.FIELDS_BEGIN}\n{table}\n{plugin_docs.FIELDS_END}",
        )
    )
    if model_repository is not None and Path(plugins_dir).resolve() == PLUGINS_DIR.resolve():
        plugin_spec.reload()  # the node helper must see the new plugin
        served_model.create(plugin_spec.get(o.creator), o.reduce, model_repository)
    return folder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m trt_plugin_kit new-plugin",
        description="Create plugins/NAME/: a working elementwise TensorRT plugin to change into your own op.",
    )
    parser.add_argument("name", help="folder name, snake_case (plugins/NAME)")
    parser.add_argument("--creator", help="plugin name = ONNX op_type (default: NAME in CamelCase)")
    parser.add_argument(
        "--inputs", type=int, default=1, help=f"number of inputs, 1 to {MAX_TENSORS} (default 1)"
    )
    parser.add_argument(
        "--outputs", type=int, default=1, help=f"number of outputs, 1 to {MAX_TENSORS} (default 1)"
    )
    parser.add_argument("--float-field", default="scale", help="name of the float field (default scale)")
    parser.add_argument("--no-float-field", action="store_true", help="no float field")
    parser.add_argument("--array-field", help="name of a float array field (the polynomial's coefficients)")
    parser.add_argument(
        "--reduce", action="store_true", help="reduce the last axis (kept as 1) instead of same-shape"
    )
    parser.add_argument(
        "--kernel",
        choices=KERNEL_LANGUAGES,
        default="cuda",
        help="the kernel's language: cuda (a .cu file) or triton (kernel.py, OpenAI Triton compiled ahead of "
        "time into the library; needs triton at build time only)",
    )
    args = parser.parse_args(argv)
    options = Options(
        name=args.name,
        creator=args.creator or camel_case(args.name),
        inputs=args.inputs,
        outputs=args.outputs,
        float_field=None if args.no_float_field else args.float_field,
        array_field=args.array_field,
        reduce=args.reduce,
        kernel=args.kernel,
    )
    try:
        folder = create(options, " ".join(argv if argv is not None else sys.argv[1:]))
    except (ScaffoldError, plugin_spec.SpecError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"created {folder} (plugin {options.creator}): {options.formula}")
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        print(f"  {path.relative_to(folder)}")
    model_folder = MODEL_REPOSITORY / options.name
    if model_folder.is_dir():
        print(f"created {model_folder} (a one-node model of {options.creator}; make serve serves it)")
        for path in sorted(p for p in model_folder.rglob("*") if p.is_file()):
            print(f"  {path.relative_to(model_folder)}")
    if options.kernel == "triton":
        print(
            f"check op() on the CPU: TRITON_INTERPRET=1 .venv/bin/python -m trt_plugin_kit.triton_interpret "
            f"plugins/{options.name}"
        )
    print(
        "next: make plugins && make harness-check (build and check it); make docs (plugins/README.md's table)"
    )
    return 0
