#!/usr/bin/env python3
"""Issue 14's rows from one device call: the fuse anchor bench JSON (fuse and its same-bytes copy)
beside scripts/peers_v2.py's JSON (Triton, torch eager, torch.compile), as a markdown table of
milliseconds, fuse as a share of the copy's speed, and the speed-ups over torch.compile and Triton.
Usage: rows_table.py FUSE_JSON PEERS_V2_JSON"""
import json, sys

fuse, peers = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
key = lambda r: (r["pattern"], str(r["shape"]), r["dtype"])
by = {}
for r in fuse + peers:
    by.setdefault(key(r), {})[r["impl"]] = r["ms"]
cols = ["fuse ms", "Triton ms", "torch.compile ms", "torch eager ms", "copy ms", "fuse/copy speed", "vs torch.compile", "vs Triton"]
print("| pattern | shape | dtype | " + " | ".join(cols) + " |")
print("|---" * (3 + len(cols)) + "|")
for k, v in by.items():
    if "fuse" not in v or "torch.compile" not in v:
        continue  # the 24 anchors are compare.py's
    f, t, tc, te, c = (v.get(i) for i in ("fuse", "triton", "torch.compile", "torch eager", "fuse copy (d2d)"))
    ms = lambda x: "-" if x is None else f"{x:.4f}"
    ratio = lambda a, b, s="x": "-" if a is None or b is None else f"{a / b:.2f}{s}"
    print(f"| {k[0]} | {k[1]} | {k[2]} | {ms(f)} | {ms(t)} | {ms(tc)} | {ms(te)} | {ms(c)} | "
          f"{ratio(c, f, '')} | {ratio(tc, f)} | {ratio(t, f)} |")
