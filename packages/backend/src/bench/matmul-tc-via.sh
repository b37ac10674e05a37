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
# the fastest kernel (its two transposes at 4096^3: 4 (M + N) K bytes) and its bandwidth, then with it: auto with the
# route's model on (tcViaTN: tnWave 0.76, 0.039 us per K, that bandwidth, margin 0.02) on the LLM shapes, and on the
# 1.1B LoRA step's products (2048 tokens) beside the route forced and never, while time is left
read -r best bw < <(python3 - "$o" <<'PY'
import json, sys
best = None
for t in ['v3', 'v2:128', 'v2:64', 'v1']:
    try:
        for line in open('%s/sweep-%s.json' % (sys.argv[1], t.replace(':', '-'))):
            for r in json.loads(line).get('sweep', []):
                if r['variant'] == 'auto-via' and r['M'] == 4096:
                    us = sum(float(k.split(': ')[1]) for k in r['kernels'] if k.startswith('transpose'))
                    if us and (best is None or us < best[1]): best = (t, us)
    except (OSError, ValueError, KeyError):
        pass
print(best[0], '%.3g' % (4 * 8192 * 4096 / (best[1] * 1e-6))) if best else print('v1 1.6e12')
PY
)
echo "fastest transpose: $best at $bw bytes/s"
for s in 4096 2048; do
  if ((SECONDS > budget - 45)); then echo "skipped auto on $s: ${SECONDS}s of ${budget}s used"; continue; fi
  f="$o/sweep-model-$s.json"
  v=auto; [ $s = 2048 ] && v=auto,auto-novia,auto-via
  [ $s = 4096 ] && sh=4096,8192 || sh=2048
  timeout $((budget - SECONDS)) bash .gpu/run.sh matmul-tc-bench --sweep=$v --layouts=NT --shapes=$sh --transpose16=$best --via-tn=0.76,0.039,$bw,0.02 --reps=20 >"$f" 2>"${f%.json}.log"
  echo "model $s rc=$? at ${SECONDS}s"; show "$f"
done
