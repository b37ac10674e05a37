#!/usr/bin/env bash
# Issue 14 on the GPU machine: QLoRA against LoRA on the bf16 base through `rusty finetune`, on the 1.1B
# configuration (TinyLlama's shape, random bf16 weights made here with torch), batch 4 x 512, LoRA r 16 / alpha 32
# on all seven projections, the same steps for both. Prints one JSON object (qlora-report.py): tokens/s and peak
# GPU memory of each run, and the nf4 / bf16 ratios. From the repository root, after packing the CLI:
#   pnpm build && ../shared/gpu/pack.sh packages/cli/src/bin.ts       # (or an entry of your own name: RUSTY_ENTRY)
#   mkdir -p tmp/qlora-assets && cp ../shared/fixtures/tokenizers/metaspace.tokenizer.json tmp/qlora-assets/tokenizer.json
#   bash packages/cli/src/bench/qlora-1b.sh [work_dir] [steps]      # carry .gpu and tmp/qlora-assets
# QLORA_RUNS picks the runs (default "bf16 nf4 bf16-ckpt nf4-ckpt"; -ckpt adds --gradient-checkpointing).
set -euo pipefail
work=${1:-tmp/qlora-1b}
steps=${2:-30}
entry=${RUSTY_ENTRY:-bin}
runs=${QLORA_RUNS:-bf16 nf4 bf16-ckpt nf4-ckpt}
here=$(dirname "$0")
tok=${QLORA_TOKENIZER:-tmp/qlora-assets/tokenizer.json}
mkdir -p "$work"
[ -f "$work/model/config.json" ] || python3 "$here/qlora-make-model.py" model 1b "$work/model" --tokenizer "$tok" >&2
[ -f "$work/corpus.txt" ] || python3 "$here/qlora-make-model.py" corpus "$work/corpus.txt" --kb 400 >&2
bash "$here/qlora-run.sh" "$work" "$work/model" "$steps" "$entry" $runs
python3 "$here/qlora-report.py" "$work" $runs
