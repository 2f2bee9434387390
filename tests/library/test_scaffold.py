"""The plugin scaffold and the tutorial end to end, in a temporary copy of the repository:
`python -m trt_plugin_kit new-plugin` writes plugins/<name>/ and model_repository/<name>/, nothing else; the
library builds with it (one CUDA architecture, TensorRT 11.1 headers), the harness's CPU checks and the fuzzer
pass on it, the ONNX node helper exports a one-node model that the NumPy evaluator runs against the reference,
`make serve`'s server serves the new model on the CPU (the answer of `clients tensor` is the reference's), a
load test of it has no failures, and build_engines.py checks the folder; the generated files pass ruff and
clang-format as they are.

The commands are docs/writing-a-plugin.md's blocks marked ``<!-- runnable-here -->``, run in order, so that
the tutorial's commands are the tested ones, under an op name the docs never use (NAME, CREATOR).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from trt_plugin_kit import scaffold
from trt_plugin_kit.interface import REPO_ROOT, SHARED_DIR
from trt_plugin_kit.serving.host import Ports
from trt_plugin_kit.specs import spec as plugin_spec

TUTORIAL = REPO_ROOT / "docs" / "writing-a-plugin.md"
RUNNABLE = re.compile(r"<!-- runnable-here -->\s*```bash\n(.*?)```", re.S)
HEADERS = SHARED_DIR / "vendor" / "tensorrt" / "11.1" / "include"
# A second variant, scaffolded beside the tutorial's: several inputs and outputs, an array field, reducing.
# The variant names its float field `gain`: the generated C++ must use that name, not the default `scale`.
VARIANT = ["pair_reduce", "--inputs", "2", "--outputs", "2", "--float-field", "gain",
           "--array-field", "coefficients", "--reduce"]  # fmt: skip


# The tutorial's op, and the name the test runs it under: one the docs never use, so that nothing in the repo
# can be made for the docs' name alone (#24 item 8).
DOCS_NAME, DOCS_CREATOR = "scaled_poly", "ScaledPoly"
NAME, CREATOR = "tuned_gain", "TunedGain"


def tutorial_blocks(renamed: bool = True) -> list[str]:
    blocks = RUNNABLE.findall(TUTORIAL.read_text())
    if not renamed:
        return blocks
    return [block.replace(DOCS_NAME, NAME).replace(DOCS_CREATOR, CREATOR) for block in blocks]


def _run(command, cwd: Path, **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, **kwargs)
    assert result.returncode == 0, f"{command} failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    return result


@pytest.fixture(scope="module")
def copy(tmp_path_factory) -> Path:
    """The repository's files (tracked and new, not ignored) in a fresh git repository, with this venv."""
    if shutil.which("nvcc") is None or not HEADERS.is_dir():
        pytest.skip("needs nvcc and ../shared/vendor/tensorrt/11.1 (the CI machine has both)")
    root = tmp_path_factory.mktemp("repo")
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO_ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    for name in filter(None, files):
        source = REPO_ROOT / os.fsdecode(name)
        if source.is_file():
            (root / os.fsdecode(name)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, root / os.fsdecode(name))  # keeps mtimes: make sees the venv as current
    (root / ".venv").symlink_to(REPO_ROOT / ".venv")
    stamp = REPO_ROOT / ".venv" / ".installed"
    if stamp.exists():  # make must never reinstall this venv from the copy (it would point it there)
        older = stamp.stat().st_mtime - 1
        os.utime(root / "pyproject.toml", (older, older))
    if not (root.parent / "shared").exists():  # make's default header path is ../shared/vendor/tensorrt
        (root.parent / "shared").symlink_to(SHARED_DIR)
    for command in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "base"]):
        _run(
            command,
            root,
            env={
                **os.environ,
                "GIT_AUTHOR_NAME": "t",
                "GIT_AUTHOR_EMAIL": "t@t",
                "GIT_COMMITTER_NAME": "t",
                "GIT_COMMITTER_EMAIL": "t@t",
            },
        )
    (root / ".git" / "info" / "exclude").write_text(".venv\n")
    return root


