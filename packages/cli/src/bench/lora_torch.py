"""PyTorch + PEFT side of the LoRA benchmark of issue 13 (run on the GPU machine beside `rusty finetune`).

  python3 lora_torch.py --model <dir> --mode fp32|bf16 [--batch 4 --seq-len 512 --steps 25 --warmup 5 ...]

LoRA r=16, alpha 32, no dropout, on all seven projections (q, k, v, o, gate, up, down) of the HF model in <dir>,
AdamW (weight decay 0, constant lr), the gradient norm clipped to --clip (1.0, as `rusty finetune`'s default;
0: none), batch x seq-len random token ids with labels = inputs (the causal-LM loss shifts them), SDPA attention.
fp32: the model in float32, full-precision matmuls (no TF32). bf16: the frozen model in bfloat16, the adapters in
float32 (PEFT's default upcast), the forward under torch.autocast(bfloat16) (what `--mixed-precision bf16` means
for a PyTorch user). Every step ends in a CUDA synchronize; tokens/s is the median over the steps after --warmup.
Peak memory: torch.cuda.max_memory_allocated / max_memory_reserved, reset after the model is loaded (weights
included, loading's transients not), as `rusty finetune` resets its peak when training starts.
Prints one JSON line.
"""
import argparse, json, statistics, time

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--mode", choices=["fp32", "fp32-high", "bf16"], required=True, help="fp32-high: fp32 with TF32 matmuls (set_float32_matmul_precision('high'))")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq-len", type=int, default=512)
    ap.add_argument("--steps", type=int, default=25, help="timed steps after the warm-up")
    ap.add_argument("--warmup", type=int, default=5, help="steps run before timing")
    ap.add_argument("--r", type=int, default=16)
    ap.add_argument("--alpha", type=float, default=32)
    ap.add_argument("--lr", type=float, default=2e-4)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--attn", default="sdpa", help="attn_implementation (sdpa, eager)")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()

    import peft
    import torch
    import transformers
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    # fp32: no TF32 (Rusty's default f32 path is full f32); fp32-high: TF32, beside Rusty's --matmul-precision high
    torch.set_float32_matmul_precision("high" if a.mode == "fp32-high" else "highest")
    torch.manual_seed(a.seed)
    dev = torch.device("cuda")
    dtype = torch.bfloat16 if a.mode == "bf16" else torch.float32
    t0 = time.time()
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=dtype, attn_implementation=a.attn).to(dev)
    model.config.use_cache = False
    model = get_peft_model(model, LoraConfig(r=a.r, lora_alpha=a.alpha, lora_dropout=0.0, target_modules=TARGETS, bias="none", task_type="CAUSAL_LM"))
    load_s = time.time() - t0
    params = [p for p in model.parameters() if p.requires_grad]
    trainable = sum(p.numel() for p in params)
    adapter_dtypes = sorted({str(p.dtype).replace("torch.", "") for p in params})
    opt = torch.optim.AdamW(params, lr=a.lr, weight_decay=0.0)
    vocab = model.config.vocab_size
    gen = torch.Generator(device=dev).manual_seed(a.seed)
    model.train()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()

    def step() -> torch.Tensor:
        ids = torch.randint(0, vocab, (a.batch, a.seq_len), device=dev, generator=gen)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=a.mode == "bf16"):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        if a.clip > 0:
            torch.nn.utils.clip_grad_norm_(params, a.clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    times, losses = [], []
    for i in range(a.warmup + a.steps):
        torch.cuda.synchronize()
        s = time.perf_counter()
        loss = step()
        torch.cuda.synchronize()
        if i >= a.warmup:
            times.append(time.perf_counter() - s)
        losses.append(loss.item())
    tokens = a.batch * a.seq_len
    med = statistics.median(times)
    gib = 1024**3
    print(json.dumps({
        "side": "pytorch", "mode": a.mode if a.mode != "bf16" else "bf16-autocast", "attn": a.attn,
        "tokens_per_s": round(tokens / med, 1), "step_ms": round(med * 1000, 2), "steps_timed": len(times), "warmup": a.warmup,
        "peak_allocated_gib": round(torch.cuda.max_memory_allocated() / gib, 3), "peak_reserved_gib": round(torch.cuda.max_memory_reserved() / gib, 3),
        "peak_allocated_bytes": torch.cuda.max_memory_allocated(), "peak_reserved_bytes": torch.cuda.max_memory_reserved(),
        "batch": a.batch, "seq_len": a.seq_len, "r": a.r, "alpha": a.alpha, "lr": a.lr, "clip": a.clip, "trainable": trainable,
        "adapter_dtypes": adapter_dtypes, "first_loss": round(losses[0], 4), "last_loss": round(losses[-1], 4), "load_s": round(load_s, 1),
        "gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "transformers": transformers.__version__, "peft": peft.__version__,
    }), flush=True)


if __name__ == "__main__":
    main()
