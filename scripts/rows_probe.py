"""Triton's narrow-row LayerNorm (peers_v2.py's `ln_rows_k`) at 16384x256 f16 with fuse's tile
(8 rows of 256 at 4 warps), launched 12 times after an L2 flush: for `ncu` to compare it with
fuse's `layernorm_rows` at the same tile (scripts/gpu_session15.sh `ncu_rows`)."""
import torch
from peers_v2 import ln_rows_k  # the same kernel peers_v2.py times (scripts/ is on sys.path)

flush = torch.empty(64 << 20, dtype=torch.float32, device="cuda")


M, N = 16384, 256
x = torch.randn(M, N, device="cuda", dtype=torch.float16)
y = torch.empty_like(x)
w = torch.rand(N, device="cuda", dtype=torch.float16); b = torch.randn(N, device="cuda", dtype=torch.float16)
for _ in range(12):
    flush.zero_()
    ln_rows_k[(M // 8,)](x, y, w, b, M, N, N, 1e-5, ROWS=8, BLOCK=256, num_warps=4)
torch.cuda.synchronize()
print("rows_probe done")
