"""Summarise `ncu --csv --metrics ...` logs: per kernel name (and grid), the median of each metric
over its profiled launches. Usage: python3 scripts/ncu_summary.py LOG [LOG ...]"""
import csv, sys, statistics
from collections import defaultdict

for path in sys.argv[1:]:
    vals = defaultdict(lambda: defaultdict(list))
    with open(path, errors="replace") as f:
        lines = [l for l in f if l.startswith('"')]
    rows = list(csv.reader(lines))
    if not rows:
        print(f"{path}: no ncu rows"); continue
    head = rows[0]
    try:
        ik, ig, im, iv = (head.index(k) for k in ("Kernel Name", "Grid Size", "Metric Name", "Metric Value"))
        ib = head.index("Block Size") if "Block Size" in head else ig
    except ValueError:
        print(f"{path}: unexpected header {head}"); continue
    for r in rows[1:]:
        if len(r) <= iv:
            continue
        try:
            v = float(r[iv].replace(",", ""))
        except ValueError:
            continue
        vals[(r[ik][:60], r[ig] + " block " + r[ib])][r[im]].append(v)
    print(f"== {path}")
    for (k, g), ms in vals.items():
        n = max(len(v) for v in ms.values())
        print(f"{k} grid {g} ({n} launches):")
        for m, v in sorted(ms.items()):
            print(f"    {m}: {statistics.median(v):g}")
