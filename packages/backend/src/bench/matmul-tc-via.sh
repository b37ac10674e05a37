#!/usr/bin/env bash
# x W^T through TN (tcViaTN) and the 16-bit transpose kernels in one GPU-machine call (after `pnpm build &&
# ../shared/gpu/pack.sh packages/backend/src/bench/matmul-tc-bench.ts` here, with .gpu carried): the GPU checks of
# the route (with v3), then per transpose kernel (v3, v2:128, v2:64, v1) one NT sweep of the route forced (auto-via) beside
# the NT product (auto-novia), each row with its kernels' times per call. A step starts only while the call has
# time left (VIA_BUDGET seconds, default 540). The full JSON under $OUT (or /tmp/via-tn).
#   bash packages/backend/src/bench/matmul-tc-via.sh
set -u
o=${OUT:-/tmp/via-tn}
budget=${VIA_BUDGET:-540}
mkdir -p "$o"
# NT rows of a sweep's JSON (variant, product, TFLOP/s by kernel times and by the wall clock, kernels) and its table
show() {
  echo "$1"
  python3 - "$1" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    d = json.loads(line)
    for r in d.get('sweep', []):
        if r['layout'] == 'NT': print(r['variant'], r['M'], r['N'], r['K'], r.get('tflops'), r.get('wallTflops'), r.get('kernels'), r.get('error') or '')
PY
}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 120 bash .gpu/run.sh matmul-tc-bench --no-bench --cases=viaTN --transpose16=v3 >"$o/checks-via.json" 2>"$o/checks-via.log"; echo "check rc=$?"
python3 -c "import json,sys; print(json.dumps(json.load(open(sys.argv[1]))['check'])[:2000])" "$o/checks-via.json"
for t in v3 v2:128 v2:64 v1; do
  if ((SECONDS > budget - 60)); then echo "skipped $t: ${SECONDS}s of ${budget}s used"; continue; fi
  f="$o/sweep-${t/:/-}.json"
  timeout $((budget - SECONDS)) bash .gpu/run.sh matmul-tc-bench --sweep=auto-novia,auto-via --layouts=NT --transpose16=$t --reps=20 >"$f" 2>"${f%.json}.log"
  echo "$t rc=$? at ${SECONDS}s"; show "$f"
done
