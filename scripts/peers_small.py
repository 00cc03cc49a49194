#!/usr/bin/env python3
"""Triton's small anchors (the anchors under 20 us: add_mul 1M, softmax 1024x512, LayerNorm
4096x1024, f32 and f16), with the kernels and launches of ../shared/anchors/triton_anchor.py,
timed as benches/anchors.rs times fuse's: the least of the medians of 5 do_bench runs
(warmup=25, rep=100), because each run of a short call settles on one of two or so levels
~0.7 us apart. triton_anchor.py times them by one run. Rows {pattern, shape, dtype, impl:
"triton", ms, gbs, runs_ms} go to $OUT/peers_small.json; `scripts/compare.py` keeps, for each
row, Triton's least time over triton_anchor.py's run and these five. Only Triton: the torch
eager and torch.compile figures of these rows stay triton_anchor.py's single runs.

`python scripts/peers_small.py samples`: instead, every per-call time under the three schedules
of benches/common/samples.rs (do_bench's, do_bench's with the host waiting every 100 calls, one
warm-up call then 100 flushed calls), printed in the bench's `samples` format."""
import json, os, sys
import torch, triton, triton.language as tl
import torch.nn.functional as F
# triton_anchor.py's kernels as peers_v2.py keeps them, and its timing rule (5 runs under 30 us)
from peers_v2 import bench_runs, ln_1row_k, softmax_1row_k

dev = "cuda"
_cache = []


def flush_l2():
    """do_bench's L2 flush (Triton 3.6: 256 MiB of int32 zeroed; made at the first call, not at import)."""
    if not _cache:
        _cache.append(torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int, device=dev))
    _cache[0].zero_()


@triton.jit
def add_mul_k(x, y, z, o, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    xv = tl.load(x + offs, mask=m); yv = tl.load(y + offs, mask=m); zv = tl.load(z + offs, mask=m)
    tl.store(o + offs, (xv + yv) * zv, mask=m)


def per_call_ms(fn, warmups, reps, chunk):
    for _ in range(warmups):
        fn()
    times, left = [], reps
    while left > 0:
        n = min(left, chunk)
        pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
        for s, e in pairs:
            flush_l2()
            s.record()
            fn()
            e.record()
        torch.cuda.synchronize()
        times += [s.elapsed_time(e) for s, e in pairs]
        left -= n
    return times


def q(sorted_, p):
    return sorted_[round((len(sorted_) - 1) * p)]


def summary(times):
    s = sorted(times)
    tenth = -(-len(times) // 10)
    tenths = [q(sorted(times[i:i + tenth]), 0.5) for i in range(0, len(times), tenth)]
    return (f"n {len(times)} median {q(s, .5):.4f} p10 {q(s, .1):.4f} p90 {q(s, .9):.4f} | by tenth "
            + " ".join(f"{t:.4f}" for t in tenths))


def report(label, fn):
    flush_l2()  # first uses (the flush buffer's allocation, each kernel's) outside the estimate
    fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(5):
        flush_l2()
        fn()
    e.record()
    torch.cuda.synchronize()
    est = s.elapsed_time(e) / 5
    warm, reps = max(1, int(25 / est)), max(1, int(100 / est))
    for name, w, r, chunk in (("do_bench", warm, reps, 1 << 30), ("chunks of 100", warm, reps, 100), ("fixed 100", 1, 100, 100)):
        print(f"samples {label} triton [{name}]: {summary(per_call_ms(fn, w, r, chunk))}", flush=True)


rows = []


def timed(pattern, shape, name, fn, ref, got, nbytes):
    fn()
    torch.cuda.synchronize()
    assert torch.allclose(got().float(), ref, atol=2e-2), f"{pattern} {shape} {name}"
    if SAMPLES:
        return report(f"{pattern}/{shape}/{name}", fn)
    runs = bench_runs(fn)
    ms = min(runs)
    rows.append(dict(pattern=pattern, shape=shape, dtype=name, impl="triton", ms=ms,
                     gbs=nbytes / (ms * 1e-3) / 1e9, runs_ms=runs))
    print(f"{pattern:<10} {str(shape):<10} {name:<8} triton {ms:.4f} ms ({len(runs)} runs: {min(runs):.4f}-{max(runs):.4f})", flush=True)


def placement(label, **tensors):
    """`placement` in argv: where each tensor starts within a 2 MiB page (the bench's FUSE_BENCH_PTRS)."""
    if "placement" in sys.argv[1:]:
        print(f"placement {label}: " + ", ".join(f"{k} {t.data_ptr() % (2 << 20)}" for k, t in tensors.items()), flush=True)


def main():
    for dt, name in ((torch.float32, "float32"), (torch.float16, "float16")):
        n = 1 << 20
        x, y, z = (torch.randn(n, device=dev, dtype=dt) for _ in range(3))
        o = torch.empty_like(x)
        grid = (triton.cdiv(n, 1024),)
        placement(f"add_mul/{n}/{name}", x=x, o=o)
        timed("add_mul", n, name, lambda: add_mul_k[grid](x, y, z, o, n, BLOCK=1024), ((x + y) * z).float(), lambda: o,
              4 * n * x.element_size())
    for dt, name in ((torch.float32, "float32"), (torch.float16, "float16")):
        M, N = 1024, 512
        x = torch.randn(M, N, device=dev, dtype=dt)
        o = torch.empty_like(x)
        placement(f"softmax/{M}x{N}/{name}", x=x, y=o)
        timed("softmax", f"{M}x{N}", name, lambda: softmax_1row_k[(M,)](o, x, x.stride(0), o.stride(0), N, BLOCK=512, num_warps=4),
              torch.softmax(x.float(), -1), lambda: o, 2 * M * N * x.element_size())
    for dt, name in ((torch.float32, "float32"), (torch.float16, "float16")):
        M, N = 4096, 1024
        x = torch.randn(M, N, device=dev, dtype=dt)
        w = torch.rand(N, device=dev, dtype=dt); bb = torch.randn(N, device=dev, dtype=dt)
        yv = torch.empty_like(x)
        placement(f"layernorm/{M}x{N}/{name}", x=x, y=yv)
        timed("layernorm", f"{M}x{N}", name, lambda: ln_1row_k[(M,)](x, yv, w, bb, x.stride(0), N, 1e-5, BLOCK=1024, num_warps=4),
              F.layer_norm(x.float(), (N,), w.float(), bb.float(), 1e-5), lambda: yv,
              2 * M * N * x.element_size() + 2 * N * x.element_size())
    out = os.environ.get("OUT")
    if out and not SAMPLES:
        json.dump(rows, open(os.path.join(out, "peers_small.json"), "w"), indent=1)


SAMPLES = "samples" in sys.argv[1:]
if __name__ == "__main__":
    main()
