"""Triton's narrow-row LayerNorm (peers_v2.py's `ln_rows_k`) at 16384x256 f16 with fuse's tile
(8 rows of 256 at 4 warps), launched 12 times after an L2 flush: for `ncu` to compare it with
fuse's `layernorm_rows` at the same tile (scripts/gpu_session15.sh `ncu_rows`)."""
import torch, triton, triton.language as tl

flush = torch.empty(64 << 20, dtype=torch.float32, device="cuda")


@triton.jit
def ln_rows_k(X, Y, W, B, M, N, stride, eps, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    r = tl.program_id(0) * ROWS + tl.arange(0, ROWS)[:, None]
    c = tl.arange(0, BLOCK)[None, :]
    cm = c < N
    m = (r < M) & cm
    off = r.to(tl.int64) * stride + c
    x = tl.load(X + off, mask=m, other=0.).to(tl.float32)
    mean = tl.sum(x, axis=1)[:, None] / N
    xc = tl.where(cm, x - mean, 0.)
    rstd = tl.rsqrt(tl.sum(xc * xc, axis=1)[:, None] / N + eps)
    w = tl.load(W + c, mask=cm, other=0.).to(tl.float32)
    b = tl.load(B + c, mask=cm, other=0.).to(tl.float32)
    tl.store(Y + off, (xc * rstd * w + b).to(Y.dtype.element_ty), mask=m)


M, N = 16384, 256
x = torch.randn(M, N, device="cuda", dtype=torch.float16)
y = torch.empty_like(x)
w = torch.rand(N, device="cuda", dtype=torch.float16); b = torch.randn(N, device="cuda", dtype=torch.float16)
for _ in range(12):
    flush.zero_()
    ln_rows_k[(M // 8,)](x, y, w, b, M, N, N, 1e-5, ROWS=8, BLOCK=256, num_warps=4)
torch.cuda.synchronize()
print("rows_probe done")
