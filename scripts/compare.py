#!/usr/bin/env python3
"""Joins the fuse anchor bench JSON with triton_anchor.py's JSON (same run) into one table:
fuse vs Triton GB/s, ratio, and fuse as a share of the copy ceiling for the same bytes.
Usage: compare.py FUSE_JSON TRITON_JSON [MORE_PEER_JSON ...] [--markdown]
Where several peer files time the same key and impl (peers_small.json's 5-run Triton rows of the
short anchors beside triton_anchor.py's one-run rows), the fastest of them is kept."""
import json, sys

files = [a for a in sys.argv[1:] if not a.startswith("--")]
fuse = json.load(open(files[0]))
peers = [r for f in files[1:] for r in json.load(open(f))]
md = "--markdown" in sys.argv
key = lambda r: (r["pattern"], str(r["shape"]), r["dtype"])
by = {}
for r in fuse:
    by.setdefault(key(r), {})[r["impl"]] = r["gbs"]
for r in peers:
    seen = by.setdefault(key(r), {})
    seen[r["impl"]] = max(seen.get(r["impl"], 0.0), r["gbs"])
copy268 = next((r["gbs"] for r in peers if r["pattern"] == "copy"), None)
cols = ["fuse", "triton", "fuse/triton", "torch.compile", "torch eager", "fuse unfused chain", "fuse copy (d2d)", "fuse/copy"]
if md:
    print("| pattern | shape | dtype | " + " | ".join(cols) + " |")
    print("|---" * (3 + len(cols)) + "|")
else:
    print(f"{'pattern':<18} {'shape':<11} {'dtype':<8} " + " ".join(f"{c:>12}" for c in cols))
misses = []
for k, v in by.items():
    if "fuse" not in v:
        continue
    f, t, c = v.get("fuse"), v.get("triton"), v.get("fuse copy (d2d)")
    vals = [f, t, f / t if t else None, v.get("torch.compile"), v.get("torch eager"), v.get("fuse unfused chain"), c, f / c if c else None]
    fmt = lambda x: "-" if x is None else (f"{x:.2f}" if x < 10 else f"{x:.0f}")
    if md:
        print(f"| {k[0]} | {k[1]} | {k[2]} | " + " | ".join(fmt(x) for x in vals) + " |")
    else:
        print(f"{k[0]:<18} {k[1]:<11} {k[2]:<8} " + " ".join(f"{fmt(x):>12}" for x in vals))
    if t and f < t:
        misses.append(f"{k}: {f:.0f} < triton {t:.0f}")
if copy268:
    print(f"\ncopy ceiling (torch copy_ of 1 GiB f32): {copy268:.0f} GB/s")
print(f"shapes below Triton: {len(misses)}")
for m in misses:
    print("  " + m)