@pytest.fixture(scope="module")
def tutorial_run(copy: Path) -> list[str]:
    """Scaffolds the variant, then runs the tutorial's runnable blocks in order; returns their outputs."""
    _run([sys.executable, "-m", "trt_plugin_kit", "new-plugin", *VARIANT], copy)
    ports = Ports.free()  # the serving block's server and clients meet there, whatever else runs here
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOADTEST_", "TRITON_", "LOCUST_"))}
    env |= {"TRITON_HTTP_PORT": str(ports.http), "TRITON_GRPC_PORT": str(ports.grpc)}
    env |= {"TRITON_METRICS_PORT": str(ports.metrics), "TRITON_VARIANT": "cpu"}
    # The copy's `make plugins` takes the checkout's Triton kernels from their compile cache (the Makefile's
    # TRITON_KERNEL_CACHE) as ccache gives it the C++ objects: only the new folder's kernel.py compiles.
    env["TRITON_KERNEL_CACHE"] = str(
        Path(os.environ.get("BUILD_DIR", REPO_ROOT / "build")).resolve() / "triton-cache"
    )
    # The copy shares this checkout's venv, whose editable install points here: PYTHONPATH makes its console
    # scripts (trt-plugin-kit, -client, -loadtest) import the copy's kit, as the copy's own install would.
    env["PYTHONPATH"] = str(copy)
    outputs = []
    for block in tutorial_blocks():
        result = _run(["bash", "-euo", "pipefail", "-c", block], copy, timeout=3000, env=env)
        outputs.append(result.stdout)
    return outputs


def test_tutorial_has_runnable_blocks():
    blocks = tutorial_blocks(renamed=False)
    assert any(f"new-plugin {DOCS_NAME}" in b for b in blocks)
    assert any("plugin_harness" in b for b in blocks)
    # The whole journey: scaffold, build and check, ONNX, serve + infer + load test, the engine build checks.
    for step in ("trt-plugin-kit-client tensor", "trt-plugin-kit-loadtest --mix", "build_engines.py --model"):
        assert any(step in b for b in blocks), step
    assert NAME not in TUTORIAL.read_text() and CREATOR not in TUTORIAL.read_text()


def test_the_served_model_answers_with_the_reference_and_is_load_tested(tutorial_run):
    served = next(out for out in tutorial_run if "served:" in out)
    assert f"{NAME} served: the answer is the reference's" in served
    assert "PASSED" in served
    assert f"{NAME} plugin fp32:" in tutorial_run[-1] and f"plugins        {CREATOR}" in tutorial_run[-1]


def test_scaffold_changes_only_its_folders(copy: Path, tutorial_run):
    status = _run(["git", "status", "--porcelain", "--untracked-files=all"], copy).stdout.splitlines()
    changed = sorted(line[3:] for line in status)
    assert changed, "the scaffold wrote nothing"
    # Per plugin exactly two folders: the plugin's, and its served model's (ONNX file included).
    names = (NAME, "pair_reduce", "scaled_tri")
    folders = [f"{top}/{name}/" for top in ("plugins", "model_repository") for name in names]
    outside = [p for p in changed if not p.startswith(tuple(folders))]
    assert outside == [], (
        f"the scaffold or the tutorial's commands changed files outside the plugin and model folders: "
        f"{outside}"
    )
    assert f"plugins/{NAME}/harness/cases.cpp" in changed and "plugins/pair_reduce/reference.py" in changed
    for name in names:
        model = {
            p.removeprefix(f"model_repository/{name}/")
            for p in changed
            if p.startswith(f"model_repository/{name}/")
        }
        assert model == {"config.pbtxt", "configs/cpu.pbtxt", "model.onnx", "1/README.md"}, model
    # --kernel triton: kernel.py and its launch instead of the .cu file
    assert {"plugins/scaled_tri/kernel.py", "plugins/scaled_tri/scaled_tri_launch.cpp"} <= set(changed)
    assert not any(p.endswith(".cu") for p in changed if p.startswith("plugins/scaled_tri/"))


