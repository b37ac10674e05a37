"""PyTorch baselines for attention-bench.ts, forward, backward and forward+backward at B=8, H=12, T=S=1024,
D=64 (TF32 off): `eager` is fp32 attention as matmul, causal mask, softmax, matmul (no fused kernel); `sdpa`
is torch.nn.functional.scaled_dot_product_attention (its fused kernels: memory-efficient attention in fp32,
FlashAttention in bf16 / fp16). Layout [B, T, H, D] like Rusty's; the transposes to [B, H, T, D] are views.
Prints one JSON object per (impl, dtype).

    python3 attention_torch.py [--B 8] [--H 12] [--T 1024] [--D 64] [--reps 20] [--noncausal]
                               [--runs eager:fp32,sdpa:fp32,sdpa:bf16,sdpa:fp16]
"""
import argparse
import json
import math

import torch
from torch_timing import timed  # beside this script

p = argparse.ArgumentParser()
p.add_argument("--B", type=int, default=8)
p.add_argument("--H", type=int, default=12)
p.add_argument("--T", type=int, default=1024)
p.add_argument("--D", type=int, default=64)
p.add_argument("--reps", type=int, default=20)
p.add_argument("--noncausal", action="store_true")
p.add_argument("--runs", default="eager:fp32")
a = p.parse_args()

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch.set_float32_matmul_precision("highest")
dev = "cuda"
B, H, T, D = a.B, a.H, a.T, a.D
causal = not a.noncausal
scale = 1.0 / math.sqrt(D)
mask = torch.ones(T, T, device=dev, dtype=torch.bool).triu(1)
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def eager(q, k, v):
    qh, kh, vh = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # [B, H, T, D]
    s = (qh @ kh.transpose(-2, -1)) * scale
    if causal:
        s = s.masked_fill(mask, float("-inf"))
    p = torch.softmax(s, dim=-1)
    return (p @ vh).transpose(1, 2)  # [B, T, H, D]


def sdpa(q, k, v):
    o = torch.nn.functional.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal)
    return o.transpose(1, 2)


for run in a.runs.split(","):
    impl, dt = run.split(":")
    attention = {"eager": eager, "sdpa": sdpa}[impl]
    dtype = DTYPES[dt]
    g = torch.Generator(device=dev).manual_seed(0)
    q = torch.randn(B, T, H, D, device=dev, generator=g).to(dtype).requires_grad_()
    k = torch.randn(B, T, H, D, device=dev, generator=g).to(dtype).requires_grad_()
    v = torch.randn(B, T, H, D, device=dev, generator=g).to(dtype).requires_grad_()
    dout = torch.randn(B, T, H, D, device=dev, generator=g).to(dtype)
    torch.cuda.reset_peak_memory_stats()

    def fwd():
        with torch.no_grad():
            attention(q, k, v)

    o = attention(q, k, v)

    def bwd():
        torch.autograd.grad(o, (q, k, v), dout, retain_graph=True)

    def fwd_bwd():
        out = attention(q, k, v)
        torch.autograd.grad(out, (q, k, v), dout)

    fwd_ms, bwd_ms, both_ms = (timed(f, a.reps) * 1e3 for f in (fwd, bwd, fwd_bwd))
    # Same useful-work convention as attention-bench.ts (FlashAttention's): fwd 4*B*H*T*S*D, halved when causal.
    fwd_flop = 4 * B * H * T * T * D / (2 if causal else 1)
    bwd_flop = 2.5 * fwd_flop
    print(json.dumps({
        "bench": f"pytorch {impl} attention {dt} (tf32 off)",
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "B": B, "H": H, "T": T, "S": T, "D": D, "causal": causal, "reps": a.reps,
        "fwd_ms": round(fwd_ms, 4), "bwd_ms": round(bwd_ms, 4), "fwd_bwd_ms": round(both_ms, 4),
        "fwd_tflops": round(fwd_flop / fwd_ms / 1e9, 3),
        "bwd_tflops": round(bwd_flop / bwd_ms / 1e9, 3),
        "fwd_bwd_tflops": round((fwd_flop + bwd_flop) / both_ms / 1e9, 3),
        "peak_mem_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2),
    }), flush=True)
