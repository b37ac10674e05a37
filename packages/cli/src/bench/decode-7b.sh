#!/usr/bin/env bash
# Decode speed on the GPU machine: the Mistral-7B-shaped random model of qlora-7b.sh (made here with torch if
# missing), `rusty generate` greedy for N new tokens with the weights quantized at load (DECODE_RUNS, default
# "nf4 int4 bf16"; bf16 = --dtype bf16, no quantization), each run's "then X tokens/s" (the rate after the first
# token, as the CLI prints it); then HF transformers `generate` on the same directory in bf16 (decode_torch.py).
# Prints one JSON line per run. From the repository root, packed as for qlora-7b.sh:
#   bash packages/cli/src/bench/decode-7b.sh [work_dir] [tokens]     # carry .gpu and tmp/qlora-assets
set -uo pipefail
work=${1:-tmp/qlora-7b}
n=${2:-128}
entry=${RUSTY_ENTRY:-bin}
runs=${DECODE_RUNS:-nf4 int4 bf16}
here=$(dirname "$0")
tok=${QLORA_TOKENIZER:-tmp/qlora-assets/tokenizer.json}
prompt='The quick brown fox jumps over the lazy dog. Once upon a time, in a land far away, there lived'
mkdir -p "$work"
[ -f "$work/model/config.json" ] || python3 "$here/qlora-make-model.py" model 7b "$work/model" --tokenizer "$tok" >&2
for run in $runs; do
  case "$run" in bf16) extra=(--dtype bf16) ;; *) extra=(--quantize "$run") ;; esac
  t0=$(date +%s.%N)
  err=$(timeout "${RUN_TIMEOUT:-300}" bash .gpu/run.sh "$entry" generate --model "$work/model" --prompt "$prompt" -n "$n" --temperature 0 --no-echo "${extra[@]}" 2>&1 >/dev/null)
  rc=$?
  t1=$(date +%s.%N)
  line=$(printf '%s\n' "$err" | grep '^generate: ' | tail -1)
  [ -n "$line" ] || printf '%s\n' "$err" | tail -n 5 >&2
  python3 -c '
import json, re, sys
run, rc, line, wall = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
m = re.search(r"generate: (\d+) tokens in .*?then ([0-9.]+) tokens/s", line)
print(json.dumps({"side": "rusty", "run": run, "rc": rc, "tokens": int(m.group(1)) if m else None,
                  "tokens_per_s_after_first": float(m.group(2)) if m else None, "line": line, "wall_s": round(wall, 1)}))
' "$run" "$rc" "$line" "$(python3 -c "print($t1 - $t0)")"
done
timeout "${RUN_TIMEOUT:-300}" python3 "$here/decode_torch.py" "$work/model" -n "$n"
