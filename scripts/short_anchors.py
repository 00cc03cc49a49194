#!/usr/bin/env python3
"""The short anchors (calls under 30 us) over several processes per side: the bench's short rows
have a lower level that moves by up to 0.5 us from one process to the next (docs/PERF.md
"Session 19"), more than one process can resolve. Takes fuse's bench JSONs and the Triton JSONs
(peers_small.py's, triton_anchor.py's) of several processes in one device call, and prints per
row each side's least time over every run of every process, the spread of the per-process
figures, and fuse/Triton.

Usage: short_anchors.py --fuse F1.json [F2.json ...] [--OTHER G1.json ...] --triton T1.json [T2.json ...] [--markdown]
(or --peer instead of --triton, e.g. `--peer-impl fuse --peer BASELINE.json` for an A/B of fuse's own)
(each --OTHER group is more fuse bench JSONs, e.g. the same build under another setting, with
its own column; `--every-row` takes rows of any length, `--peer-impl NAME` the --triton group's
rows of impl NAME, e.g. "torch.compile" from peers_v2.py)
(gpu_common.sh's `short_rounds N` writes $L/short_fuse_K.json and $L/short_triton_K.json)."""
import json, sys

SHORT_MS = 0.03  # benches/anchors.rs's SHORT_MS


def load(paths, impl, limit_ms=SHORT_MS):
    """{key: [per-process least ms]} of the rows named `impl` under `limit_ms`."""
    out = {}
    for path in paths:
        for r in json.load(open(path)):
            if r["impl"] != impl:
                continue
            runs = [x for x in r.get("runs_ms", [r["ms"]]) if x is not None]
            if runs and min(runs) < limit_ms:
                out.setdefault((r["pattern"], str(r["shape"]), r["dtype"]), []).append(min(runs))
    return out


def groups(args):
    """`--NAME files...` groups in order: {name: [files]} (a repeated name adds to its group)."""
    out, name = {}, None
    for a in args:
        if a.startswith("--"):
            name = a[2:]
            out.setdefault(name, [])
        elif name is None:
            sys.exit(f"{a}: a file before any --GROUP\n\n{__doc__}")
        else:
            out[name].append(a)
    empty = [n for n, files in out.items() if not files]
    if empty:
        sys.exit(f"no files after --{', --'.join(empty)} (a misspelt option?)\n\n{__doc__}")
    return out


def main(argv):
    md = "--markdown" in argv
    every = "--every-row" in argv  # not only the short rows
    peer = "triton"
    if "--peer-impl" in argv:  # the peer group's impl, e.g. "torch.compile" from peers_v2.py
        k = argv.index("--peer-impl")
        if k + 1 >= len(argv):
            sys.exit(f"--peer-impl needs an impl name\n\n{__doc__}")
        peer, argv = argv[k + 1], argv[:k] + argv[k + 2:]
    g = groups([a for a in argv if a not in ("--markdown", "--every-row")])
    # The peer's group is --triton (or --peer, e.g. a baseline of fuse's own with --peer-impl fuse).
    peer_group = "peer" if "peer" in g else "triton"
    if "fuse" not in g or peer_group not in g:
        sys.exit(__doc__)
    # Every other group holds fuse bench JSONs (e.g. --fuse and --pool: one build, two settings).
    limit = float("inf") if every else SHORT_MS
    sides = {name: load(files, peer if name == peer_group else "fuse", limit) for name, files in g.items()}
    theirs = sides[peer_group]
    mine = [n for n in g if n != peer_group]
    us = lambda xs: f"{min(xs) * 1e3:.2f} (up to {max(xs) * 1e3:.2f} over {len(xs)})"
    head = ["pattern", "shape", "dtype"] + [f"{n} us (worst process, processes)" for n in mine]
    head += [f"{peer} us (same)"] + [f"{n}/{peer}" for n in mine]
    if md:
        print("| " + " | ".join(head) + " |\n" + "|---" * len(head) + "|")
    else:
        print("  ".join(head))
    keys = set(theirs)
    for n in mine:
        keys &= sides[n].keys()
    for k in sorted(keys):
        t = theirs[k]
        cells = [*k] + [us(sides[n][k]) for n in mine] + [us(t)]
        cells += [f"{min(t) / min(sides[n][k]):.3f}" for n in mine]
        print(("| " + " | ".join(cells) + " |") if md else "  ".join(cells))


if __name__ == "__main__":
    main(sys.argv[1:])