def test_generated_code_is_lint_clean(copy: Path, tutorial_run):
    folders = [f"plugins/{NAME}", "plugins/pair_reduce", "plugins/scaled_tri"]
    _run([sys.executable, "-m", "ruff", "check", *folders], copy)
    _run([sys.executable, "-m", "ruff", "format", "--check", *folders], copy)
    sources = [
        str(p.relative_to(copy))
        for f in folders
        for p in (copy / f).rglob("*")
        if p.suffix in (".h", ".cpp", ".cu")
    ]
    _run(["clang-format", "--dry-run", "--Werror", *sources], copy)


def test_harness_cpu_checks_cover_the_new_plugins(tutorial_run):
    harness = next(out for out in tutorial_run if "harness:" in out)
    assert re.search(r"harness: \d+ passed, 0 failed", harness)
    for plugin, field in ((CREATOR, "scale"), ("PairReduce", "gain"), ("ScaledTri", "scale")):
        assert f"getFieldNames {plugin} matches its spec" in harness
        assert f"{plugin} rejects NaN {field}" in harness
    # The tutorial's op (one input, same shape) takes every shape; PairReduce refuses mismatches and rank 0.
    assert "PairReduce reports inputs of different shapes" in harness
    assert "PairReduce reports rank 0 input" in harness


def test_the_fuzzer_finds_nothing_in_the_new_plugins(copy: Path, tutorial_run):
    """What `make test` runs on every plugin (test_stress_fuzz.py), on the scaffold's output unchanged: it
    used to copy a malformed input shape into its output ("getOutputShapes succeeded with a malformed
    output 0")."""
    build = copy / "build" / "trt-11.1"
    for plugin in (CREATOR, "PairReduce", "ScaledTri"):
        result = _run(
            [str(build / "plugin_stress"), "fuzz", "--library", str(build / "libtrt_plugin_kit.so"),
             "--plugin", plugin, "--iterations", "300", "--seed", "1"],
            copy,
        )  # fmt: skip
        assert f"PASS fuzz {plugin} ::" in result.stdout


def test_the_chosen_field_name_is_used_throughout(copy: Path, tutorial_run):
    """`--float-field gain`: no `scale` identifier left in the generated C++ (19 were; the harness's own error
    scale, `ref.scale`, is another thing)."""
    for path in sorted((copy / "plugins" / "pair_reduce").rglob("*")):
        if path.suffix in (".cpp", ".h", ".cu", ".cuh"):
            text = re.sub(r"\brefs?(\[m\])?\.scale\b", "", path.read_text())
            assert not re.search(r"\b(scale|mScale)\b", text), f"{path.name} still says scale"
            assert "gain" in text or path.name.endswith(".h"), path.name


