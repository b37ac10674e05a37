#!/usr/bin/env bash
# Issue 11 on the GPU machine (run from the repository root after packing the bundle):
#   ../shared/gpu/pack.sh packages/cli/src/bin.ts packages/loader/src/bench/dump-logits.ts
#   mkdir -p tmp && cp -r ../shared/fixtures tmp/fixtures      # the GPU machine sees only the repository
#   bash packages/cli/src/bench/merged-hf-check.sh tmp/fixtures
# For each architecture fixture: rusty finetune --targets all --merge, Rusty's logits of the merged model, and
# the same merged directory loaded by transformers (float64): one JSON line per architecture.
set -euo pipefail
fixtures=${1:?fixtures dir}
work=${2:-tmp/merged-check}
here=$(dirname "$0")
python3 "$here/merged_hf_check.py" prepare "$fixtures" "$work"
for a in llama-tiny mistral-tiny qwen2-tiny qwen3-tiny gemma3-tiny; do
  bash .gpu/run.sh bin finetune --model "$work/models/$a" --data "$work/data.jsonl" --out "$work/ft/$a" \
    --targets all --r 4 --alpha 8 --lr 1e-2 --steps 30 --batch-size 4 --seq-len 16 --merge >"$work/ft-$a.log" 2>&1 \
    || { echo "{\"arch\": \"$a\", \"finetune_failed\": true}"; tail -5 "$work/ft-$a.log"; continue; }
  bash .gpu/run.sh dump-logits "$work/ft/$a/merged" "$work/models/$a/inputs.json" "$work/ft/$a/rusty-logits.json"
done
python3 "$here/merged_hf_check.py" compare "$work"
