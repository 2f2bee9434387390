"""The one module that imports TensorRT's Python API: NVIDIA TensorRT (``tensorrt``), or TensorRT for RTX
(``tensorrt_rtx``) when asked (``build_engines.py --tensorrt-rtx``).

TensorRT-RTX installs from PyPI and its builder runs without a GPU, so it is how the tests run the builder's
TensorRT code against a real TensorRT API. Its Python API is TensorRT's: the same plugin registry, ONNX
parser, network definition, builder config, optimization profiles, timing-cache calls and progress monitor.
Where it differs, the builder asks :class:`TensorRTApi` by name instead of testing which module it has:

* version numbering (TensorRT-RTX is 1.x): :attr:`~TensorRTApi.rules_major` is the TensorRT major whose
  precision rules apply; TensorRT-RTX follows TensorRT 11's (strongly typed networks, no FP16/INT8 flags);
* networks are always strongly typed (TensorRT >= 11 and TensorRT-RTX): :meth:`~TensorRTApi.network_flags`;
* its builder needs no GPU (kernels are compiled on the RTX GPU at run time): ``builds_without_gpu``;
* engines with custom plugins cannot be built with it: ``custom_plugins_limit`` says why;
* its timing-cache calls are no-ops that warn (deprecated since TensorRT-RTX 1.2): they still run, with
  TensorRT's signatures, inside :meth:`~TensorRTApi.timing_cache_calls`, which silences that warning.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType

from trt_plugin_kit.engines.errors import EnvironmentMissing
from trt_plugin_kit.engines.precision import parse_trt_major

TENSORRT, TENSORRT_RTX = "tensorrt", "tensorrt_rtx"  # module names
# The TensorRT major whose precision rules TensorRT-RTX follows: strongly typed only, no FP16/INT8 flags.
TENSORRT_RTX_RULES_MAJOR = 11
TENSORRT_RTX_CUSTOM_PLUGIN_LIMIT = (
    "TensorRT-RTX's ONNX parser aborts the process ('terminate called without an active exception') right "
    "after it creates a custom plugin from a node, and its network definition has no add_plugin_v3: engines "
    "with plugins cannot be built with it (docs/models.md)"
)
TENSORRT_RTX_INSTALL = "pip install -e '.[rtx]' (the tensorrt-rtx-cu13 wheel)"


@dataclass(frozen=True)
class TensorRTApi:
    trt: ModuleType  # the imported module; its attributes are TensorRT's Python API
    module_name: str  # TENSORRT or TENSORRT_RTX
    version: str
    rules_major: int
    always_strongly_typed: bool
    builds_without_gpu: bool
    custom_plugins_limit: str = ""  # empty where engines with custom plugins can be built
    timing_cache_deprecated: bool = False

    @property
    def name(self) -> str:
        return "TensorRT-RTX" if self.module_name == TENSORRT_RTX else "TensorRT"

    @property
    def file_tag(self) -> str:
        """Names files of one TensorRT release, e.g. the timing cache: trt10.13.3.9, rtx1.7.1.116."""
        return f"{'rtx' if self.module_name == TENSORRT_RTX else 'trt'}{self.version}"

    def network_flags(self, strongly_typed: bool) -> int:
        """``create_network`` flags: STRONGLY_TYPED where asked and not already the only kind of network."""
        if strongly_typed and not self.always_strongly_typed:
            return 1 << int(self.trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)
        return 0

    @property
    def plugin_interface_major(self) -> int:
        """The TensorRT major whose plugin interfaces (registry, creators) it has; TensorRT-RTX: 11's."""
        return self.rules_major

    @property
    def runtime_soname(self) -> str:
        """The shared library behind the Python module: libnvinfer.so.<major>, libtensorrt_rtx.so.<major>."""
        major = self.version.split(".", 1)[0]
        return f"libtensorrt_rtx.so.{major}" if self.module_name == TENSORRT_RTX else f"libnvinfer.so.{major}"

    def make_runtime_global(self) -> None:
        """Puts the TensorRT library the Python module loaded into the process's global symbol scope.

        The wheels load it RTLD_LOCAL; a plugin library that does not link it itself (ours where it was built
        without libnvinfer, and always against TensorRT-RTX) then resolves its getPluginRegistry reference
        to this very library when it is loaded, as in a process that links TensorRT. Nothing is loaded anew
        (RTLD_NOLOAD); where the library is not found by that name this does nothing."""
        with contextlib.suppress(OSError):
            ctypes.CDLL(self.runtime_soname, mode=os.RTLD_NOW | os.RTLD_GLOBAL | os.RTLD_NOLOAD)

    @contextlib.contextmanager
    def timing_cache_calls(self) -> Iterator[None]:
        with warnings.catch_warnings():
            if self.timing_cache_deprecated:
                warnings.simplefilter("ignore", DeprecationWarning)
            yield


def module_name(rtx: bool) -> str:
    return TENSORRT_RTX if rtx else TENSORRT


def installed_version(rtx: bool = False) -> str | None:
    """The version of the installed package (None where it cannot be imported)."""
    try:
        return importlib.import_module(module_name(rtx)).__version__
    except (ImportError, OSError):
        return None


def load(rtx: bool = False) -> TensorRTApi:
    """Imports ``tensorrt`` (or ``tensorrt_rtx``); EnvironmentMissing saying what is missing."""
    name = module_name(rtx)
    try:
        trt = importlib.import_module(name)
    except ImportError as error:
        hint = f"; {TENSORRT_RTX_INSTALL}" if rtx else ""
        raise EnvironmentMissing(
            f"the {'TensorRT-RTX' if rtx else 'TensorRT'} Python package is not installed "
            f"(import {name}: {error}){hint}"
        ) from None
    except OSError as error:  # e.g. the pip stub without libnvinfer
        raise EnvironmentMissing(f"{name} could not be loaded ({error})") from None
    version = trt.__version__
    if rtx:
        return TensorRTApi(
            trt,
            name,
            version,
            rules_major=TENSORRT_RTX_RULES_MAJOR,
            always_strongly_typed=True,
            builds_without_gpu=True,
            custom_plugins_limit=TENSORRT_RTX_CUSTOM_PLUGIN_LIMIT,
            timing_cache_deprecated=True,
        )
    major = parse_trt_major(version)
    # TensorRT 11: always strongly typed, the creation flag is deprecated.
    return TensorRTApi(trt, name, version, major, always_strongly_typed=major >= 11, builds_without_gpu=False)
