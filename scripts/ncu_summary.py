"""Summarise `ncu --csv --metrics ...` logs: per kernel name (and grid), the median of each metric
over its profiled launches. With `--runs`, each run of consecutive launches of one kernel is its
own group, in launch order (for a script that launches the same kernel for several cases, as
scripts/same_harness.py does). Usage: python3 scripts/ncu_summary.py [--runs] LOG [LOG ...]"""
import csv, sys, statistics
from collections import defaultdict

RUNS = "--runs" in sys.argv[1:]

for path in [a for a in sys.argv[1:] if a != "--runs"]:
    with open(path, errors="replace") as f:
        lines = [l for l in f if l.startswith('"')]
    rows = list(csv.reader(lines))
    if not rows:
        print(f"{path}: no ncu rows"); continue
    head = rows[0]
    try:
        ik, ig, im, iv = (head.index(k) for k in ("Kernel Name", "Grid Size", "Metric Name", "Metric Value"))
        ib = head.index("Block Size") if "Block Size" in head else ig
        iid = head.index("ID") if "ID" in head else None  # without it, every row counts as a launch
    except ValueError:
        print(f"{path}: unexpected header {head}"); continue
    launches = {}  # launch ID -> ((kernel, grid), {metric: value}), in launch order
    for n, r in enumerate(rows[1:]):
        if len(r) <= iv:
            continue
        try:
            v = float(r[iv].replace(",", ""))
        except ValueError:
            continue
        launch = r[iid] if iid is not None else f"row {n}"
        launches.setdefault(launch, ((r[ik][:60], r[ig] + " block " + r[ib]), {}))[1][r[im]] = v
    groups, by_key = [], {}  # [(key, {metric: [values]})]: per key, or per run of one key (--runs)
    for key, metrics in launches.values():
        if RUNS:
            if not groups or groups[-1][0] != key:
                groups.append((key, defaultdict(list)))
            group = groups[-1][1]
        else:
            if key not in by_key:
                by_key[key] = defaultdict(list)
                groups.append((key, by_key[key]))
            group = by_key[key]
        for m, v in metrics.items():
            group[m].append(v)
    print(f"== {path}")
    for (k, g), ms in groups:
        n = max(len(v) for v in ms.values())
        print(f"{k} grid {g} ({n} launches):")
        for m, v in sorted(ms.items()):
            print(f"    {m}: {statistics.median(v):g}")
