"""The house's rules that the import graph keeps, read from the sources (ast, nothing imported):

- the package's folders are layers, and no module imports one of a layer above its own (CONTRIBUTING.md);
- a private module or name (a leading underscore) is imported only from inside its own package;
- every name has one home: it is imported from the module that defines it, never through another module
  that only imported it (a module answering names itself, through a module-level __getattr__, is their home);
- the repository is located in one place, trt_plugin_kit.interface.checkout(), and only on first use.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from trt_plugin_kit.interface import REPO_ROOT

# The importing code: the package, the top-level packages beside it and the scripts that use them.
SOURCES = ("trt_plugin_kit", "clients", "loadtests", "scripts", "model_repository", "build_engines.py")

# Rooms (a subpackage, a module of the package, a top-level package or script) by floor: a module may import
# from its own room and from rooms on lower floors only. A new room must be placed here.
FLOORS = {
    "trt_plugin_kit.interface": 1,  # names, ports, paths: what every tool agrees on
    "trt_plugin_kit.tritonserver": 2,  # talking to Triton Inference Server: protocol, configs, endpoints
    "trt_plugin_kit.specs": 2,  # plugin facts and NumPy references
    "trt_plugin_kit.benchmarks": 2,  # the plugin benchmark (GPU machine)
    "trt_plugin_kit.triton_aot": 2,  # OpenAI Triton kernels compiled ahead of time (run by the build)
    "trt_plugin_kit.triton_interpret": 3,  # OpenAI Triton kernels in Triton's CPU interpreter
    "trt_plugin_kit.models": 3,  # LeNet, MNIST, export, evaluator
    "trt_plugin_kit.scaffold": 3,  # new-plugin
    "trt_plugin_kit.engines": 4,  # the TensorRT engine builder and its artifact checks
    "trt_plugin_kit.serving": 5,  # the server (checks the builder's artifacts), the edge, the Python backend
    "trt_plugin_kit.deploy": 6,  # Kubernetes, compose, balancer, the GPU host check
    "trt_plugin_kit": 7,  # the front door (trt-plugin-kit COMMAND) and the package's face
    "clients": 7,
    "loadtests": 8,
    "scripts": 9,
    "model_repository": 9,
    "build_engines": 9,
}
KIT_PACKAGES = ("trt_plugin_kit", "clients", "loadtests")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO_ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> dict[str, Path]:
    found = {}
    for source in SOURCES:
        top = REPO_ROOT / source
        for path in [top] if top.is_file() else sorted(top.rglob("*.py")):
            found[module_name(path)] = path
    return found


@cache
def tree(module: str) -> ast.Module:
    return ast.parse(modules()[module].read_text(), filename=str(modules()[module]))


@dataclass(frozen=True)
class Import:
    importer: str
    module: str  # the module imported, or imported from
    name: str | None  # the name imported from it (None: `import module`)
    line: int

    def __str__(self) -> str:
        what = f"from {self.module} import {self.name}" if self.name else f"import {self.module}"
        return f"{modules()[self.importer].relative_to(REPO_ROOT)}:{self.line}: {what}"


@cache
def imports() -> list[Import]:
    """Every absolute import of a kit module by a kit module, functions' own imports included."""
    found = []
    for importer in modules():
        for node in ast.walk(tree(importer)):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                for alias in node.names:
                    submodule = f"{node.module}.{alias.name}"
                    if submodule in modules():  # `from package import module`
                        found.append(Import(importer, submodule, None, node.lineno))
                    else:
                        found.append(Import(importer, node.module, alias.name, node.lineno))
            elif isinstance(node, ast.Import):
                found += [Import(importer, alias.name, None, node.lineno) for alias in node.names]
    return [i for i in found if i.module.split(".")[0] in KIT_PACKAGES and i.module in modules()]


