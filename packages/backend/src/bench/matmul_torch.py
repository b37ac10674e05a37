"""PyTorch's side of matmul-tc-bench.ts on the same GPU: the same products (4096^3, 8192x2048x5632,
8192x5632x2048 in NN, NT, TN; LoRA r=16 skinny products at 2048 tokens x 2048 hidden) in fp16 (cuBLAS tensor
cores, fp32 accumulation), bf16 and fp32 (TF32 off). Operands are views of one buffer transposed like Rusty's
(A stored [K, M] for TN, B stored [N, K] for NT). Prints one JSON object.

    python3 matmul_torch.py [--reps 20]
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


def run(label, M, N, K, layout, dtype):
    a = torch.rand(K, M, device=dev, dtype=dtype).t() if layout[0] == "T" else torch.rand(M, K, device=dev, dtype=dtype)
    b = torch.rand(N, K, device=dev, dtype=dtype).t() if layout[1] == "T" else torch.rand(K, N, device=dev, dtype=dtype)
    c = torch.empty(M, N, device=dev, dtype=dtype)
    t = timed(lambda: torch.matmul(a, b, out=c), a_.reps)
    return {"label": label, "M": M, "N": N, "K": K, "layout": layout, "dtype": str(dtype).replace("torch.", ""),
            "us": round(t * 1e6, 1), "tflops": round(2 * M * N * K / t / 1e12, 2)}


a_ = a
rows = []
for M, N, K in [(4096, 4096, 4096), (8192, 2048, 5632), (8192, 5632, 2048)]:
    for layout in ["NN", "NT", "TN"]:
        for dt in [torch.float16, torch.bfloat16] + ([torch.float32] if M == 4096 else []):
            rows.append(run("big", M, N, K, layout, dt))
T, H, r = 2048, 2048, 16
for label, M, N, K, layout in [("x A^T", T, r, H, "NT"), ("u B^T", T, H, r, "NT"), ("dY B", T, r, H, "NN"),
                               ("dY^T u (dB)", H, r, T, "TN"), ("du^T x (dA)", r, H, T, "TN"), ("du A (dx)", T, H, r, "NN")]:
    for dt in [torch.float32, torch.float16]:
        rows.append(run("lora " + label, M, N, K, layout, dt))
print(json.dumps({"torch": torch.__version__, "device": torch.cuda.get_device_name(), "matmul": rows}))
