#!/usr/bin/env bash
# The quantized-kernel call on the GPU machine, in the repo root, after `../shared/gpu/pack.sh
# packages/backend/src/bench/quant-bench.ts` here (carry .gpu): the int8 check list and TOPS, then the GEMV check
# list, sweep and decode table, then PyTorch's side (TORCH=0 skips it); JSON and logs into $OUT (or ./quant-out).
#   bash packages/backend/src/bench/quant-gpu.sh
set -uo pipefail
out=${OUT:-quant-out}
mkdir -p "$out"
nvidia-smi --query-compute-apps=pid,name,used_memory --format=csv
timeout 60 bash .gpu/run.sh quant-bench --i8-checks --int8 --reps=10 >"$out/int8.json" 2>"$out/int8.log"
echo "int8 rc=$?"
timeout 300 bash .gpu/run.sh quant-bench --gemv-checks --gemv --reps=10 >"$out/gemv.json" 2>"$out/gemv.log"
echo "gemv rc=$?"
if [ "${TORCH:-1}" = 1 ]; then
  timeout 60 python3 packages/backend/src/bench/quant_torch.py --reps 20 >"$out/torch.json" 2>"$out/torch.log"
  echo "torch rc=$?"
fi
grep -v '^gemv {' "$out/gemv.log" | tail -c 3000
tail -c 2000 "$out/int8.log"
