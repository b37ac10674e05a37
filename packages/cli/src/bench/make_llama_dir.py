"""A random-weight Hugging Face Llama directory for the LoRA benchmark of issue 13, made with transformers, plus a
tokenizer and a text corpus that `rusty finetune` accepts.

  python3 make_llama_dir.py --shape tinyllama --out <dir> --corpus <file.txt>

--shape tinyllama: TinyLlama 1.1B's shape (hidden 2048, intermediate 5632, 22 layers, 32 heads / 4 KV heads, vocab
32000), weights in bf16 (a 2.2 GB model.safetensors); --shape small: the same vocabulary on 4 layers of width 256,
for a quick check of the scripts. Weights are drawn on the GPU when there is one (seeded; initializer_range 0.02).
The tokenizer is byte-level (256 ids, one per byte; `rusty finetune` needs a tokenizer.json in the model directory
and tokenizes the text corpus itself): the model's 32000-row embedding and LM head are what the benchmark times,
whatever ids the text gives. The corpus is random words, enough for any number of 4 x 512 windows (epochs roll over).
Prints one JSON line describing what it wrote.
"""
import argparse, json, random, sys, time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from merged_hf_check import byte_tokenizer  # noqa: E402  (the byte-level tokenizer.json the fixtures use)

SHAPES = {
    "tinyllama": dict(hidden_size=2048, intermediate_size=5632, num_hidden_layers=22, num_attention_heads=32, num_key_value_heads=4),
    "small": dict(hidden_size=256, intermediate_size=704, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=2),
}


def make_model(shape: str, out: Path, seed: int) -> dict:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=32000, max_position_embeddings=2048, rms_norm_eps=1e-5, rope_theta=10000.0, hidden_act="silu",
        tie_word_embeddings=False, initializer_range=0.02, bos_token_id=1, eos_token_id=2, **SHAPES[shape],
    )
    torch.manual_seed(seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    with torch.device(device):
        model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    n = sum(p.numel() for p in model.parameters())
    del model
    return {"parameters": n, "device": device}


def make_corpus(path: Path, n_bytes: int, seed: int) -> None:
    rng = random.Random(seed)
    words = ["gpu", "tensor", "matrix", "rank", "adapter", "weights", "kernel", "shader", "lora", "gradient", "batch", "token",
             "the", "of", "and", "a", "to", "in", "is", "for", "on", "with", "step", "loss", "model", "layer", "memory", "cores"]
    lines, size = [], 0
    while size < n_bytes:
        line = " ".join(rng.choice(words) for _ in range(rng.randint(8, 24))) + ".\n"
        lines.append(line)
        size += len(line)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(lines))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", choices=sorted(SHAPES), default="tinyllama")
    ap.add_argument("--out", type=Path, required=True, help="the model directory to write")
    ap.add_argument("--corpus", type=Path, required=True, help="the text file to write")
    ap.add_argument("--corpus-bytes", type=int, default=400_000)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    t0 = time.time()
    info = make_model(a.shape, a.out, a.seed)
    byte_tokenizer(a.out / "tokenizer.json")
    make_corpus(a.corpus, a.corpus_bytes, a.seed)
    files = sorted(p.name for p in a.out.iterdir())
    print(json.dumps({"made": str(a.out), "shape": a.shape, **SHAPES[a.shape], "vocab_size": 32000, "dtype": "bf16", **info,
                      "files": files, "corpus": str(a.corpus), "corpus_bytes": a.corpus.stat().st_size, "seconds": round(time.time() - t0, 1)}), flush=True)


if __name__ == "__main__":
    main()
