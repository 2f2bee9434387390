#!/usr/bin/env python3
"""Builds the TensorRT engines of the Triton models (mnist, l2norm) with our plugins, in NVIDIA's containers.

    python3 build_engines.py --plugin-library build/trt-10.13.3/libtrt_plugin_kit.so   # fp32, both models
    python3 build_engines.py --plugin-config plugins.yaml --model mnist --precision int8 --verify
    python3 build_engines.py --model all --precision fp16 --flavour both --verify   # with/without plugins
    python3 build_engines.py --model l2norm --network-api      # TensorRT network API instead of ONNX
    python3 build_engines.py --dry-run --precision int8        # the build jobs and the checks, no TensorRT

What it does, per model:
1. loads the plugin libraries (``--plugin-library``, repeatable, and/or ``--plugin-config`` JSON/YAML) through
   TensorRT's plugin registry and checks that every plugin the graph needs is registered;
2. reads ``model_repository/<model>/config.pbtxt``: ``max_batch_size`` sets the optimization profile, and the
   ONNX graph's inputs/outputs are checked against the config before anything is built;
3. parses ``models/onnx/<model>_<flavour>.onnx`` (or the FP16/INT8 variant made from it, see
   trt_plugin_kit.models.export), checks the network TensorRT made and its optimization profile against the
   config,
   and builds the engine with a timing cache and a progress bar;
4. checks the engine's tensor names, dtypes and shapes against config.pbtxt and only then writes
   ``model_repository/<model>/1/model.plan`` (plugin flavour) or
   ``build/engines/<model>_native_<precision>.plan`` (native flavour, built for comparison);
5. with ``--verify``: runs the engine on the ten sample digits (PASS/FAIL each), on the validation split
   (accuracy), measures the average latency, and compares the outputs with the CPU reference (the NumPy
   evaluator running the same ONNX graph); l2norm is checked on random vectors of several lengths.

Precision (TensorRT 10: FP16 is a builder flag; TensorRT 11: networks are strongly typed, precision comes
from the graph's types): ``fp32`` builds FP32 (TF32 off); ``fp16`` sets the FP16 flag on TensorRT 10 and
builds the FP16 graph strongly typed on TensorRT 11; ``int8`` builds the INT8 graph (pools between Q/DQ with
the calibrated scales of models/lenet5_mnist_int8_scales.json) strongly typed on both. l2norm has no INT8
layer: its ``int8`` engine is FP32.

With ``--tensorrt-rtx`` it builds the native flavour with TensorRT for RTX instead (``tensorrt_rtx``, no GPU
needed): engines for RTX GPUs, not served; the tests use it to run this code against a real TensorRT API.

Needs TensorRT >= 10 (``import tensorrt``), an NVIDIA GPU and the CUDA runtime (libcudart), plus numpy, onnx,
pillow, tqdm and tritonclient[grpc] (Triton's ModelConfig message reads config.pbtxt; PyYAML only
for YAML plugin configs).
Without them it exits with a message saying so. The code is the package trt_plugin_kit.engines.
"""

import sys

from trt_plugin_kit.engines.errors import EXIT_ENVIRONMENT

try:
    from trt_plugin_kit.engines.cli import main
except ImportError as error:  # a Python dependency is missing: say which, no traceback
    print(
        f"build_engines.py: {error}. It needs numpy, onnx, pillow, tqdm and tritonclient[grpc]: "
        "pip install numpy onnx pillow tqdm 'tritonclient[grpc]'",
        file=sys.stderr,
    )
    sys.exit(EXIT_ENVIRONMENT)

if __name__ == "__main__":
    sys.exit(main())
