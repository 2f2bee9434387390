"""The Python backend's shared memory (/dev/shm), sized so that no request, refused or not, can take the space
another model instance needs.

How the backend uses it (triton-inference-server/python_backend, src/shm_manager.cc, src/python_be.cc):
each model instance (its stub process) has one region, a file in /dev/shm created at
``shm-default-byte-size``. Every tensor of every request of one ``execute`` is copied into it, all the
requests of a dynamic batch at once, and the response tensors are written there too. An allocation that
does not fit grows the region by ``shm-growth-byte-size * (n // shm-growth-byte-size + 1)`` for n bytes, and
a region never shrinks. Growing is a ``posix_fallocate`` (Boost.Interprocess on Linux): when /dev/shm is
full it fails, and the batch that needed it gets an error; nothing else does.

With the backend's defaults (regions of 1 MiB growing 1 MiB at a time), whichever instance meets large
requests first keeps what it grew to. Measured on a CPU server (PyTriton's Triton 2.51, /dev/shm of 256 MiB
as compose had it): floods of concurrent requests of 32 MiB for mnist_preprocess, each refused by the model,
grew its two instances' regions from 1 MiB to 193 + 51 MiB in dynamic batches of up to 8 such requests,
leaving 8 MiB of /dev/shm to all four instances for good. From then on, whatever needs a region to grow by
more than what is left is refused ("Failed to increase the shared memory pool size"), whichever model and
client it comes from.

So each region is created at the size of the largest ``execute`` one request can make
(:data:`SHM_DEFAULT_BYTES`, allocated at start) and /dev/shm holds exactly those regions plus less than one
growth step (:func:`required_shm_bytes`): every instance has its space from the start, no region can ever
grow (each growth takes at least SHM_GROWTH_BYTES, more than what is left), and a dynamic batch whose
requests together need more than one region (several requests near the 32 MiB limit at the same moment)
is refused as a whole, alone, with that same error. Measured with these flags and 141 MiB: regions of
35 MiB from the start, a request of 32 MiB + 64 KiB answered by the model's own refusal, the same floods
answered with the model's refusal or the shared-memory error, and the regions, the free 1 MiB and the
other models' answers unchanged after them. With less /dev/shm than this, the server does not start
("Unable to initialize shared memory key ... to requested size").

The largest ``execute`` (bytes, per instance):

    SHM_BASE_BYTES          1 MiB  the backend's own records: message queues, request/response headers
                                   (its default region size; 4 instances at 1 MiB served and warmed up)
  + LARGEST_REQUEST_BYTES  32 MiB  the largest request the edge lets through (edge.limits.MAX_REQUEST_BYTES,
                                   HTTP body after decompression, gRPC message), its tensors copied in whole
                                   before the model can refuse them
  + LARGEST_RESPONSE_BYTES  1 MiB  l2norm's 64 vectors of 4096 float32 (mnist_preprocess: 64 x 28 x 28
                                   float32 = 196 KiB; mnist: 64 x 10 float32; errors: a few hundred bytes)
  + SLACK_BYTES             1 MiB  tensor headers (a few hundred bytes each), alignment, the allocator's
                                   fragmentation, a gRPC message's 64 KiB over the limit
  = SHM_DEFAULT_BYTES      35 MiB

    required_shm_bytes(instances) = instances x 35 MiB + OTHER_FILES_BYTES (1 MiB, less than one growth
    step of 2 MiB: room for other files in /dev/shm, such as a POSIX semaphore, that no region can take).
    CPU: mnist 1, l2norm 1, mnist_preprocess 2 and mnist_vit's plugin_onnx stand-in 1 (5 instances, 176 MiB);
    GPU: mnist_preprocess 4 (141 MiB); python_backend_instances() counts them from the configurations, and
    compose's services and the Kubernetes pods get exactly that /dev/shm. Memory-backed: it counts against
    the container's memory.
"""

from __future__ import annotations

from pathlib import Path

from trt_plugin_kit.interface import PLUGIN_ONNX_BACKEND, REPO_ROOT
from trt_plugin_kit.serving.edge.limits import MAX_REQUEST_BYTES

MIB = 1024 * 1024

SHM_BASE_BYTES = 1 * MIB
LARGEST_REQUEST_BYTES = MAX_REQUEST_BYTES
LARGEST_RESPONSE_BYTES = 64 * 4096 * 4  # l2norm: max_batch_size x max_vector_length float32
SLACK_BYTES = 1 * MIB
SHM_DEFAULT_BYTES = SHM_BASE_BYTES + LARGEST_REQUEST_BYTES + LARGEST_RESPONSE_BYTES + SLACK_BYTES
SHM_GROWTH_BYTES = 2 * MIB
OTHER_FILES_BYTES = 1 * MIB  # < SHM_GROWTH_BYTES: no region can grow into it

MODEL_REPOSITORY = REPO_ROOT / "model_repository"
CPU_CONFIG_NAME = "cpu"  # configs/cpu.pbtxt, selected with --model-config-name=cpu (serving.py)


def python_backend_shm_flags() -> list[str]:
    """tritonserver's flags for the Python backend's regions: created at the largest execute's size; growing
    by 2 MiB, which /dev/shm never has room for (only a batch of several large requests asks to grow)."""
    return [
        f"--backend-config=python,shm-default-byte-size={SHM_DEFAULT_BYTES}",
        f"--backend-config=python,shm-growth-byte-size={SHM_GROWTH_BYTES}",
    ]


def required_shm_bytes(instances: int) -> int:
    """The /dev/shm that `instances` Python-backend model instances need: one region each, and room for other
    files that no region can grow into."""
    if instances < 0:
        raise ValueError(f"instances must be >= 0, not {instances}")
    return instances * SHM_DEFAULT_BYTES + OTHER_FILES_BYTES


def python_backend_instances(variant: str, repository: Path = MODEL_REPOSITORY) -> int:
    """Model instances of the Python backend that a server of `variant` ("cpu": configs/cpu.pbtxt where a
    model has one; "tensorrt": config.pbtxt) starts, from the instance_group counts of the configurations."""
    from google.protobuf import text_format  # noqa: PLC0415 - for tools and tests, not for serving
    from tritonclient.grpc import model_config_pb2  # noqa: PLC0415

    if variant not in ("cpu", "tensorrt"):
        raise ValueError(f"variant must be 'cpu' or 'tensorrt', not {variant!r}")
    instances = 0
    for default in sorted(repository.glob("*/config.pbtxt")):
        chosen = default.parent / "configs" / f"{CPU_CONFIG_NAME}.pbtxt"
        path = chosen if variant == "cpu" and chosen.is_file() else default
        config = text_format.Parse(path.read_text(), model_config_pb2.ModelConfig())
        # The plugin_onnx stand-in is the Python backend under another name (its stubs, its regions).
        if config.backend not in ("python", PLUGIN_ONNX_BACKEND):
            continue
        groups = config.instance_group
        if any(group.kind == model_config_pb2.ModelInstanceGroup.KIND_GPU for group in groups):
            raise ValueError(f"{path}: a Python model on GPUs has one instance per GPU; count them by hand")
        instances += sum(group.count or 1 for group in groups) if groups else 1
    return instances


def format_mebibytes(size: int, unit: str) -> str:
    """`size` (a whole number of MiB) the way a deployment file writes it: unit "Mi" (Kubernetes) or "mb"
    (Docker: 1024-based)."""
    if size % MIB:
        raise ValueError(f"{size} bytes is not a whole number of MiB")
    return f"{size // MIB}{unit}"
