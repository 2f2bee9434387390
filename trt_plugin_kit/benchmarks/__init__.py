"""GPU benchmark of every trt_plugin_kit plugin against the hardware limit and PyTorch.

One process, on the GPU machine, after `cmake --build` has made libtrt_plugin_kit.so and libplugin_bench.so;
from the repository root (a plain ``python3``: no install, no virtualenv, the standard library is enough
for everything but the PyTorch peers and the chart):

    python3 -m trt_plugin_kit.benchmarks --build-dir build/bench --out records/benchmarks

1. Roofline: a 1 GiB device-to-device copy (torch ``copy_``, and ``cudaMemcpyAsync`` from the benchmark
   library), bytes read + written per second; cuBLAS GEMM (``torch.matmul``) on every FC shape.
2. Every plugin's ``enqueue``, driven through TensorRT's call sequence by libplugin_bench.so, and its PyTorch
   peer on the same shapes and dtypes with the same method: CUDA events around each enqueue on a non-default
   stream, a GPU-side wait kernel before each timed call (so host launch latency is not measured), inputs
   rotating over sets larger than twice the L2 cache together, non-zero random data, warm-up, at least 100
   repetitions, median and p10/p90. The MNIST serving sizes are timed as CUDA graphs of 100 enqueues
   (time per enqueue = graph time / 100), so host launch overhead is not what is measured.
3. Per case: bytes moved (inputs read + outputs written, FC also its weights), GB/s, % of the copy
   bandwidth, TFLOP/s for FC, speed ratio against the peer (peer time / plugin time, > 1: plugin faster),
   and every roofline and serving-size target as PASS/FAIL (serving sizes: every plugin-vs-peer ratio
   >= 1.0x with a 0.97x noise allowance).
4. The plugin part of LeNet's forward as one CUDA graph per forward against PyTorch's, with the device's
   launch-latency floor for a graph of as many nodes.
5. Writes OUT/benchmark.json (everything), OUT/benchmark.md (tables) and OUT/benchmark.png (chart, when
   matplotlib is importable). Exits 1 when a target fails, a case errs or the time budget skips one.

``--dry-run`` needs no GPU and no PyTorch: it builds the case list and checks the arguments; with
``--build-dir`` it also runs the build-phase calls of every case against the real plugin library.

Modules:

* :mod:`.cases` - the case list (shapes, fields, peers, targets), ``--quick``/``--only`` selection;
* :mod:`.lenet_chain` - the LeNet plugin chain: its steps, PyTorch's forward, its target and table;
* :mod:`.library` - ctypes binding of libplugin_bench.so;
* :mod:`.peers` - PyTorch's peers, timed as the plugins are;
* :mod:`.targets` - derived metrics, speed ratios, targets;
* :mod:`.report` - benchmark.json, benchmark.md, benchmark.png;
* :mod:`.cli` - arguments, dry run, the measurement loop (``python3 -m trt_plugin_kit.benchmarks``).
"""
