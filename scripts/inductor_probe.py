#!/usr/bin/env python3
"""What torch.compile (Inductor) generates and how fast it runs for issue 14's narrow-row LayerNorm
and softmax: the Triton source (TORCH_LOGS=output_code goes to stderr) and a do_bench time beside the
shape's copy. Diagnostic only (session 14); the recorded peers are scripts/peers_v2.py's.
Usage: TORCH_LOGS=output_code python scripts/inductor_probe.py"""
import torch, torch.nn.functional as F
from triton.testing import do_bench

dev = "cuda"
for (M, N) in ((65536, 128), (16384, 256)):
    for dt in (torch.float32, torch.float16):
        x = torch.randn(M, N, device=dev, dtype=dt)
        w = (1 + 0.1 * torch.randn(N, device=dev)).to(dt)
        b = (0.1 * torch.randn(N, device=dev)).to(dt)
        for name, fn in (("layernorm", lambda x, w, b: F.layer_norm(x, (N,), w, b, 1e-5)),
                         ("softmax", lambda x, w, b: torch.softmax(x, -1))):
            cf = torch.compile(fn, dynamic=False)
            y = cf(x, w, b)
            ref = fn(x.double(), w.double(), b.double())
            err = (y.double() - ref).abs().max().item()
            ms = do_bench(lambda: cf(x, w, b), warmup=50, rep=400)
            copy = do_bench(lambda: y.copy_(x), warmup=50, rep=400)
            print(f"PROBE {name} {M}x{N} {dt} torch.compile {ms:.4f} ms copy {copy:.4f} ms err {err:.2e}", flush=True)
            torch._dynamo.reset()
