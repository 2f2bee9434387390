"""ctypes binding of libplugin_bench.so (plugins/benchmarks/plugin_bench.cpp) and where the libraries are."""

from __future__ import annotations

import ctypes
import json
import math
from pathlib import Path

from trt_plugin_kit.benchmarks.cases import Case
from trt_plugin_kit.interface import BUILD_DIR, PLUGIN_LIBRARY_NAME

DEFAULT_BUILD_DIR = BUILD_DIR / "bench"
BENCH_LIBRARY = "libplugin_bench.so"
PLUGIN_LIBRARY = PLUGIN_LIBRARY_NAME

# Order of the values libplugin_bench.so writes into its `results` array (see plugin_bench.cpp).
RESULT_FIELDS = (
    "median_us",
    "p10_us",
    "p90_us",
    "min_us",
    "max_us",
    "mean_us",
    "samples",
    "rotation_sets",
    "input_bytes",
    "output_bytes",
    "workspace_bytes",
    "l2_bytes",
    "graphs",
    "rotation_bytes",
    "tactic",  # the tactic chosen as TensorRT's builder chooses (None: the plugin has no tactics)
    "tactic_us",  # its time when the tactics were timed
    "default_tactic_us",  # tactic 0's (the plugin's default), timed the same way
)


class BenchError(RuntimeError):
    pass


class BenchLibrary:
    """ctypes front of libplugin_bench.so (loaded RTLD_GLOBAL, then the plugin library)."""

    def __init__(self, bench_path: Path, plugin_path: Path):
        self.lib = ctypes.CDLL(str(bench_path), mode=ctypes.RTLD_GLOBAL)
        c_double_p = ctypes.POINTER(ctypes.c_double)
        s, i = ctypes.c_char_p, ctypes.c_int
        self.lib.tpk_bench_result_count.restype = i
        self.lib.tpk_bench_load.argtypes = [s, s, i]
        self.lib.tpk_bench_device.argtypes = [s, i]
        self.lib.tpk_bench_plan.argtypes = [s, s, s, c_double_p, i, s, i]
        self.lib.tpk_bench_run.argtypes = [s, s, s, i, i, s, c_double_p, i, s, i]
        self.lib.tpk_bench_copy.argtypes = [ctypes.c_double, i, s, c_double_p, i, s, i]
        self.lib.tpk_bench_chain.argtypes = [s, i, s, s, i]
        # The head-to-head of the kernel languages (plugins/benchmarks/triton_twin.cpp); absent from a
        # library built without the Triton step.
        self.has_twin = hasattr(self.lib, "tpk_bench_twin")
        if self.has_twin:
            self.lib.tpk_bench_twin.argtypes = [s, ctypes.c_double, i, i, s, i]
            self.lib.tpk_bench_twin.restype = i
        functions = (
            "tpk_bench_load",
            "tpk_bench_device",
            "tpk_bench_plan",
            "tpk_bench_run",
            "tpk_bench_copy",
        )
        for f in (*functions, "tpk_bench_chain"):
            getattr(self.lib, f).restype = i
        self.count = self.lib.tpk_bench_result_count()
        if self.count != len(RESULT_FIELDS):
            raise BenchError(
                f"{bench_path} reports {self.count} result fields, expected {len(RESULT_FIELDS)}"
            )
        self.loaded = self._call(self.lib.tpk_bench_load, str(plugin_path).encode())

    @staticmethod
    def _call(function, *args) -> str:
        message = ctypes.create_string_buffer(8192)
        status = function(*args, message, len(message))
        text = message.value.decode(errors="replace")
        if status != 0:
            raise BenchError(text)
        return text

    def _results(self):
        return (ctypes.c_double * self.count)()

    @staticmethod
    def _as_dict(results) -> dict:
        return {
            name: (None if math.isnan(results[i]) else float(results[i]))
            for i, name in enumerate(RESULT_FIELDS)
        }

    def device(self) -> dict:
        return json.loads(self._call(self.lib.tpk_bench_device))

    def plan(self, case: Case) -> tuple[str, dict]:
        results = self._results()
        spec = self._call(
            self.lib.tpk_bench_plan,
            case.plugin.encode(),
            case.fields.encode(),
            case.io_spec.encode(),
            results,
            self.count,
        )
        return spec, self._as_dict(results)

    def run(self, case: Case, repetitions: int, options: str) -> tuple[str, dict]:
        """The outputs' description and the measurement; with tactics, ``tactic_timings`` too."""
        results = self._results()
        text = self._call(
            self.lib.tpk_bench_run,
            case.plugin.encode(),
            case.fields.encode(),
            case.io_spec.encode(),
            repetitions,
            case.graph_batch,
            options.encode(),
            results,
            self.count,
        )
        spec, _, timings = text.partition("\n")
        measured = self._as_dict(results)
        measured["tactic_timings"] = parse_tactic_timings(timings)
        return spec, measured

    def chain(self, spec: str, repetitions: int, options: str) -> dict:
        """A chain of plugins, one CUDA graph per forward (lenet_chain); its timings as a dict."""
        return json.loads(self._call(self.lib.tpk_bench_chain, spec.encode(), repetitions, options.encode()))

    def twin(self, dtype: str, count: int, repetitions: int, graph_batch: int) -> dict:
        """LeakyReLU's CUDA kernel and its Triton twin on the same buffers: medians and their ratio."""
        if not self.has_twin:
            raise BenchError("libplugin_bench.so was built without the Triton twin (no Triton at build time)")
        return json.loads(
            self._call(self.lib.tpk_bench_twin, dtype.encode(), float(count), repetitions, graph_batch)
        )

    def copy(self, nbytes: int, repetitions: int, options: str) -> dict:
        """A device-to-device copy of ``nbytes`` (options' copy_kernel: cudaMemcpyAsync by default), timed;
        ``method`` says which copy ran."""
        results = self._results()
        text = self._call(
            self.lib.tpk_bench_copy, float(nbytes), repetitions, options.encode(), results, self.count
        )
        return {**self._as_dict(results), "method": text}


def parse_tactic_timings(text: str) -> dict[int, float]:
    """libplugin_bench.so's tactic timings "0:12.5 1:11.9" -> {tactic: µs per enqueue}, in the order timed."""
    timings = {}
    for item in text.split():
        tactic, _, us = item.partition(":")
        timings[int(tactic)] = float(us)
    return timings


def parse_outputs(spec: str) -> list[tuple[str, tuple[int, ...]]]:
    """libplugin_bench.so's output description "fp32:4,5;fp16:2" -> [(dtype, dims), ...]."""
    outputs = []
    for item in filter(None, spec.split(";")):
        dtype, _, dims = item.partition(":")
        outputs.append((dtype, tuple(int(d) for d in dims.split(",") if d)))
    return outputs


def check_outputs(case: Case, spec: str) -> None:
    got = parse_outputs(spec)
    expected = [(case.dtype, tuple(s)) for s in case.outputs]
    if got != expected:
        raise BenchError(f"{case.id}: plugin outputs {spec}, the benchmark expects {expected}")


def find_libraries(args) -> tuple[Path, Path]:
    build = Path(args.build_dir) if args.build_dir else DEFAULT_BUILD_DIR
    bench = Path(args.bench_lib) if args.bench_lib else build / BENCH_LIBRARY
    plugin = Path(args.plugin_lib) if args.plugin_lib else build / PLUGIN_LIBRARY
    return bench.resolve(), plugin.resolve()
