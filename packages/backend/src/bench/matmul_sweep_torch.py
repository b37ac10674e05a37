"""PyTorch's side of matmul-sweep.ts on the same GPU: the twelve products of the benchmark training step
(4096 tokens, hidden 512, intermediate 1376, vocab 8192; forward NT, input-gradient NN, weight-gradient TN) in
fp32 with TF32 off, operands transposed like Rusty's (A stored [K, M] for TN, B stored [N, K] for NT), plus
4096^3. Kernel time from CUDA events, best of 3 rounds of `reps`. Prints one JSON object (with the step's matmul
time: each product's time times its count per step).

    python3 matmul_sweep_torch.py [--reps 20]
"""
import argparse
import json

import torch
from torch_timing import timed  # beside this script

p = argparse.ArgumentParser()
p.add_argument("--reps", type=int, default=20)
a = p.parse_args()
torch.backends.cuda.matmul.allow_tf32 = False
torch.set_float32_matmul_precision("highest")
dev = "cuda"

# name, M, N, K, layout, count per step: the same table as STEP_PRODUCTS in matmul-sweep.ts
PRODUCTS = [
    ("fwd-qkvo", 4096, 512, 512, "NT", 32), ("dx-qkvo", 4096, 512, 512, "NN", 32), ("dw-qkvo", 512, 512, 4096, "TN", 32),
    ("fwd-gateup", 4096, 1376, 512, "NT", 16), ("dx-gateup", 4096, 512, 1376, "NN", 16),
    ("dw-gateup", 1376, 512, 4096, "TN", 16), ("fwd-down", 4096, 512, 1376, "NT", 8),
    ("dx-down", 4096, 1376, 512, "NN", 8), ("dw-down", 512, 1376, 4096, "TN", 8),
    ("fwd-lmhead", 4096, 8192, 512, "NT", 1), ("dx-lmhead", 4096, 512, 8192, "NN", 1),
    ("dw-lmhead", 8192, 512, 4096, "TN", 1),
]


def run(M, N, K, layout):
    x = torch.rand(K, M, device=dev).t() if layout[0] == "T" else torch.rand(M, K, device=dev)
    y = torch.rand(N, K, device=dev).t() if layout[1] == "T" else torch.rand(K, N, device=dev)
    c = torch.empty(M, N, device=dev)
    return timed(lambda: torch.matmul(x, y, out=c), a.reps)


rows, step = [], 0.0
for name, M, N, K, layout, count in PRODUCTS:
    t = run(M, N, K, layout)
    step += count * t
    rows.append({"product": name, "shape": f"{M}x{N}x{K} {layout}", "us": round(t * 1e6, 1),
                 "tflops": round(2 * M * N * K / t / 1e12, 1)})
sq = {l: round(2 * 4096 ** 3 / run(4096, 4096, 4096, l) / 1e12, 1) for l in ["NN", "NT", "TN"]}
print(json.dumps({"bench": "matmul-sweep-torch", "torch": torch.__version__, "device": torch.cuda.get_device_name(),
                  "stepMatmulMs": round(step * 1e3, 2), "square4096Tflops": sq, "products": rows}))