def test_one_node_model_matches_reference(copy: Path, tutorial_run):
    """The variant through the node helper and the evaluator, in the copy (whose plugins/ has it)."""
    code = """
import numpy as np, onnx
from onnx import TensorProto, helper
from trt_plugin_kit.models import onnx_eval
from trt_plugin_kit.specs import nodes as plugin_nodes
from trt_plugin_kit.specs import reference
node = plugin_nodes.make_node(
    "PairReduce", ["a", "b"], ["y0", "y1"], "pr", gain=0.5, coefficients=[1.0, -2.0, 0.5]
)
tensor = lambda n, s: helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
graph = helper.make_graph([node], "g", [tensor("a", [3, 4, 5]), tensor("b", [3, 4, 5])],
                          [tensor("y0", [3, 4, 1]), tensor("y1", [3, 4, 1])])
opsets = [helper.make_opsetid("", 19), helper.make_opsetid("trt_plugin_kit", 1)]
model = helper.make_model(graph, opset_imports=opsets)
onnx.checker.check_model(model)
rng = np.random.default_rng(0)
a, b = (rng.uniform(-2, 2, (3, 4, 5)).astype(np.float32) for _ in range(2))
out = onnx_eval.run(model, {"a": a, "b": b})
t = a.astype(np.float64) + b
f = (0.5 * (1.0 - 2.0 * t + 0.5 * t * t)).sum(axis=-1, keepdims=True)
np.testing.assert_allclose(out["y0"], f, rtol=1e-5, atol=1e-5)
np.testing.assert_allclose(out["y1"], 2 * f, rtol=1e-5, atol=1e-5)
y0, y1 = reference.REFERENCES["PairReduce"](a, b, gain=0.5, coefficients=[1.0, -2.0, 0.5])
assert np.array_equal(y0, out["y0"]) and np.array_equal(y1, out["y1"])
for bad, word in (({"gain": "x"}, "gain"), ({"coefficients": [1.0, float("nan")]}, "coefficients"),
                  ({"offset": 1.0}, "offset")):
    try:
        plugin_nodes.make_node("PairReduce", ["a", "b"], ["y0", "y1"], "pr", **bad)
    except plugin_nodes.NodeError as error:
        assert word in str(error), error
    else:
        raise AssertionError(f"{bad} accepted")
print("ok")
"""
    assert _run([sys.executable, "-c", code], copy).stdout.strip().endswith("ok")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["leaky_relu"], "already exists"),
        (["my_relu", "--creator", "LeakyRelu"], "collides with the plugin LeakyReLU"),
        (["gelu_like", "--creator", "Gelu"], "imports with its own importer"),
        (["lp", "--creator", "LPNORMALIZATION"], "LpNormalization"),
        (["Bad-Name"], "lowercase identifier"),
        (["class"], "'class' is a Python keyword"),  # issue 40, item 14: not "a lowercase identifier"
        (["ok_name", "--float-field", "lambda"], "'lambda' is a Python keyword"),
        (["ok_name", "--creator", "lower"], "capital"),
        (["ok_name", "--inputs", "5"], "1 to 4"),
        (["ok_name", "--array-field", "scale"], "different names"),
        (["mnist"], "model_repository/mnist already exists"),  # the served model's folder is taken
        (["ok_name", "--kernel", "triton", "--float-field", "count"], "uses that name itself"),
    ],
)
def test_scaffold_refuses_bad_names(args, message, capsys, tmp_path):
    assert scaffold.main(args) == 2
    assert message in capsys.readouterr().err
    assert not (REPO_ROOT / "plugins" / args[0]).exists() or args[0] == "leaky_relu"


def test_rendered_variants_load_as_specs(tmp_path):
    """Every option combination renders a spec that plugin_spec accepts, with the formula in the README."""
    for inputs, outputs, array, reduce in [
        (1, 1, None, False),
        (3, 2, "c", True),
        (4, 4, "coefficients", False),
    ]:
        options = scaffold.Options(
            f"v{inputs}{outputs}", f"V{inputs}{outputs}", inputs, outputs, "scale", array, reduce
        )
        files = scaffold.render(options, "v")
        folder = tmp_path / options.name
        for relative, text in files.items():
            (folder / relative).parent.mkdir(parents=True, exist_ok=True)
            (folder / relative).write_text(text)
        spec = plugin_spec.load(folder)
        assert (len(spec.inputs), len(spec.outputs)) == (inputs, outputs)
        assert spec.field_names == (("scale", array) if array else ("scale",))
        assert options.formula in files["README.md"]


