#!/usr/bin/env bash
# Issue 13's LoRA benchmark on the GPU machine, Rusty and PyTorch + PEFT in one call: a random-weight HF Llama
# (TinyLlama 1.1B's shape, bf16; make_llama_dir.py, through transformers), then `rusty finetune` in f32,
# --mixed-precision bf16 and --mixed-precision f16, then PyTorch fp32 and bf16 autocast (lora_torch.py), all with
# LoRA r 16 / alpha 32 on the seven projections, batch 4 x 512, AdamW at a constant lr 2e-4, no weight decay,
# gradient norm clipped to 1, 5 warm-up steps then STEPS timed steps (medians). One JSON line per run, then one
# with issue 13's ratios (Rusty f16 / PyTorch bf16 and Rusty f32 / PyTorch fp32 tokens/s and peak memory, host
# encoding against the step time).
# From the repository root:
#   pnpm build && ../shared/gpu/pack.sh packages/cli/src/bench/lora-1b-cli.ts      # then carry .gpu
#   bash packages/cli/src/bench/lora-1b.sh [tinyllama|small] [STEPS=25] [work dir=tmp/lora-1b]
# LORA_RUNS picks the runs (default "rusty-f32 rusty-bf16 rusty-f16 torch-fp32 torch-bf16"; also rusty-f32high: f32 with
# --matmul-precision high, and torch-fp32-high: fp32 with TF32); RUN_TIMEOUT (s, default
# 400) bounds each run.
# Rusty's numbers are the `summary` line of its metrics.jsonl: medians over the steps after its 5 warm-up steps
# (its last step, which has no next step's encoding in its interval, is run but not counted: it runs STEPS + 6).
set -uo pipefail
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1  # no network on the GPU machine: a hub lookup would hang the PyTorch runs
shape=${1:-tinyllama}
steps=${2:-25}
work=${3:-tmp/lora-1b}
runs=${LORA_RUNS:-rusty-f32 rusty-bf16 rusty-f16 torch-fp32 torch-bf16}
here=$(dirname "$0")
export PYTHONUNBUFFERED=1
mkdir -p "$work"
results="$work/results.jsonl"; : >"$results"
python3 "$here/make_llama_dir.py" --shape "$shape" --out "$work/model" --corpus "$work/corpus.txt" || exit 1
bash .gpu/run.sh lora-1b-cli devices --json >"$work/devices.json" 2>"$work/devices.log" &&
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(json.dumps({"adapter": " / ".join(x for x in [d.get("vendor"), d.get("architecture"), d.get("description")] if x), "paths": d.get("paths")}))' "$work/devices.json"

common=(--targets all --r 16 --alpha 32 --batch-size 4 --seq-len 512 --steps $((steps + 6)) --lr 2e-4 --warmup 0
  --lr-schedule constant --weight-decay 0 --grad-clip 1 --val-split 0 --seed 0 --log-every 5 --overwrite)

rusty_line() { # label, out dir, log: the summary line of metrics.jsonl as one JSON line
  python3 - "$@" <<'PY'
import json, sys
label, out, log = sys.argv[1:4]
recs = [json.loads(l) for l in open(f"{out}/metrics.jsonl") if l.strip()]
s = [r for r in recs if r.get("kind") == "summary"][-1]
train = [r for r in recs if r.get("kind") == "train"]
gib = 1024**3
print(json.dumps({
    "side": "rusty", "mode": label, "tokens_per_s": round(s["tokensPerSec"], 1), "step_ms": round(s["stepMs"], 2),
    "host_ms_per_step": round(s["hostMsPerStep"], 2), "dispatches_per_step": s["dispatchesPerStep"],
    "steady_steps": s["steadySteps"], "peak_allocated_gib": round(s["peakBytes"] / gib, 3), "peak_reserved_gib": round(s["peakReservedBytes"] / gib, 3),
    "peak_allocated_bytes": s["peakBytes"], "peak_reserved_bytes": s["peakReservedBytes"],
    "first_loss": round(train[0]["loss"], 4), "last_loss": round(train[-1]["loss"], 4), "run_s": round(s["seconds"], 1), "log": log,
}))
PY
}

for run in $runs; do
  case $run in
    rusty-*)
      mp=${run#rusty-}; extra=()
      # rusty-f32high: f32 with --matmul-precision high (three f16 tensor-core products per f32 product)
      [ "$mp" = f32high ] && { mp=no; extra=(--matmul-precision high); }
      [ "$mp" = f32 ] && mp=no
      out="$work/$run"; log="$work/$run.log"
      # a run that outlives RUN_TIMEOUT gets SIGUSR2 first: node writes a diagnostic report (JS and native stacks)
      # into the work dir, then it is killed
      if timeout -s USR2 -k 20 "${RUN_TIMEOUT:-400}" env NODE_OPTIONS="--report-on-signal --report-signal=SIGUSR2 --report-directory=$work" \
        bash .gpu/run.sh lora-1b-cli finetune --model "$work/model" --data "$work/corpus.txt" --out "$out" "${common[@]}" \
        --mixed-precision "$mp" "${extra[@]}" >"$log" 2>&1; then
        rusty_line "${run#rusty-}" "$out" "$log" | tee -a "$results"
      else
        echo "{\"side\": \"rusty\", \"mode\": \"${run#rusty-}\", \"failed\": true, \"log\": \"$log\"}"; tail -n 12 "$log"
      fi ;;
    torch-*)
      timeout "${RUN_TIMEOUT:-400}" python3 "$here/lora_torch.py" --model "$work/model" --mode "${run#torch-}" --steps "$steps" --warmup 5 2>"$work/$run.log" | tee -a "$results" ||
        { echo "{\"side\": \"pytorch\", \"mode\": \"${run#torch-}\", \"failed\": true}"; tail -n 5 "$work/$run.log"; } ;;
    *) echo "lora-1b.sh: unknown run '$run'" >&2; exit 2 ;;
  esac
done

python3 - "$results" <<'PY'
import json, sys
runs = {f"{r['side']}-{r['mode']}": r for r in map(json.loads, open(sys.argv[1])) if "tokens_per_s" in r}
out = {}
for ours, theirs in [("rusty-f16", "pytorch-bf16-autocast"), ("rusty-bf16", "pytorch-bf16-autocast"), ("rusty-f32", "pytorch-fp32"),
                     ("rusty-f32high", "pytorch-fp32"), ("rusty-f32high", "pytorch-fp32-high")]:
    a, b = runs.get(ours), runs.get(theirs)
    if a and b:
        out[f"{ours}/{theirs}"] = {"tokens_per_s": round(a["tokens_per_s"] / b["tokens_per_s"], 3),
                                   "peak_allocated": round(a["peak_allocated_bytes"] / b["peak_allocated_bytes"], 3),
                                   "peak_reserved": round(a["peak_reserved_bytes"] / b["peak_reserved_bytes"], 3)}
for k, r in runs.items():
    if k.startswith("rusty-"):
        out[f"{k} host/step"] = round(r["host_ms_per_step"] / r["step_ms"], 3)
print(json.dumps({"ratios": out}))
PY
