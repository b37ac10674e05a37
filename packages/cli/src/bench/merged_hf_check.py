"""Issue 11 check on the GPU machine: `rusty finetune --targets all --merge` on every architecture fixture, then
the merged directory loaded by HF transformers gives Rusty's logits.

  python3 merged_hf_check.py prepare <fixtures dir> <work dir>   # copies the fixtures, adds a 256-token
                                                                  # byte-level tokenizer.json and data.jsonl
  python3 merged_hf_check.py compare <work dir>                   # after finetune + dump-logits (see .sh)
Prints one JSON object per architecture.
"""
import json, shutil, sys
from pathlib import Path

ARCHS = ["llama-tiny", "mistral-tiny", "qwen2-tiny", "qwen3-tiny", "gemma3-tiny"]


def byte_tokenizer(path: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    # GPT-2's byte-to-unicode table: 256 tokens, one per byte, no merges (the fixtures' vocab is 256)
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b); cs.append(256 + n); n += 1
    vocab = {chr(c): b for b, c in zip(bs, cs)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.save(str(path))


def prepare(fixtures: Path, work: Path) -> None:
    work.mkdir(parents=True, exist_ok=True)
    byte_tokenizer(work / "tokenizer.json")
    lines = [{"text": f"rusty trains {a} models on the gpu through webgpu; step {i}."} for i in range(40) for a in ARCHS]
    (work / "data.jsonl").write_text("".join(json.dumps(l) + "\n" for l in lines))
    for a in ARCHS:
        d = work / "models" / a
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
        for f in ["config.json", "model.safetensors", "inputs.json"]:
            shutil.copy(fixtures / a / f, d / f)
        shutil.copy(work / "tokenizer.json", d / "tokenizer.json")


def compare(work: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM
    for a in ARCHS:
        merged = work / "ft" / a / "merged"
        ids = torch.tensor(json.loads((work / "models" / a / "inputs.json").read_text())["input_ids"])
        out = {"arch": a}
        try:
            m = AutoModelForCausalLM.from_pretrained(merged, dtype=torch.float64).eval()
            base = AutoModelForCausalLM.from_pretrained(work / "models" / a, dtype=torch.float64).eval()
            with torch.no_grad():
                hf = m(ids).logits.flatten()
                hf_base = base(ids).logits.flatten()
            ours = torch.tensor(json.loads((work / "ft" / a / "rusty-logits.json").read_text())["logits"], dtype=torch.float64)
            out["class"] = type(m).__name__
            out["rel_err_vs_rusty"] = ((hf - ours).abs().max() / hf.abs().max()).item()
            # the fine-tune changed the model (the merged weights are not the base's)
            out["rel_change_vs_base"] = ((hf - hf_base).abs().max() / hf_base.abs().max()).item()
            out["ok"] = out["rel_err_vs_rusty"] < 1e-4 and out["rel_change_vs_base"] > 1e-3
        except Exception as e:  # report every architecture, whatever fails
            out["error"] = repr(e)
            out["ok"] = False
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "prepare":
        prepare(Path(sys.argv[2]), Path(sys.argv[3]))
    else:
        compare(Path(sys.argv[2]))
