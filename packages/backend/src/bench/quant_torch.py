"""PyTorch's side of quant-bench.ts on the same GPU: copy bandwidth (read + write), the f16 GEMV of the decode
shapes (1, 4, 16 rows; the weight rotated over copies that exceed the L2 cache several times, as Rusty's bench
does), tinygemm's int4 GEMV where this PyTorch has it (`_weight_int4pack_mm`, bf16 activations, groups of 64),
and int8 x int8 -> int32 `torch._int_mm` TOPS beside fp16 matmul TFLOP/s at 4096^3. Prints one JSON object.

    python3 quant_torch.py [--reps 20] [--quick]
"""
import argparse
import json
import math

import torch
from torch_timing import timed  # beside this script

p = argparse.ArgumentParser()
p.add_argument("--reps", type=int, default=20)
p.add_argument("--quick", action="store_true")
a = p.parse_args()
dev = "cuda"
ROTATE = 400e6


out = {"torch": torch.__version__, "device": torch.cuda.get_device_name(0)}

n = 1 << 28
src = torch.empty(n, device=dev, dtype=torch.float32)
dst = torch.empty_like(src)
t = timed(lambda: dst.copy_(src), a.reps)
out["copy"] = {"bytes": 8 * n, "GBps": 8 * n / t / 1e9}
del src, dst

shapes = [(256, 512)] if a.quick else [(4096, 4096), (11008, 4096), (4096, 11008), (14336, 4096), (5632, 2048), (2048, 5632), (2048, 2048), (256, 2048)]
rows = []
for N, K in shapes:
    copies = max(2, min(64, math.ceil(ROTATE / (2 * N * K))))
    ws = [torch.randn(N, K, device=dev, dtype=torch.float16) * 0.02 for _ in range(copies)]
    int4 = None
    int4_err = ""
    try:
        wb = [w.to(torch.bfloat16) for w in ws]
        packed = []
        for w in wb:
            # symmetric int4 per group of 64 as tinygemm takes it: uint4 codes + (scale, zero) per group
            g = w.float().reshape(N, K // 64, 64)
            s = g.abs().amax(-1, keepdim=True).clamp(min=1e-8) / 7
            q = (g / s).round().clamp(-8, 7).to(torch.int32) + 8
            q = q.reshape(N, K)
            sz = torch.stack([s.squeeze(-1), torch.zeros_like(s.squeeze(-1))], -1)  # (scale, zero)
            sz = sz.transpose(0, 1).contiguous().to(torch.bfloat16)  # [K/64, N, 2]
            qp = (q[:, ::2] << 4 | q[:, 1::2]).to(torch.uint8)
            packed.append((torch._convert_weight_to_int4pack(qp, 8), sz))
        int4 = packed
        del wb
    except Exception as e:  # noqa: BLE001
        int4_err = str(e)[:200]
    for M in (1, 4, 16):
        x = torch.randn(M, K, device=dev, dtype=torch.float16)
        i = [0]

        def f16():
            i[0] += 1
            return torch.nn.functional.linear(x, ws[i[0] % copies])

        t = timed(f16, a.reps)
        read = 2 * N * K + 2 * M * K
        row = {"N": N, "K": K, "M": M, "f16": {"us": t * 1e6, "GBps": read / t / 1e9}}
        if int4 is not None:
            xb = x.to(torch.bfloat16)
            j = [0]

            def i4():
                j[0] += 1
                qp, sz = int4[j[0] % copies]
                return torch._weight_int4pack_mm(xb, qp, 64, sz)

            try:
                t4 = timed(i4, a.reps)
                r4 = N * K // 2 + 4 * N * (K // 64) + 2 * M * K
                row["int4_tinygemm"] = {"us": t4 * 1e6, "GBps": r4 / t4 / 1e9}
            except Exception as e:  # noqa: BLE001
                row["int4_tinygemm"] = {"error": str(e)[:200]}
        else:
            row["int4_tinygemm"] = {"error": int4_err}
        rows.append(row)
    del ws, int4
    torch.cuda.empty_cache()
out["gemv"] = rows

S = 256 if a.quick else 4096
ai = torch.randint(-127, 128, (S, S), device=dev, dtype=torch.int8)
bi = torch.randint(-127, 128, (S, S), device=dev, dtype=torch.int8)
t = timed(lambda: torch._int_mm(ai, bi.t()), a.reps)
out["int_mm"] = {"shape": [S, S, S], "TOPS": 2 * S**3 / t / 1e12}
ah = torch.randn(S, S, device=dev, dtype=torch.float16)
bh = torch.randn(S, S, device=dev, dtype=torch.float16)
t = timed(lambda: ah @ bh.t(), a.reps)
out["f16_matmul"] = {"shape": [S, S, S], "TFLOPs": 2 * S**3 / t / 1e12}
print(json.dumps(out, indent=1))
