"""Times Hugging Face `tokenizers` on the synthetic tokenizers and texts that tokenizer-bench writes with
`--write-dir DIR`, and checks that its ids equal ours (DIR/rusty-ids.json). Prints one JSON object.

    node tokenizer-bench.js --write-dir DIR      # on our side
    python3 tokenizer-hf.py DIR [--reps 7]       # where `tokenizers` is installed

`calibration_json_loads` times Python's json.loads of the Qwen-sized file: run `python3 tokenizer-hf.py DIR
--calibrate-only` on the machine of our numbers too, to compare the two CPUs when the runs are on different
machines.
"""
import json
import os
import platform
import statistics
import sys
import time

d = sys.argv[1]
reps = int(sys.argv[sys.argv.index("--reps") + 1]) if "--reps" in sys.argv else 7


def timeit(f, n=reps):
    t0 = time.perf_counter()
    f()
    first = (time.perf_counter() - t0) * 1e3
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        f()
        ts.append((time.perf_counter() - t) * 1e3)
    return {"first_ms": round(first, 3), "median_ms": round(statistics.median(ts), 3), "min_ms": round(min(ts), 3)}


def cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


out = {"python": platform.python_version(), "cpu": cpu_model(), "cores": os.cpu_count(), "load_average": os.getloadavg(), "reps": reps}
qwen = open(f"{d}/qwen-like.tokenizer.json", encoding="utf-8").read()
out["calibration_json_loads"] = timeit(lambda: json.loads(qwen))
if "--calibrate-only" in sys.argv:
    print(json.dumps(out))
    sys.exit(0)

from tokenizers import Tokenizer, __version__  # noqa: E402

out["tokenizers"] = __version__
load = {}
for name in ["qwen-like", "qwen-like-string-merges"]:
    path = f"{d}/{name}.tokenizer.json"
    text = open(path, encoding="utf-8").read()
    load[name] = {"from_file": timeit(lambda: Tokenizer.from_file(path)), "from_str": timeit(lambda: Tokenizer.from_str(text))}
out["load"] = load

texts = json.load(open(f"{d}/texts.json", encoding="utf-8"))
ours = json.load(open(f"{d}/rusty-ids.json", encoding="utf-8"))
enc = {}
same = {}
for base in ["metaspace", "bytelevel"]:
    tk = Tokenizer.from_file(f"{d}/gemma-like-{base}.tokenizer.json")
    for k in ["s20000", "prose", "html", "near_miss"]:
        t = texts[k]
        ids = tk.encode(t).ids
        enc[f"{k}_{base}"] = {"chars": len(t), "tokens": len(ids), **timeit(lambda: tk.encode(t))}
        same[f"{k}_{base}"] = ids == ours[f"{k}_{base}"]
tk = Tokenizer.from_file(f"{d}/qwen-like.tokenizer.json")
t = texts["qwen_prose"]
ids = tk.encode(t).ids
enc["qwen_prose"] = {"chars": len(t), "tokens": len(ids), **timeit(lambda: tk.encode(t))}
enc["qwen_decode"] = {"tokens": len(ids), **timeit(lambda: tk.decode(ids))}
same["qwen_prose"] = ids == ours["qwen_prose"]
out["encode"] = enc
out["ids_equal_rusty"] = same
print(json.dumps(out))
