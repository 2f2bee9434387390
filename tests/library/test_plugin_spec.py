"""One spec per plugin (plugins/<name>/spec.yaml): the built library, the NumPy references, the ONNX node
helper and the READMEs agree with it; malformed specs and bad field values are refused with a message that
names the field.

The library checks run `plugin_harness --describe` (what each registered creator declares, and what a plugin
built from the spec's required fields serializes) against every vendored TensorRT header set; `make test`
builds it before pytest runs (a missing binary is a failure, not a skip).
"""

from __future__ import annotations

import inspect
import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import AttributeProto, helper

from trt_plugin_kit.interface import PLUGIN_DOMAIN, PLUGIN_NAMESPACE, PLUGIN_VERSION, PLUGINS_DIR, REPO_ROOT
from trt_plugin_kit.specs import cpp as plugin_spec_cpp
from trt_plugin_kit.specs import docs as plugin_docs
from trt_plugin_kit.specs import nodes as plugin_nodes
from trt_plugin_kit.specs import reference
from trt_plugin_kit.specs import spec as plugin_spec

BUILD_DIR = Path(os.environ.get("BUILD_DIR", REPO_ROOT / "build"))
if not BUILD_DIR.is_absolute():
    BUILD_DIR = REPO_ROOT / BUILD_DIR
TRT_VERSIONS = os.environ.get("TRT_VERSIONS", "10.13.3 11.1").split()
SPECS = plugin_spec.all_specs()


def float32(value):
    return np.asarray(value, dtype=np.float32).tolist()


# ------------------------------------------------------------------------------------- the built library


