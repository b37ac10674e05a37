"""PyTorch's side of decode-7b.sh: HF transformers `generate` (greedy, KV cache, eager attention as loaded by
default) on a model directory in bf16, N new tokens forced (min_new_tokens), from a 24-token prompt of fixed ids.
Prints one JSON line: the first token's time and the rate after it, as `rusty generate` reports them.

    python3 decode_torch.py <model_dir> [-n 128]
"""
import argparse
import json
import time

import torch
from transformers import AutoModelForCausalLM


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("model")
    p.add_argument("-n", type=int, default=128)
    a = p.parse_args()
    model = AutoModelForCausalLM.from_pretrained(a.model, torch_dtype=torch.bfloat16).cuda().eval()
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, model.config.vocab_size, (1, 24), generator=g).cuda()

    def run(n: int) -> float:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.no_grad():
            model.generate(ids, max_new_tokens=n, min_new_tokens=n, do_sample=False)
        torch.cuda.synchronize()
        return time.perf_counter() - t0

    run(8)  # warm-up
    first = min(run(1) for _ in range(3))
    total = run(a.n)
    rate = (a.n - 1) / max(1e-9, total - first)
    print(json.dumps({"side": "torch", "run": "bf16", "tokens": a.n, "first_s": round(first, 4), "total_s": round(total, 3),
                      "tokens_per_s_after_first": round(rate, 1), "torch": torch.__version__,
                      "peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2)}))


if __name__ == "__main__":
    main()
