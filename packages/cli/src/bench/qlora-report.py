#!/usr/bin/env python3
"""One JSON object from the `rusty finetune` runs of qlora-1b.sh / qlora-7b.sh.

  python3 qlora-report.py <work_dir> <run_name>...

For each run <work_dir>/<run_name>/: tokens/s (the `summary` line of metrics.jsonl when the CLI writes one: the
median of the steady steps; else the median tokensPerSec of the train records after the first 5 steps), the
pool's peak allocated / reserved bytes (summary line), the peak of the GPU's used memory that nvidia-smi sampled
every 100 ms while the run went (smi.txt, MiB, less the idle value before the run: baseline.txt), the wall time
and the first and last loss. With a run named `bf16*` and one named `nf4*` of the same suffix it adds the nf4 /
bf16 ratios of tokens/s and of each peak.
"""
import json
import os
import statistics
import sys

GIB = 1 << 30


def run_stats(d: str) -> dict:
    r: dict = {}
    metrics = os.path.join(d, "out", "metrics.jsonl")
    train, summary = [], None
    if os.path.exists(metrics):
        for line in open(metrics):
            try:
                m = json.loads(line)
            except ValueError:
                continue
            if m.get("kind") == "train":
                train.append(m)
            elif m.get("kind") == "summary":
                summary = m
    if train:
        r["steps"] = len(train)
        r["loss_first"], r["loss_last"] = train[0].get("loss"), train[-1].get("loss")
        steady = [m["tokensPerSec"] for m in train[5:] if m.get("tokensPerSec")] or [m["tokensPerSec"] for m in train if m.get("tokensPerSec")]
        if steady:
            r["tokens_per_s_records"] = round(statistics.median(steady))
    if summary:
        r["tokens_per_s"] = round(summary.get("tokensPerSec", 0))
        r["step_ms"] = round(summary.get("stepMs", 0), 1)
        r["host_ms_per_step"] = round(summary.get("hostMsPerStep", 0), 1)
        r["dispatches_per_step"] = summary.get("dispatchesPerStep")
        if summary.get("peakBytes"):
            r["pool_peak_gib"] = round(summary["peakBytes"] / GIB, 3)
        if summary.get("peakReservedBytes"):
            r["pool_reserved_gib"] = round(summary["peakReservedBytes"] / GIB, 3)
    elif "tokens_per_s_records" in r:
        r["tokens_per_s"] = r["tokens_per_s_records"]
    smi = os.path.join(d, "smi.txt")
    if os.path.exists(smi):
        vals = [int(x) for x in open(smi).read().split() if x.strip().isdigit()]
        base = 0
        bf = os.path.join(d, "baseline.txt")
        if os.path.exists(bf):
            b = [int(x) for x in open(bf).read().split() if x.strip().isdigit()]
            base = min(b) if b else 0
        if vals:
            r["smi_peak_gib"] = round((max(vals) - base) / 1024, 3)
    for k in ("wall_s", "rc"):
        f = os.path.join(d, k + ".txt")
        if os.path.exists(f):
            r[k] = float(open(f).read().strip() or "nan") if k == "wall_s" else int(open(f).read().strip() or "-1")
    return r


def main() -> None:
    work, names = sys.argv[1], sys.argv[2:]
    out = {n: run_stats(os.path.join(work, n)) for n in names}
    ratios = {}
    for n in names:
        if not n.startswith("bf16"):
            continue
        q = "nf4" + n[4:]
        if q not in out:
            continue
        a, b = out[n], out[q]
        rr = {}
        for k in ("tokens_per_s", "pool_peak_gib", "pool_reserved_gib", "smi_peak_gib"):
            if a.get(k) and b.get(k):
                rr[k] = round(b[k] / a[k], 3)
        ratios[q + "/" + n] = rr
    print(json.dumps({"runs": out, "ratios": ratios}, indent=1))


if __name__ == "__main__":
    main()
