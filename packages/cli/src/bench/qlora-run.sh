#!/usr/bin/env bash
# One `rusty finetune` per run name for qlora-1b.sh / qlora-7b.sh, each with nvidia-smi sampling the GPU's used
# memory every 100 ms:  qlora-run.sh <work_dir> <model_dir> <steps> <entry> <run>...
# A run name is bf16 (--mixed-precision bf16) or nf4 (--quantize nf4 --mixed-precision bf16), optionally with
# -ckpt (--gradient-checkpointing) and -f32 (no --mixed-precision). Each run writes <work_dir>/<run>/: out/ (the
# adapter and metrics.jsonl), log.txt, smi.txt, baseline.txt, wall_s.txt, rc.txt. QLORA_SEQ / QLORA_BATCH
# (default 512 / 4) change the batch, QLORA_ARGS adds flags to every run, RUN_TIMEOUT (s) bounds each run.
set -uo pipefail
work=$1 model=$2 steps=$3 entry=$4
shift 4
q=(--query-gpu=memory.used --format=csv,noheader,nounits -i 0)
has_smi=$(command -v nvidia-smi || true)
for run in "$@"; do
  d="$work/$run"
  rm -rf "$d" && mkdir -p "$d"
  extra=()
  case "$run" in nf4*) extra+=(--quantize nf4) ;; esac
  case "$run" in *-f32*) ;; *) extra+=(--mixed-precision bf16) ;; esac
  case "$run" in *-ckpt*) extra+=(--gradient-checkpointing) ;; esac
  spid=
  if [ -n "$has_smi" ]; then
    nvidia-smi "${q[@]}" >"$d/baseline.txt" 2>/dev/null || true
    # nvidia-smi itself in the background (not a function's subshell), so that the kill below stops it
    nvidia-smi "${q[@]}" -lms 100 >"$d/smi.txt" 2>/dev/null &
    spid=$!
  fi
  t0=$(date +%s.%N)
  # RUN_TIMEOUT (s, default 600) bounds a run; past it node gets SIGUSR2 and writes a diagnostic report into $d
  timeout -s USR2 -k 20 "${RUN_TIMEOUT:-600}" env NODE_OPTIONS="--report-on-signal --report-signal=SIGUSR2 --report-directory=$d" \
    bash .gpu/run.sh "$entry" finetune --model "$model" --data "$work/corpus.txt" --out "$d/out" \
    --targets all --r 16 --alpha 32 --seq-len "${QLORA_SEQ:-512}" --batch-size "${QLORA_BATCH:-4}" --steps "$steps" --lr 1e-4 --val-split 0 \
    --log-every 5 "${extra[@]}" ${QLORA_ARGS:-} >"$d/log.txt" 2>&1
  echo $? >"$d/rc.txt"
  t1=$(date +%s.%N)
  if [ -n "$spid" ]; then kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null; fi
  echo "$t1 - $t0" | bc >"$d/wall_s.txt" 2>/dev/null || python3 -c "print(round($t1-$t0,1))" >"$d/wall_s.txt"
  echo "== $run (rc $(cat "$d/rc.txt"), $(cat "$d/wall_s.txt") s): ${extra[*]}" >&2
  tail -n 12 "$d/log.txt" >&2
done