def describe(version: str) -> dict:
    harness = BUILD_DIR / f"trt-{version}" / "plugin_harness"
    library = BUILD_DIR / f"trt-{version}" / "libtrt_plugin_kit.so"
    if not harness.is_file() or not library.is_file():
        pytest.fail(f"{harness} or {library} is missing: build them with `make plugins`", pytrace=False)
    result = subprocess.run(
        [str(harness), "--library", str(library), "--describe"], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return {creator["name"]: creator for creator in json.loads(result.stdout)["creators"]}


@pytest.fixture(scope="module", params=TRT_VERSIONS)
def library(request):
    return describe(request.param)


@pytest.mark.parametrize("version", TRT_VERSIONS)
def test_the_kernels_include_no_tensorrt_header(version):
    """The kernels (.cu) compile once for every header set only while none of them includes a TensorRT header
    (they take common/element_type.h's ElementType): the compiler's dependency lists of the build say so."""
    objects = BUILD_DIR / f"trt-{version}" / "CMakeFiles" / "trt_plugin_kit_device.dir"
    dependencies = sorted(objects.rglob("*.cu.o.d"))
    if not dependencies:
        pytest.fail(f"no kernel objects under {objects}: build them with `make plugins`", pytrace=False)
    kernels = {cu.name for spec in PLUGINS_DIR.glob("*/spec.yaml") for cu in spec.parent.glob("*.cu")}
    assert {d.name.removesuffix(".o.d") for d in dependencies} == kernels
    with_tensorrt = [d.name for d in dependencies if "NvInfer" in d.read_text()]
    assert not with_tensorrt, f"kernels including TensorRT headers: {with_tensorrt}"


def test_the_library_registers_exactly_the_specified_plugins(library):
    assert sorted(library) == sorted(SPECS)
    for name, creator in library.items():
        assert creator["version"] == SPECS[name].version == PLUGIN_VERSION
        assert creator["namespace"] == PLUGIN_NAMESPACE


def test_get_field_names_equals_the_spec(library):
    """Names, types and lengths, in order, as TensorRT's ONNX parser and Python users see them."""
    for name, spec in SPECS.items():
        declared = [(f["name"], f["type"], f["length"]) for f in library[name]["fields"]]
        assert declared == [(f.name, f.type, f.length) for f in spec.fields], name


def test_the_plugins_defaults_are_the_specs(library):
    """A plugin built from the spec's required fields alone serializes the spec's defaults, and leaves the
    optional fields unset."""
    for name, spec in SPECS.items():
        assert "example_error" not in library[name], library[name]
        serialized = library[name]["serialized"]
        expected = spec.complete(spec.example)
        for field in spec.fields:
            value = expected[field.name]
            if value is None:
                assert field.name not in serialized, (name, field.name)
            elif field.type == "char":
                assert serialized[field.name] == value, (name, field.name)
            else:
                want = float32(value if isinstance(value, list) else [value])
                assert float32(serialized[field.name]) == want, (name, field.name)


def test_the_plugins_accept_the_specified_input_types(library):
    """Input 0 in the linear format: only types the spec lists; all of them unless an optional field gates
    one (Pool offers INT8 only with both scales set)."""
    for name, spec in SPECS.items():
        accepted = set(library[name]["input0_types"])
        assert accepted and accepted <= set(spec.inputs[0].types), name
        if not any(f.optional for f in spec.fields):
            assert accepted == set(spec.inputs[0].types), name


# ------------------------------------------------------------------------------------------- references


@pytest.mark.parametrize("name", sorted(SPECS))
def test_each_reference_takes_the_fields_with_the_spec_defaults(name):
    spec = SPECS[name]
    parameters = inspect.signature(reference.REFERENCES[name]).parameters
    for field in spec.fields:
        assert field.name in parameters, (name, field.name)
        default = parameters[field.name].default
        if field.default is not None:
            assert np.asarray(default).tolist() == field.default, (name, field.name)
        elif field.optional:
            assert default is None, (name, field.name)


@pytest.mark.parametrize("name", sorted(SPECS))
def test_the_spec_shapes_are_what_the_reference_computes(name):
    """The plausible shapes the fuzzer builds with: the reference, run on them with the spec's example
    fields, gives the spec's output shapes."""
    spec = SPECS[name]
    fields = spec.complete(spec.example)
    rng = np.random.default_rng(0)
    inputs = [
        rng.uniform(-1, 1, size=[plugin_spec.evaluate_dim(d, fields) for d in dims]).astype(np.float32)
        for dims in spec.shape_inputs
    ]
    outputs = reference.run(name, inputs, spec.example)
    expected = [tuple(plugin_spec.evaluate_dim(d, fields) for d in dims) for dims in spec.shape_outputs]
    assert [o.shape for o in outputs] == expected


# ------------------------------------------------------------------------------------- ONNX node helper


@pytest.mark.parametrize("name", sorted(SPECS))
def test_a_node_carries_every_field_and_reads_back(name):
    spec = SPECS[name]
    inputs = [f"in{i}" for i in range(len(spec.inputs))]
    outputs = [f"out{i}" for i in range(len(spec.outputs))]
    node = plugin_nodes.make_node(name, inputs, outputs, "node", **spec.example)
    assert (node.op_type, node.domain) == (name, PLUGIN_DOMAIN)
    names = [a.name for a in node.attribute]
    assert names == [*plugin_nodes.LOOKUP_ATTRIBUTES, *spec.field_names]
    attributes = {a.name: a for a in node.attribute}
    for field in spec.fields:
        if spec.complete(spec.example)[field.name] is None:  # unset: an empty attribute
            assert attributes[field.name].type in (AttributeProto.FLOATS, AttributeProto.INTS)
            assert helper.get_attribute_value(attributes[field.name]) == []
    read = plugin_nodes.node_fields(node)  # float attributes are float32
    for field_name, value in spec.complete(spec.example).items():
        if value is None or spec.field(field_name).type != "float32":
            assert read[field_name] == value, field_name
        else:
            assert float32(read[field_name]) == float32(value), field_name


POOL = {"mode": "max", "kernel": [3, 3]}


@pytest.mark.parametrize(
    ("plugin", "fields", "message"),
    [
        ("Pool", {**POOL, "kernal": [2, 2]}, "no field.*kernal"),
        ("Pool", {"kernel": [2, 2]}, "required field 'mode'"),
        ("Pool", {**POOL, "mode": 1}, "'mode' must be a string"),
        ("Pool", {**POOL, "mode": "min"}, "'mode' must be one of"),
        ("Pool", {**POOL, "kernel": [2.0, 2.0]}, "'kernel' holds int32 values"),
        ("Pool", {**POOL, "kernel": [2, 2, 2]}, "'kernel' must hold exactly 2"),
        ("Pool", {**POOL, "kernel": [0, 2]}, "'kernel' must be >= 1"),
        ("Pool", {**POOL, "stride": [2, 65537]}, "'stride' must be <= 65536"),
        ("Pool", {**POOL, "padding": [1, 3]}, "'padding' .* must be smaller than 'kernel'"),
        ("Pool", {**POOL, "count_include_pad": 2}, "'count_include_pad' must be one of"),
        ("Pool", {**POOL, "input_scale": 0.0}, "'input_scale' must be > 0"),
        ("Pool", {**POOL, "input_scale": "0.5"}, "'input_scale' holds float32 values"),
        ("Pool", {**POOL, "output_scale": float("nan")}, "'output_scale' must be a finite float32"),
        ("L2Normalize", {"axis": 8}, "'axis' must be <= 7"),
        ("L2Normalize", {"eps": -1e-3}, "'eps' must be >= 0"),
        ("L2Normalize", {"axis": True}, "'axis' holds int32 values"),
        ("LeakyReLU", {"negative_slope": [0.1, 0.2]}, "'negative_slope' must hold exactly 1"),
        ("PReLU", {"slopes": []}, "required field 'slopes' is missing"),
        ("FullyConnected", {"weights": [1.0, 2.0, 3.0], "num_outputs": 2}, "'weights' .* multiple of"),
        ("FullyConnected", {"weights": [1.0, 2.0], "num_outputs": 2, "bias": [1.0]}, "'bias' has 1 values"),
        ("FullyConnected", {"weights": [1.0], "num_outputs": 0}, "'num_outputs' must be >= 1"),
        ("FullyConnected", {"weights": [1.0] * 100, "num_outputs": 1.5}, "'num_outputs' holds int32"),
    ],
)
def test_the_node_helper_refuses_bad_fields_naming_them(plugin, fields, message):
    with pytest.raises(plugin_nodes.NodeError, match=message):
        plugin_nodes.make_node(plugin, ["x"] * len(SPECS[plugin].inputs), ["y"], "node", **fields)


def test_the_node_helper_refuses_unknown_plugins_and_wrong_arity():
    with pytest.raises(plugin_nodes.NodeError, match="no plugin named 'Softmax2'"):
        plugin_nodes.make_node("Softmax2", ["x"], ["y"], "node")
    with pytest.raises(plugin_nodes.NodeError, match="takes 1 input"):
        plugin_nodes.make_node("LeakyReLU", ["x", "z"], ["y"], "node")


def test_reading_a_node_refuses_what_tensorrt_would_not_use():
    node = plugin_nodes.make_node("Pool", ["x"], ["y"], "pool", **POOL)

    def with_attribute(name, value, attr_type=None):
        copy = onnx.NodeProto()
        copy.CopyFrom(node)
        kept = [a for a in copy.attribute if a.name != name]
        del copy.attribute[:]
        copy.attribute.extend([*kept, helper.make_attribute(name, value, attr_type=attr_type)])
        return copy

    with pytest.raises(plugin_nodes.NodeError, match="would not find the plugin"):
        plugin_nodes.node_fields(with_attribute("plugin_namespace", "other"))
    with pytest.raises(plugin_nodes.NodeError, match="no field"):
        plugin_nodes.node_fields(with_attribute("windows", [2, 2]))
    with pytest.raises(plugin_nodes.NodeError, match="'kernel' is a FLOATS attribute"):
        plugin_nodes.node_fields(with_attribute("kernel", [2.0, 2.0]))
    with pytest.raises(plugin_nodes.NodeError, match="'mode' must be one of"):
        plugin_nodes.node_fields(with_attribute("mode", "sum"))
    unset = with_attribute("stride", [], AttributeProto.INTS)  # empty = not set: the default (= kernel)
    assert plugin_nodes.node_fields(unset)["stride"] == [3, 3]


def test_names_colliding_with_onnx_builtins_are_refused_or_warned_about():
    # TensorRT's parser imports these itself whatever the domain: a plugin cannot use the names.
    for name in ("PRelu", "LeakyRelu", "LpNormalization", "MaxPool", "TRT_PluginV2"):
        with pytest.raises(plugin_nodes.NodeError, match="imports with its own importer"):
            plugin_nodes.check_name(name)
    with pytest.warns(plugin_nodes.PluginNameWarning, match="differs from the operator 'Gemm' only in case"):
        plugin_nodes.check_name("GEMM")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plugin_nodes.check_name("PReLU", acknowledged="PRelu")  # our spec names its lookalike
    with pytest.raises(plugin_nodes.NodeError, match="lookalike 'Relu' is not"):
        plugin_nodes.check_name("PReLU", acknowledged="Relu")
    for spec in SPECS.values():  # ours: no collision, and every lookalike is acknowledged
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            plugin_nodes.check_name(spec.name, spec.lookalike)


# ------------------------------------------------------------------------------------------- the specs


def test_readme_tables_are_generated_from_the_specs():
    stale = plugin_docs.update(check=True)
    assert not stale, f"stale README tables {stale}: run python -m trt_plugin_kit.specs docs"
    result = subprocess.run(
        [sys.executable, "-m", "trt_plugin_kit.specs.spec", "docs", "--check"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO_ROOT,
    )
    assert result.returncode == 0, result.stdout + result.stderr


# A plugin folder's spec, independent of the real plugins (so that editing one of them leaves these tests be).
SCALED_RELU = """\
creator: ScaledReLU
version: "1"
summary: "`x > 0 ? scale * x : negative_slope * x`"
reference: scaled_relu
inputs:
  - {name: x, types: [float32, float16], meaning: any rank}
outputs:
  - {name: y, types: [float32, float16], meaning: the input's shape and type}
formats: [linear]
fields:
  - name: negative_slope
    type: float32
    length: 1
    default: 0.01
    meaning: slope applied to `x <= 0`
  - name: scale
    type: float32
    length: 1
    default: 1.0
    greater_than: 0
    meaning: output scale
shapes:
  inputs: [[2, 3]]
  outputs: [[2, 3]]
"""


def scratch_plugins(tmp_path: Path) -> Path:
    """A scratch plugins/ directory: the top-level README and one folder, scaled_relu/, with a spec only."""
    plugins = tmp_path / "plugins"
    (plugins / "scaled_relu").mkdir(parents=True)
    (plugins / "scaled_relu" / "spec.yaml").write_text(SCALED_RELU)
    shutil.copy(PLUGINS_DIR / "README.md", plugins / "README.md")
    return plugins


def test_a_new_plugin_folder_is_picked_up_by_every_output(tmp_path):
    plugins = scratch_plugins(tmp_path)
    new = plugins / "scaled_relu"
    specs = plugin_spec.all_specs(plugins)
    assert sorted(specs) == ["ScaledReLU"]
    assert specs["ScaledReLU"].field_names == ("negative_slope", "scale")
    source = plugin_spec_cpp.source(specs)
    assert 'p.name = "ScaledReLU";' in source and 'f.name = "scale";' in source
    assert plugin_docs.update(plugins_dir=plugins) == [plugins / "README.md", new / "README.md"]
    assert "| `scale` | float32 | `1` | > 0, finite | output scale |" in (new / "README.md").read_text()
    assert "`ScaledReLU`" in (plugins / "README.md").read_text()
    assert "`scale`" not in (plugins / "README.md").read_text()  # fields are in the plugin's own README
    assert plugin_docs.update(check=True, plugins_dir=plugins) == []


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (("type: float32", "type: float64"), "type must be one of"),
        (("length: 1", "length: 0"), "length must be -1 or >= 1"),
        (("default: 0.01", "default: .nan"), "must be a finite float32"),
        (("default: 1.0", "default: 0.0"), "'scale' must be > 0"),
        (("default: 0.01", "required: true"), "example: the required fields"),
        (("    default: 0.01\n", ""), "exactly one of required, default"),
        (('version: "1"', 'version: "2"'), "version must be '1'"),
        (("formats: [linear]", "formats: [hwc8]"), "formats must be from"),
        (("reference: scaled_relu", "reference: scaled_relu\ncolour: blue"), "unknown key"),
        (("outputs: [[2, 3]]", 'outputs: [["len(slopes)"]]'), "len\\(\\) takes one field"),
        (("outputs: [[2, 3]]", 'outputs: [["negative_slope * 2"]]'), "not an int32 field"),
        (("outputs: [[2, 3]]", 'outputs: [["__import__(1)"]]'), "not allowed"),
    ],
)
def test_malformed_specs_are_refused_naming_the_file(tmp_path, edit, message):
    plugins = scratch_plugins(tmp_path)
    path = plugins / "scaled_relu" / "spec.yaml"
    old, new = edit
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    with pytest.raises(plugin_spec.SpecError, match=message) as error:
        plugin_spec.load(path.parent)
    assert str(path) in str(error.value)


def test_two_folders_cannot_claim_one_creator(tmp_path):
    plugins = scratch_plugins(tmp_path)
    shutil.copytree(plugins / "scaled_relu", plugins / "scaled_relu_copy")
    with pytest.raises(plugin_spec.SpecError, match="creator ScaledReLU is also in"):
        plugin_spec.all_specs(plugins)
