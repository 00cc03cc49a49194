#!/usr/bin/env python3
"""Joins benchmark JSON rows into markdown tables (scripts/device/run.sh's `join` and `ab` modes).

Rows are JSON lists of objects keyed `pattern`, `shape`, `dtype`, `impl`, with `ms` and `gbs`
and/or `tflops`: the benches' $FUSE_BENCH_JSON and the peer scripts' $OUT/*.json alike.

  join.py [--peer IMPL ...] FILE|DIR ...
      fuse's rows (impl "fuse") beside every peer's (impls not starting with "fuse") of the same
      (pattern, shape, dtype): each side's figure (GB/s where fuse's row has one, else TFLOP/s)
      and fuse's speed over the peer (the peer's time / fuse's), plus fuse's share of the
      same-bytes copy ("fuse copy (d2d)") where the bench timed one. `--peer IMPL` keeps only
      those peers' columns.
  join.py ab --before FILE ... --after FILE ... [--impl IMPL]
      one bench's rows of impl IMPL ("fuse") from alternated processes of two builds: each side's
      least time over its processes, its worst process's, and after's speed over before's;
      "faster"/"slower" only where the two sides' ranges do not overlap, else "noise".

Where several files (processes) time the same row and impl, the least time is kept: a peer's
5-run rows (peers_v2.py short) beside its 1-run ones (triton_anchor.py), or repeated rounds."""
import glob, json, os, re, sys

FUSE, COPY = "fuse", "fuse copy (d2d)"
# Peer columns in this order first, then any other in alphabetical order.
ORDER = ["triton", "triton 1row", "torch.compile", "torch eager", "torch unfused chain", "cublas",
         "cublas (torch.matmul)", "torch sdpa flash", "torch sdpa cudnn", "torch sdpa efficient", "torch sdpa"]


def load(paths):
    """Every usable row of the files (a folder: its *.json), impl names cleaned of error notes."""
    rows = []
    for p in paths:
        for f in sorted(glob.glob(os.path.join(p, "*.json"))) if os.path.isdir(p) else [p]:
            try:
                data = json.load(open(f))
            except (OSError, ValueError) as e:
                sys.exit(f"{f}: {e}")
            for r in data if isinstance(data, list) else []:
                if isinstance(r, dict) and r.get("pattern") and r.get("impl") and (r.get("ms") or 0) > 0:
                    rows.append(dict(r, impl=re.sub(r" \(err [^)]*\)$", "", r["impl"]), file=f))
    return rows


def key(r):
    return r["pattern"], str(r["shape"]), str(r.get("dtype", "-"))


def best(rows):
    """{(key, impl): the row of least ms}."""
    out = {}
    for r in rows:
        k = (key(r), r["impl"])
        if k not in out or r["ms"] < out[k]["ms"]:
            out[k] = r
    return out


def fmt(x):
    return "-" if x is None else f"{x:.0f}" if x >= 100 else f"{x:.1f}" if x >= 10 else f"{x:.2f}"


def join(argv):
    peers_wanted, files = [], []
    while argv:
        a = argv.pop(0)
        if a == "--peer":
            peers_wanted.append(argv.pop(0))
        else:
            files.append(a)
    if not files:
        sys.exit(__doc__)
    rows = load(files)
    top = best(rows)
    keys = sorted({k for k, impl in top if impl == FUSE})
    peer_impls = {impl for k, impl in top if not impl.startswith("fuse") and (k, FUSE) in top}
    if peers_wanted:
        peer_impls &= set(peers_wanted)
    cols = [i for i in ORDER if i in peer_impls] + sorted(peer_impls - set(ORDER))
    print(f"fuse beside {', '.join(cols) or 'no peer'}: each cell the figure, then fuse's speed over it"
          f" (its time / fuse's); {len(rows)} rows from {len({r['file'] for r in rows})} files\n")
    print("| pattern | shape | dtype | unit | fuse | " + " | ".join(cols) + " | fuse/copy |")
    print("|---" * (6 + len(cols)) + "|")
    slower = {c: 0 for c in cols}
    joined = {c: 0 for c in cols}
    for k in keys:
        f = top[(k, FUSE)]
        unit = "gbs" if (f.get("gbs") or 0) > 0 else "tflops" if (f.get("tflops") or 0) > 0 else None

        def figure(r):  # the row's figure in fuse's unit (from the times where it gives none)
            if unit is None:
                return None
            return r.get(unit) or f[unit] * f["ms"] / r["ms"]
        cells = []
        for c in cols:
            p = top.get((k, c))
            if p is None:
                cells.append("-")
                continue
            speed = p["ms"] / f["ms"]
            joined[c] += 1
            slower[c] += speed < 1
            cells.append(f"{fmt(figure(p)) if unit else fmt(p['ms']) + ' ms'} ({speed:.2f}x)")
        copy = top.get((k, COPY))
        share = f"{copy['ms'] / f['ms']:.2f}" if copy else "-"
        shown = fmt(figure(f)) if unit else fmt(f["ms"]) + " ms"
        print(f"| {k[0]} | {k[1]} | {k[2]} | {dict(gbs='GB/s', tflops='TFLOP/s').get(unit, 'ms')} | {shown} | "
              + " | ".join(cells) + f" | {share} |")
    print()
    for c in cols:
        print(f"fuse slower than {c} on {slower[c]} of {joined[c]} rows")
    for (k, impl), r in sorted(top.items()):
        if k[0] == "copy":
            print(f"copy ceiling ({impl} of {k[1]} {k[2]}): {fmt(r.get('gbs'))} GB/s")


def ab(argv):
    sides, impl, name = {"before": [], "after": []}, FUSE, None
    while argv:
        a = argv.pop(0)
        if a in ("--before", "--after"):
            name = a[2:]
        elif a == "--impl":
            impl = argv.pop(0)
        elif name:
            sides[name].append(a)
        else:
            sys.exit(__doc__)
    if not sides["before"] or not sides["after"]:
        sys.exit(f"ab needs files after both --before and --after\n\n{__doc__}")
    per = {}  # side -> key -> [each process's ms]
    for side, files in sides.items():
        for f in files:
            for (k, i), r in best(load([f])).items():
                if i == impl:
                    per.setdefault(side, {}).setdefault(k, []).append(r["ms"])
    b, a = per.get("before", {}), per.get("after", {})
    print(f"impl \"{impl}\": before {len(sides['before'])} processes, after {len(sides['after'])}; each side's "
          "least time over its processes (its worst process's, processes); speed = before / after\n")
    print("| pattern | shape | dtype | before ms | after ms | after speed | verdict |")
    print("|---" * 7 + "|")
    us = lambda xs: f"{min(xs):.4f} ({max(xs):.4f}, {len(xs)})"
    counts = {"faster": 0, "slower": 0, "noise": 0}
    for k in sorted(b.keys() & a.keys()):
        x, y = b[k], a[k]
        v = "faster" if max(y) < min(x) else "slower" if min(y) > max(x) else "noise"
        counts[v] += 1
        print(f"| {k[0]} | {k[1]} | {k[2]} | {us(x)} | {us(y)} | {min(x) / min(y):.3f} | {v} |")
    print("\n" + ", ".join(f"{n} {v}" for v, n in counts.items())
          + f"; rows on one side only: {len(b.keys() ^ a.keys())}")


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["ab"]:
        ab(args[1:])
    else:
        join(args)
