"""Triton's kernels of the three small anchor shapes where fuse trails on the H100 (add_mul 1M
f32, softmax 1024x512 f32, LayerNorm 4096x1024 f32), as triton_anchor.py writes and launches them,
each launched 30 times after an L2 flush: for `ncu` to read their device times and launch facts
beside fuse's (scripts/gpu_session15.sh `ncu_small`)."""
import torch
from peers_v2 import ln_1row_k, softmax_1row_k  # triton_anchor.py's kernels, as peers_v2.py keeps them
from peers_small import add_mul_k

dev = "cuda"
flush = torch.empty(64 << 20, dtype=torch.float32, device=dev)


def reps(fn, k=30):
    for _ in range(k):
        flush.zero_()
        fn()
    torch.cuda.synchronize()


n = 1 << 20
x, y, z = (torch.randn(n, device=dev) for _ in range(3))
o = torch.empty_like(x)
reps(lambda: add_mul_k[(n // 1024,)](x, y, z, o, n, BLOCK=1024))
xs = torch.randn(1024, 512, device=dev); os_ = torch.empty_like(xs)
reps(lambda: softmax_1row_k[(1024,)](os_, xs, 512, 512, 512, BLOCK=512, num_warps=4))
xl = torch.randn(4096, 1024, device=dev); yl = torch.empty_like(xl)
w = torch.rand(1024, device=dev); b = torch.randn(1024, device=dev)
reps(lambda: ln_1row_k[(4096,)](xl, yl, w, b, 1024, 1024, 1e-5, BLOCK=1024, num_warps=4))
print("small_probe done")