@pytest.mark.parametrize(
    ("inputs", "outputs", "float_field", "array"),
    [(1, 1, "scale", None), (2, 3, "gain", "coefficients"), (4, 1, None, "c")],
)
def test_triton_kernels_of_every_option_compile(tmp_path, inputs, outputs, float_field, array):
    """--kernel triton: the generated kernel.py's VARIANTS match the kernel's arguments and compile for
    Hopper with Triton (no GPU), and the launch passes exactly the variant's arguments, in its order."""
    from trt_plugin_kit import triton_aot

    options = scaffold.Options("tri_v", "TriV", inputs, outputs, float_field, array, kernel="triton")
    files = scaffold.render(options, "tri_v --kernel triton")
    assert "tri_v_kernel.cu" not in files and {"kernel.py", "tri_v_launch.cpp"} <= set(files)
    (tmp_path / "tri_v").mkdir()
    (tmp_path / "tri_v" / "kernel.py").write_text(files["kernel.py"])
    variants = triton_aot.load_variants(tmp_path / "tri_v" / "kernel.py")
    assert set(variants) == {"fp32", "fp16"}
    for name, variant in variants.items():
        compiled = triton_aot._compile(variant, 90)
        triton_aot._check_compiled(name, compiled, len(variant["signature"]))
    launch = re.search(r"kernel\.launch\(grid, stream, (.*?)\);", files["tri_v_launch.cpp"], re.S).group(1)
    passed = [a.strip() for a in launch.split(",")]
    assert len(passed) == len(variants["fp32"]["signature"])
    assert passed[:inputs] == [f"args.inputs[{n}]" for n in range(inputs)]


REDUCE_SCRIPT = """
import json, os, sys
from pathlib import Path
import numpy as np
os.environ["TRITON_INTERPRET"] = "1"
from trt_plugin_kit import triton_interpret as ti

folder = Path(sys.argv[1])
ref, module = ti.Reference.of(folder), ti.load_kernel_module(folder / "kernel.py")
fields = {"gain": 0.75, "coefficients": [0.5, -1.0, 0.25]}
rng = np.random.default_rng(0)
runs = {v: ti.run_variant(module, ref, v, [(3, 2, 600)] * 2, fields, rng) for v in module.VARIANTS}
print(json.dumps({v: [str(m) for m in found] for v, found in runs.items()}))
"""


def test_triton_reduce_kernel_compiles_and_matches_its_reference(tmp_path):
    """--kernel triton --reduce: one program per row; its variants compile for Hopper, the launch passes the
    signature's arguments in order, and the kernel run by Triton's interpreter on the CPU (rows longer than
    BLOCK, a partial last chunk) matches the generated NumPy reference within the harness's tolerances."""
    from trt_plugin_kit import triton_aot

    options = scaffold.Options("red_t", "RedT", 2, 2, "gain", "coefficients", True, kernel="triton")
    files = scaffold.render(options, "red_t --kernel triton --reduce")
    folder = tmp_path / "red_t"
    for relative, text in files.items():
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_text(text)
    assert plugin_spec.load(folder).shape_outputs == ((2, 3, 1), (2, 3, 1))
    variants = triton_aot.load_variants(folder / "kernel.py")
    assert set(variants) == {"fp32", "fp16"}
    for name, variant in variants.items():
        triton_aot._check_compiled(name, triton_aot._compile(variant, 90), len(variant["signature"]))
    launch = re.search(r"kernel\.launch\(grid, stream, (.*?)\);", files["red_t_launch.cpp"], re.S).group(1)
    assert [a.strip() for a in launch.split(",")][-2:] == ["args.rows", "args.length"]
    assert len(launch.split(",")) == len(variants["fp32"]["signature"])
    run = subprocess.run(
        [sys.executable, "-c", REDUCE_SCRIPT, str(folder)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO_ROOT,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    mismatches = json.loads(run.stdout.strip().splitlines()[-1])
    assert set(mismatches) == {"fp32", "fp16"} and mismatches == {"fp32": [], "fp16": []}, mismatches
