#!/usr/bin/env bash
# The tensor-core attention measurements of docs/PERFORMANCE.md in one GPU-machine call (after
# `../shared/gpu/pack.sh packages/backend/src/bench/attention-bench.ts packages/backend/src/bench/attention-tc-check.ts`
# here, with .gpu carried): the GPU correctness check, the f16 benchmark at D = 64 (default tiles and a few others)
# and D = 128, per-kernel profiles, and PyTorch SDPA fp32 / bf16 on the same GPU.
#   bash packages/backend/src/bench/attention-gpu.sh
set -u
b=packages/backend/src/bench
timeout 150 bash .gpu/run.sh attention-tc-check; echo "check rc=$?"
timeout 40 bash .gpu/run.sh attention-bench --dtype f16 --reps 40
for t in '{"fwd":{"nsg":4,"b":32},"dq":{"nsg":4,"b":32},"dkdv":{"nsg":4,"b":32}}' \
         '{"fwd":{"nsg":2,"b":64},"dq":{"nsg":2,"b":64},"dkdv":{"nsg":2,"b":64}}' \
         '{"fwd":{"nsg":4,"b":64},"dq":{"nsg":4,"b":32},"dkdv":{"nsg":4,"b":32}}'; do
  timeout 40 bash .gpu/run.sh attention-bench --dtype f16 --reps 40 --tctiles "$t"
done
timeout 40 bash .gpu/run.sh attention-bench --dtype f16 --D 128 --reps 40
timeout 30 bash .gpu/run.sh attention-bench --dtype f16 --profile --nocheck --reps 5
timeout 30 bash .gpu/run.sh attention-bench --dtype f16 --D 128 --profile --nocheck --reps 5
PYTHONUNBUFFERED=1 timeout 50 python3 $b/attention_torch.py --runs sdpa:fp32,sdpa:bf16,eager:fp32
PYTHONUNBUFFERED=1 timeout 40 python3 $b/attention_torch.py --D 128 --runs sdpa:fp32,sdpa:bf16
