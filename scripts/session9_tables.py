#!/usr/bin/env python3
"""The session-9 tables (docs/PERF.md) from one device call's JSON: fuse's bench rows (`mm.json`,
`att.json`) beside triton_dot.py's and torch_peers.py's. Usage: session9_tables.py CALL_DIR"""
import json, sys, os

d = sys.argv[1]
load = lambda *p: json.load(open(os.path.join(d, *p))) if os.path.exists(os.path.join(d, *p)) else []
fuse = load("logs", "mm.json") + load("logs", "att.json")
td, tp = load("triton_dot.json"), load("torch_peers.json")


def best(rows, pat, shape, dt, impl):
    v = [r["tflops"] for r in rows if (r["pattern"], r["shape"], r["dtype"]) == (pat, shape, dt) and impl(r["impl"])]
    return max(v) if v else None


f = lambda x: "—" if x is None else f"{x:.1f}"
r = lambda a, b: "—" if a is None or b is None else f"{a / b:.2f}"
print("| pattern | shape | dtype | fuse | Triton | cuBLAS | fuse/Triton | fuse/cuBLAS |")
print("|---|---|---|---|---|---|---|---|")
for dt in ("float16", "bfloat16") if any(x["pattern"] == "matmul" for x in fuse) else ():
    for shape in ("4096x4096x4096", "8192x8192x8192", "8192x4096x11008"):
        for pat in ("matmul", "matmul_bias_gelu"):
            a = best(fuse, pat, shape, dt, lambda i: i == "fuse")
            t = best(td, pat, shape, dt, lambda i: i.startswith("triton"))
            c = best(td + tp, pat, shape, dt, lambda i: i.startswith("cublas")) if pat == "matmul" else None
            print(f"| {pat} | {shape} | {dt} | {f(a)} | {f(t)} | {f(c)} | {r(a, t)} | {r(a, c)} |")
print()
print("| shape | dtype | fuse | FA2 | cuDNN | Triton | fuse/FA2 | fuse/Triton | fuse/cuDNN |")
print("|---|---|---|---|---|---|---|---|---|")
for dt in ("float16", "bfloat16"):
    for shape in sorted({x["shape"] for x in fuse if x["pattern"] == "attention_fwd"}, key=lambda s: (len(s), s)):
        a = best(fuse, "attention_fwd", shape, dt, lambda i: i == "fuse")
        fa = best(tp, "attention_fwd", shape, dt, lambda i: "flash" in i)
        cu = best(tp, "attention_fwd", shape, dt, lambda i: "cudnn" in i)
        t = best(td, "attention_fwd", shape, dt, lambda i: i.startswith("triton"))
        print(f"| {shape} | {dt} | {f(a)} | {f(fa)} | {f(cu)} | {f(t)} | {r(a, fa)} | {r(a, t)} | {r(a, cu)} |")
