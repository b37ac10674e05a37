#!/usr/bin/env bash
# x W^T through TN (tcViaTN) and the 16-bit transpose kernels in one GPU-machine call (after `pnpm build &&
# ../shared/gpu/pack.sh packages/backend/src/bench/matmul-tc-bench.ts` here, with .gpu carried): the GPU checks of
# the route (default transpose kernel), the forced route per transpose kernel (v2:64, v1, v2:128), then auto with
# the route's model on (its bandwidth set from the fastest kernel's measured copies at 4096^3) beside auto without it.
# NT rows only, with each kernel's time per call; the full JSON under $OUT (or /tmp/via-tn).
#   bash packages/backend/src/bench/matmul-tc-via.sh
set -u
o=${OUT:-/tmp/via-tn}
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
    if 'table' in d: print('table', json.dumps(d['table']))
PY
}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 150 bash .gpu/run.sh matmul-tc-bench --no-bench --cases=viaTN >"$o/checks-via.json" 2>"$o/checks-via.log"; echo "check rc=$?"
python3 -c "import json,sys; print(json.dumps(json.load(open(sys.argv[1]))['check'])[:2000])" "$o/checks-via.json"
for t in v2:64 v1 v2:128; do
  f="$o/sweep-${t/:/-}.json"
  timeout 120 bash .gpu/run.sh matmul-tc-bench --sweep=auto-via --transpose16=$t --reps=20 >"$f" 2>"${f%.json}.log"; echo "rc=$?"; show "$f"
done
# the fastest kernel's two 4096 x 4096 transposes -> its bandwidth (bytes moved: 4 (M + N) K)
read -r best bw < <(python3 - "$o" <<'PY'
import json, sys
best = None
for t in ['v2:64', 'v1', 'v2:128']:
    try:
        for line in open('%s/sweep-%s.json' % (sys.argv[1], t.replace(':', '-'))):
            for r in json.loads(line).get('sweep', []):
                if r['layout'] == 'NT' and r['M'] == 4096:
                    us = sum(float(k.split(': ')[1]) for k in r['kernels'] if k.startswith('transpose'))
                    if us and (best is None or us < best[1]): best = (t, us)
    except (OSError, ValueError, KeyError):
        pass
print(best[0], '%.3g' % (4 * 8192 * 4096 / (best[1] * 1e-6))) if best else print('v1 1.6e12')
PY
)
echo "fastest transpose: $best at $bw bytes/s"
f="$o/sweep-final.json"
timeout 150 bash .gpu/run.sh matmul-tc-bench --sweep=auto,auto-novia --transpose16=$best --via-tn=245,280,$bw,0.02 --reps=20 >"$f" 2>"${f%.json}.log"; echo "rc=$?"; show "$f"
