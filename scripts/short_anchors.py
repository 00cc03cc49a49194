#!/usr/bin/env python3
"""The short anchors (calls under 30 us) over several processes per side: the bench's short rows
have a lower level that moves by up to 0.5 us from one process to the next (docs/PERF.md
"Session 19"), more than one process can resolve. Takes fuse's bench JSONs and the Triton JSONs
(peers_small.py's, triton_anchor.py's) of several processes in one device call, and prints per
row each side's least time over every run of every process, the spread of the per-process
figures, and fuse/Triton.

Usage: short_anchors.py --fuse F1.json [F2.json ...] --triton T1.json [T2.json ...] [--markdown]
(gpu_common.sh's `short_rounds N` writes $L/short_fuse_K.json and $L/short_triton_K.json)."""
import json, sys

SHORT_MS = 0.03  # benches/anchors.rs's SHORT_MS


def load(paths, impl):
    """{key: [per-process least ms]} of the rows named `impl` under SHORT_MS."""
    out = {}
    for path in paths:
        for r in json.load(open(path)):
            if r["impl"] != impl:
                continue
            runs = [x for x in r.get("runs_ms", [r["ms"]]) if x is not None]
            if runs and min(runs) < SHORT_MS:
                out.setdefault((r["pattern"], str(r["shape"]), r["dtype"]), []).append(min(runs))
    return out


def main(argv):
    md = "--markdown" in argv
    args = [a for a in argv if a != "--markdown"]
    if "--fuse" not in args or "--triton" not in args:
        sys.exit(__doc__)
    i, j = args.index("--fuse"), args.index("--triton")
    fuse_files = args[i + 1:j] if i < j else args[i + 1:]
    triton_files = args[j + 1:] if j > i else args[j + 1:i]
    fuse, triton = load(fuse_files, "fuse"), load(triton_files, "triton")
    us = lambda xs: f"{min(xs) * 1e3:.2f} (up to {max(xs) * 1e3:.2f} over {len(xs)})"
    head = ["pattern", "shape", "dtype", "fuse us (worst process, processes)", "triton us (same)", "fuse/triton"]
    if md:
        print("| " + " | ".join(head) + " |\n" + "|---" * len(head) + "|")
    else:
        print("  ".join(head))
    for k in sorted(fuse.keys() & triton.keys()):
        f, t = fuse[k], triton[k]
        cells = [*k, us(f), us(t), f"{min(t) / min(f):.3f}"]
        print(("| " + " | ".join(cells) + " |") if md else "  ".join(cells))


if __name__ == "__main__":
    main(sys.argv[1:])
