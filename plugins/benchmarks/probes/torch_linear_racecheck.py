"""PyTorch's own F.linear at padded FP16 shapes, to run under `compute-sanitizer --tool racecheck`: does
cuBLAS report shared-memory hazards without our plugin in the process? (FullyConnected's padded-output tactics
see hazards inside cuBLAS's nvjet_sm90 kernels; records/harness/gpu-recheck-padded-fc-h100.txt.)

    compute-sanitizer --tool racecheck python3 plugins/benchmarks/probes/torch_linear_racecheck.py
"""

import torch
import torch.nn.functional as F  # noqa: N812

SHAPES = ((1, 800, 512), (64, 500, 16), (64, 800, 504), (1, 800, 504))  # (batch, K, padded M)

for n, k, m in SHAPES:
    x = torch.randn(n, k, device="cuda", dtype=torch.float16)
    w = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(m, device="cuda", dtype=torch.float16)
    y = F.linear(x, w, b)
    torch.cuda.synchronize()
    print("F.linear", n, k, m, "finite:", bool(torch.isfinite(y).all()), flush=True)