def room(module: str) -> str:
    """A subpackage or module of the package (its __main__ is the front door's), else the top-level name."""
    parts = module.split(".")
    if parts[0] != "trt_plugin_kit" or len(parts) == 1 or parts[1] == "__main__":
        return parts[0]
    return ".".join(parts[:2])


def test_every_room_has_a_floor():
    unplaced = sorted({room(m) for m in modules()} - set(FLOORS))
    assert not unplaced, f"place these in FLOORS (tests/unit/test_package_layers.py): {unplaced}"


def test_no_module_imports_a_layer_above_its_own():
    upward = [
        f"{i} (floor {FLOORS[room(i.importer)]} imports floor {FLOORS[room(i.module)]})"
        for i in imports()
        if room(i.importer) != room(i.module) and FLOORS[room(i.module)] >= FLOORS[room(i.importer)]
    ]
    assert not upward, "imports of a room on the same floor or above:\n" + "\n".join(upward)


def private(part: str) -> bool:
    return part.startswith("_") and not part.startswith("__")


def test_private_modules_and_names_stay_inside_their_package():
    leaks = []
    for i in imports():
        parts = i.module.split(".")
        private_at = next((n for n, part in enumerate(parts) if private(part)), None)
        if private_at is not None:
            owner = ".".join(parts[:private_at])
        elif i.name and private(i.name):
            owner = ".".join(parts[:-1]) if modules()[i.module].name != "__init__.py" else i.module
        else:
            continue
        if not (i.importer == owner or i.importer.startswith(owner + ".")):
            leaks.append(str(i))
    assert not leaks, "private modules or names imported from another package:\n" + "\n".join(leaks)


@cache
def defined(module: str) -> frozenset[str] | None:
    """The names a module defines at its top level (None: it answers names itself, by __getattr__)."""
    names = set()
    for node in ast.walk(tree(module)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if node.name == "__getattr__" and node in tree(module).body:
                return None
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return frozenset(names)


def test_every_name_is_imported_from_its_home():
    through = [
        f"{i}: {i.name} is not defined there"
        for i in imports()
        if i.name and i.name != "*" and defined(i.module) is not None and i.name not in defined(i.module)
    ]
    assert not through, "names imported through a module that only imported them:\n" + "\n".join(through)


def test_the_repository_is_located_in_one_place():
    """Only interface.checkout() goes up from a source file to the repository."""
    elsewhere = set()
    for module, path in modules().items():
        for node in ast.walk(tree(module)):
            text = ast.unparse(node) if isinstance(node, ast.Attribute | ast.Subscript) else ""
            if "__file__" in text and (".parents[" in text or ".parent.parent" in text):
                elsewhere.add(f"{path.relative_to(REPO_ROOT)}: {text}")
    assert elsewhere == {"trt_plugin_kit/interface.py: Path(__file__).resolve().parents[1]"}, elsewhere


def test_importing_the_interface_locates_nothing():
    code = (
        "import trt_plugin_kit.interface as interface\n"
        "assert interface.checkout.cache_info().currsize == 0\n"
        "assert 'REPO_ROOT' not in vars(interface)\n"
        "assert (interface.REPO_ROOT / 'trt_plugin_kit' / 'interface.py').is_file()\n"
        "assert interface.checkout.cache_info().currsize == 1\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_every_kit_import_names_a_module_that_exists():
    """A module moved or renamed leaves no import of its old name behind, in the kit or its tests (a merge
    brought `trt_plugin_kit.triton` back after its move to tritonserver: only the server tier's collection
    found it)."""
    known = set(modules())
    for path in sorted((REPO_ROOT / "tests").rglob("*.py")):
        known.add(module_name(path))
    missing = []
    for path in [*(modules().values()), *sorted((REPO_ROOT / "tests").rglob("*.py"))]:
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            missing += [
                f"{path.relative_to(REPO_ROOT)}:{node.lineno}: {name}"
                for name in names
                if name.split(".")[0] in KIT_PACKAGES and name not in known
            ]
    assert not missing, "imports of modules that do not exist:\n" + "\n".join(missing)
