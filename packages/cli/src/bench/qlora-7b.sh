#!/usr/bin/env bash
# Issue 14 on the GPU machine: a Mistral-7B-shaped model (hidden 4096, intermediate 14336, 32 layers, 32 heads /
# 8 KV heads, vocab 32000; random bf16 weights made here with torch, saved as safetensors shards) loaded by
# `rusty finetune --quantize nf4` and fine-tuned for 20 steps (batch 4 x 512, LoRA r 16 on all seven projections,
# frozen embeddings and LM head in bf16). Prints one JSON object (qlora-report.py): tokens/s and peak GPU memory.
# From the repository root, packed as for qlora-1b.sh:
#   bash packages/cli/src/bench/qlora-7b.sh [work_dir] [steps]     # carry .gpu and tmp/qlora-assets
# QLORA_RUNS picks the runs (default "nf4"; e.g. "nf4 nf4-ckpt").
set -euo pipefail
work=${1:-tmp/qlora-7b}
steps=${2:-20}
entry=${RUSTY_ENTRY:-bin}
runs=${QLORA_RUNS:-nf4}
here=$(dirname "$0")
tok=${QLORA_TOKENIZER:-tmp/qlora-assets/tokenizer.json}
mkdir -p "$work"
[ -f "$work/model/config.json" ] || python3 "$here/qlora-make-model.py" model 7b "$work/model" --tokenizer "$tok" >&2
[ -f "$work/corpus.txt" ] || python3 "$here/qlora-make-model.py" corpus "$work/corpus.txt" --kb 400 >&2
bash "$here/qlora-run.sh" "$work" "$work/model" "$steps" "$entry" $runs
python3 "$here/qlora-report.py" "$work" $runs
