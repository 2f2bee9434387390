"""NumPy references of the plugin ops in libtrt_plugin_kit.so: one name -> function table.

Each plugin's reference lives in its folder (``plugins/<name>/reference.py``) and is the executable
specification of that plugin: same name, same fields, same semantics as its PluginFields. The spec
(``plugins/<name>/spec.yaml``, :mod:`trt_plugin_kit.specs.spec`) names the function. The references serve
three purposes:

* the plugin harness's dumps are checked against them (:mod:`trt_plugin_kit.specs.harness_dumps`);
* the ONNX evaluator (:mod:`trt_plugin_kit.models.onnx_eval`) runs the custom nodes of the plugin flavour of
  our models with them, so that the plugin graph can be compared with the native graph in ONNX Runtime;
* they document the exact semantics (rounding, padding, broadcasting) in one place.

Conventions shared by all references:

* Math is done in float64; the result is cast back to the input's float dtype (float16, float32 or
  float64). The only integer path is the INT8 Pool (int8 in, int8 out).
* Field arguments are keyword arguments named as the fields and accept what the TensorRT ONNX parser would
  hand the plugin (Python scalars, lists or NumPy arrays); they are validated and a :class:`ValueError` (or
  :class:`TypeError` for a wrong tensor dtype) with a clear message is raised for anything the plugin would
  reject. Inputs are never modified; every function returns new arrays.

Field types as the plugin receives them (ONNX attribute -> PluginField): INT/INTS -> int32,
FLOAT/FLOATS -> float32, STRING -> char. Float fields are therefore float32 values on the GPU; pass
``np.float32(value)`` here when bit-exact agreement with the plugin matters.

    reference.REFERENCES["LeakyReLU"](x, negative_slope=0.1)     # or reference.leaky_relu(x, 0.1)
    reference.run("Pool", [x], {"mode": "max", "kernel": [2, 2]})  # spec defaults filled in

Nothing is loaded when this module is imported: a plugin's reference.py is imported the first time one of
its functions is asked for (a plugin folder is not a package, so it is imported from its file), and the
tables below read the specs only when first used.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
from collections.abc import Callable, Iterator, Mapping
from types import ModuleType

import numpy as np

from trt_plugin_kit.specs import spec as plugin_spec
from trt_plugin_kit.specs.reference_utils import FLOAT_DTYPES


def _module(spec: plugin_spec.PluginSpec) -> ModuleType:
    """The folder's reference.py, imported once as trt_plugin_kit.plugin_references.<folder>."""
    name = f"trt_plugin_kit.plugin_references.{spec.folder.name}"
    if name not in sys.modules:
        path = spec.folder / "reference.py"
        loader_spec = importlib.util.spec_from_file_location(name, path)
        if loader_spec is None or not path.is_file():
            raise plugin_spec.SpecError(f"{spec.folder}: no reference.py (spec reference: {spec.reference})")
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[name] = module
        loader_spec.loader.exec_module(module)
    return sys.modules[name]


def _function(spec: plugin_spec.PluginSpec, name: str) -> Callable:
    function = getattr(_module(spec), name, None)
    if not callable(function):
        raise plugin_spec.SpecError(f"{spec.folder}/reference.py has no function {name!r} (named by spec)")
    return function


class _FunctionTable(Mapping):
    """Creator name -> the function a spec field names, each plugin's reference.py imported on first use."""

    def __init__(self, field: str):
        self._field = field

    def _specs(self) -> dict[str, plugin_spec.PluginSpec]:
        return {name: spec for name, spec in plugin_spec.all_specs().items() if getattr(spec, self._field)}

    def __getitem__(self, plugin: str) -> Callable:
        spec = self._specs()[plugin]
        return _function(spec, getattr(spec, self._field))

    def __iter__(self) -> Iterator[str]:
        return iter(self._specs())

    def __len__(self) -> int:
        return len(self._specs())


#: Creator name -> reference function ``f(*inputs, **fields)`` returning an array or a tuple of arrays.
REFERENCES: Mapping[str, Callable] = _FunctionTable("reference")
#: Creator name -> ``f(*inputs, **fields)`` giving, per output, the magnitude errors are relative to (None:
#: the output itself), for the plugins whose outputs can cancel.
ERROR_SCALES: Mapping[str, Callable] = _FunctionTable("error_scale")


def _without_unset(fields: dict) -> dict:
    return {name: value for name, value in fields.items() if value is not None}


def run(plugin: str, inputs: list[np.ndarray], fields: dict) -> tuple[np.ndarray, ...]:
    """The outputs of ``plugin`` for ``inputs`` and ``fields`` (checked against the spec, its defaults filled
    in, unset optional fields left out), always as a tuple."""
    complete = plugin_spec.get(plugin).complete(fields)
    outputs = REFERENCES[plugin](*inputs, **_without_unset(complete))
    return outputs if isinstance(outputs, tuple) else (outputs,)


def error_scales(plugin: str, inputs: list[np.ndarray], fields: dict) -> list[np.ndarray | None]:
    """Per output, the magnitude an error is relative to (None: the reference value itself)."""
    if plugin not in ERROR_SCALES:
        return [None] * len(plugin_spec.get(plugin).outputs)
    complete = plugin_spec.get(plugin).complete(fields)
    return ERROR_SCALES[plugin](*inputs, **_without_unset(complete))


def _public_functions(module: ModuleType) -> dict[str, Callable]:
    return {
        name: value
        for name, value in vars(module).items()
        if callable(value) and not name.startswith("_") and value.__module__ == module.__name__
    }


@functools.cache
def _function_named(name: str) -> Callable:
    """A reference module's public function by its own name, the plugins' reference.py imported in turn until
    one defines it."""
    for spec in plugin_spec.all_specs().values():
        function = _public_functions(_module(spec)).get(name)
        if function is not None:
            return function
    raise AttributeError(f"module {__name__!r} has no attribute {name!r} (no plugin reference defines it)")


def __getattr__(name: str) -> Callable:
    """The references under their own names, for direct use (reference.pool(x, "max", [2, 2]), ...)."""
    if name.startswith("_"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return _function_named(name)


__all__ = ["ERROR_SCALES", "FLOAT_DTYPES", "REFERENCES", "error_scales", "run"]
