"""Triton's fastest NeoX QK-norm + RoPE (peers_v2.py's `qk_split_k`, HB=8 at 4 warps) at 8192 tokens
x 48 heads x 128 f16, launched 12 times after an L2 flush, with the positions fuse's bench uses
(0..8192): for `ncu` to set beside fuse's `qk_norm_rope` (scripts/gpu_session20.sh `qk_ncu`)."""
import torch
from peers_v2 import qk_split_k  # the kernel peers_v2.py times (scripts/ is on sys.path)

NQ, NK, NV, D, T = 32, 8, 8, 128, 8192
flush = torch.empty(64 << 20, dtype=torch.float32, device="cuda")
qkv = torch.randn(T, (NQ + NK + NV) * D, device="cuda", dtype=torch.float16)
qw = (1 + 0.1 * torch.randn(D, device="cuda")).half()
kw = (1 + 0.1 * torch.randn(D, device="cuda")).half()
cache = torch.randn(T, D, device="cuda").half()
pos = torch.arange(T, device="cuda", dtype=torch.int64)
for _ in range(12):
    flush.zero_()
    qk_split_k[(T, (NQ + NK) // 8)](qkv, pos, cache, qw, kw, qkv.stride(0), 1e-6, NQ=NQ, NK=NK, D=D, HB=8,
                                     NEOX=True, num_warps=4)
torch.cuda.synchronize()
print("qk_probe done")
