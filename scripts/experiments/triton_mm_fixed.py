#!/usr/bin/env python3
"""A Triton tutorial-style matmul at one fixed configuration (no autotuning), for profiling beside
fuse's kernel under ncu: `python3 triton_mm_fixed.py M N K BM BN BK STAGES WARPS [gelu]`.
Launches it a few times on f16 inputs and prints the median time."""
import sys, torch, triton, triton.language as tl


@triton.jit
def mm(a, b, bias, c, M, N, K, GELU: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid = tl.program_id(0)
    blocks_m, blocks_n = tl.cdiv(M, BM), tl.cdiv(N, BN)
    group = 8 * blocks_n
    first = (pid // group) * 8
    rows = min(blocks_m - first, 8)
    pm = first + (pid % group) % rows
    pn = (pid % group) // rows
    om = (pm * BM + tl.arange(0, BM)) % M
    on = (pn * BN + tl.arange(0, BN)) % N
    ok = tl.arange(0, BK)
    pa = a + om[:, None] * K + ok[None, :]
    pb = b + ok[:, None] * N + on[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for i in range(0, tl.cdiv(K, BK)):
        x = tl.load(pa, mask=ok[None, :] < K - i * BK, other=0.0)
        y = tl.load(pb, mask=ok[:, None] < K - i * BK, other=0.0)
        acc = tl.dot(x, y, acc)
        pa += BK
        pb += BK * N
    if GELU:
        acc = acc + tl.load(bias + on)[None, :]
        acc = 0.5 * acc * (1.0 + tl.erf(acc * 0.7071067811865476))
    cm = pm * BM + tl.arange(0, BM)
    cn = pn * BN + tl.arange(0, BN)
    tl.store(c + cm[:, None] * N + cn[None, :], acc.to(tl.float16), mask=(cm[:, None] < M) & (cn[None, :] < N))


M, N, K, BM, BN, BK, S, W = map(int, sys.argv[1:9])
gelu = len(sys.argv) > 9 and sys.argv[9] == "gelu"
a = torch.randn(M, K, device="cuda", dtype=torch.float16)
b = torch.randn(K, N, device="cuda", dtype=torch.float16)
bias = torch.randn(N, device="cuda", dtype=torch.float16)
c = torch.empty(M, N, device="cuda", dtype=torch.float16)
grid = (triton.cdiv(M, BM) * triton.cdiv(N, BN),)
times = []
for _ in range(10):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    mm[grid](a, b, bias, c, M, N, K, GELU=gelu, BM=BM, BN=BN, BK=BK, num_stages=S, num_warps=W)
    e.record()
    torch.cuda.synchronize()
    times.append(s.elapsed_time(e))
ms = sorted(times)[len(times) // 2]
print(f"triton {M}x{N}x{K} [{BM}x{BN}x{BK} {W}w {S}s] gelu={gelu}: {ms:.4f} ms {2 * M * N * K / ms / 1e9:.1f} TFLOP/s")
