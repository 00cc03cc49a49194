#!/usr/bin/env python3
"""fuse's own cubins timed inside Triton's harness, beside a peer's kernels: does a gap the bench
shows come from the kernels or from around them (the harness, the allocator, the launch path, the
process)?

`python scripts/same_harness.py CUBINS [rows] [ncu]`: CUBINS holds one folder per case, named
`<pattern>_<shape>_<dtype>` (e.g. `softmax_1024x512_float32`), each a FUSE_CACHE_DIR the anchor
bench filled with `FUSE_BENCH_ONLY` set to that case, so it holds the cubin the bench launched
(and the bench's L2 flush kernel). Each cubin is loaded through the driver (ctypes, libcuda),
launched on torch tensors with the arguments the fuse launcher passes (user parameters, one
element count per pointer, the scalars the runtime computes (LayerNorm's `1 / n`), the error
words), checked against torch, then timed by
`triton.testing.do_bench` in alternated rounds with the peer (`ROUNDS` rounds of 5 do_bench runs
a side; each side's best median). The short anchors (add_mul 1M, softmax 1024x512, LayerNorm
4096x1024; f32 and f16) go against Triton's kernels of triton_anchor.py; with `rows`, issue 14's
narrow-row softmax and LayerNorm go against torch.compile (compiled as peers_v2.py compiles them;
its runs may settle on another level in another process). Rows go to $OUT/same_harness.json (or
same_harness_rows.json). With `ncu`, each kernel is instead launched 20 times with an L2 flush
before each, for Nsight Compute to measure."""
import ctypes, glob, json, os, re, sys
import torch, triton
import torch.nn.functional as F
from triton.testing import do_bench
from peers_v2 import close, compiled, ln_1row_k, softmax_1row_k
from peers_small import add_mul_k, flush_l2

dev = "cuda"
ROUNDS = int(os.environ.get("ROUNDS", "3"))
HEADER = 120  # fuse-runtime/src/disk_cache.rs: the entry header before the cubin
cuda = ctypes.CDLL("libcuda.so.1")


def check(rc, what):
    if rc != 0:
        name = ctypes.c_char_p()
        cuda.cuGetErrorName(rc, ctypes.byref(name))
        raise RuntimeError(f"{what}: {name.value.decode() if name.value else rc}")


class Cubin:
    """The fuse kernel named `pattern_<suffix>` among the cubins in `folder`."""

    def __init__(self, folder, pattern):
        self.name = None
        for path in sorted(glob.glob(os.path.join(folder, "*.cubin"))):
            data = open(path, "rb").read()
            assert data[:8] == b"FUSECUBN", path
            image = data[HEADER:]
            names = [n.decode() for n in re.findall(rb"\.text\.([A-Za-z_][A-Za-z0-9_]*)", image)]
            hit = [n for n in names if re.fullmatch(pattern + r"_(f32|f16|bf16)", n)]
            if hit:
                assert self.name is None, f"two cubins in {folder} hold {pattern}"
                self.name, self.path, self.image = hit[0], path, image
        assert self.name, f"no {pattern} kernel in {folder}"
        self.module, self.func = load_function(self.image, self.name)
        # CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK (the kernel's __launch_bounds__, FUSE_THREADS),
        # SHARED_SIZE_BYTES, NUM_REGS
        self.threads, self.smem, self.regs = (func_attr(self.func, a) for a in (0, 1, 4))

    def launcher(self, grid, args):
        return launcher(self.func, grid, self.threads, args)


def load_function(image, name):
    """(module, function) for kernel `name` of the cubin bytes `image`, loaded through the driver."""
    module = ctypes.c_void_p()
    check(cuda.cuModuleLoadData(ctypes.byref(module), ctypes.c_char_p(image)), "cuModuleLoadData")
    func = ctypes.c_void_p()
    check(cuda.cuModuleGetFunction(ctypes.byref(func), module, name.encode()), "cuModuleGetFunction")
    return module, func


def func_attr(func, a):
    v = ctypes.c_int()
    check(cuda.cuFuncGetAttribute(ctypes.byref(v), a, func), "cuFuncGetAttribute")
    return v.value


def launcher(func, grid, threads, args, shared=0):
    """A no-argument function launching `func` on `grid` programs of `threads` threads (`shared`
    bytes of dynamic shared memory) with `args` (ctypes values, kept alive by the closure) on
    torch's current stream."""
    keep = list(args)
    params = (ctypes.c_void_p * len(keep))(*[ctypes.cast(ctypes.pointer(a), ctypes.c_void_p) for a in keep])
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)

    def go():
        check(cuda.cuLaunchKernel(func, grid, 1, 1, threads, 1, 1, shared, stream, params, None), "cuLaunchKernel")
    go.keep = (keep, params)
    return go


def ptr(t):
    return ctypes.c_void_p(t.data_ptr())


def lens(*ts):
    return [ctypes.c_longlong(t.numel()) for t in ts]


def host_inv(n):
    """LayerNorm's `1.0 / n_cols as f32`, which fuse's runtime computes at launch and passes after
    the lengths (fuse-ir's host_scalars.rs): an IEEE f32 division, as the runtime's."""
    return ctypes.c_float(float(torch.tensor(1.0, dtype=torch.float32) / torch.tensor(float(n), dtype=torch.float32)))


def short_cases(cubins, err):
    """(pattern, shape, dtype name, cubin, fuse launcher, Triton launcher, output, reference, bytes) per case."""
    for dt, name in ((torch.float32, "float32"), (torch.float16, "float16")):
        n = 1 << 20
        x, y, z = (torch.randn(n, device=dev, dtype=dt) for _ in range(3))
        o = torch.full_like(x, float("nan"))
        k = Cubin(os.path.join(cubins, f"add_mul_{n}_{name}"), "add_mul")
        fuse = k.launcher(triton.cdiv(n, 1024), [ptr(x), ptr(y), ptr(z), ptr(o), ctypes.c_int(n), *lens(x, y, z, o), ptr(err)])
        tri = lambda x=x, y=y, z=z, o=o, n=n: add_mul_k[(triton.cdiv(n, 1024),)](x, y, z, o, n, BLOCK=1024)
        yield "add_mul", str(n), name, k, fuse, tri, o, ((x + y) * z).float(), 4 * n * x.element_size()
    for dt, name in ((torch.float32, "float32"), (torch.float16, "float16")):
        M, N = 1024, 512
        x = torch.randn(M, N, device=dev, dtype=dt)
        o = torch.full_like(x, float("nan"))
        k = Cubin(os.path.join(cubins, f"softmax_{M}x{N}_{name}"), "softmax")
        fuse = k.launcher(M, [ptr(o), ptr(x), ctypes.c_int(N), ctypes.c_int(N), ctypes.c_int(N), *lens(o, x), ptr(err)])
        tri = lambda x=x, o=o: softmax_1row_k[(M,)](o, x, x.stride(0), o.stride(0), N, BLOCK=512, num_warps=4)
        yield "softmax", f"{M}x{N}", name, k, fuse, tri, o, torch.softmax(x.float(), -1), 2 * M * N * x.element_size()
    for dt, name in ((torch.float32, "float32"), (torch.float16, "float16")):
        M, N = 4096, 1024
        x = torch.randn(M, N, device=dev, dtype=dt)
        w = torch.rand(N, device=dev, dtype=dt); b = torch.randn(N, device=dev, dtype=dt)
        o = torch.full_like(x, float("nan"))
        k = Cubin(os.path.join(cubins, f"layernorm_{M}x{N}_{name}"), "layernorm")
        fuse = k.launcher(M, [ptr(x), ptr(o), ptr(w), ptr(b), ctypes.c_int(N), ctypes.c_int(N), ctypes.c_float(1e-5),
                              *lens(x, o, w, b), host_inv(N), ptr(err)])
        tri = lambda x=x, o=o, w=w, b=b: ln_1row_k[(M,)](x, o, w, b, x.stride(0), N, 1e-5, BLOCK=1024, num_warps=4)
        ref = F.layer_norm(x.float(), (N,), w.float(), b.float(), 1e-5)
        yield "layernorm", f"{M}x{N}", name, k, fuse, tri, o, ref, 2 * M * N * x.element_size() + 2 * N * x.element_size()


def rows_cases(cubins, err):
    """As short_cases, for the narrow rows (the tile the bench's launch_rows picks: `[1024 / N, N]`
    for f32, `[2048 / N, N]` for f16; the cubin's threads) against torch.compile; the peer's output
    is its return value."""
    for (M, N) in ((65536, 128), (16384, 256)):
        for dt, name in ((torch.float32, "float32"), (torch.float16, "float16")):
            rows_per_program = (1024 if dt == torch.float32 else 2048) // N
            x = torch.randn(M, N, device=dev, dtype=dt)
            o = torch.full_like(x, float("nan"))
            k = Cubin(os.path.join(cubins, f"softmax_{M}x{N}_{name}"), "softmax_rows")
            fuse = k.launcher(triton.cdiv(M, rows_per_program),
                              [ptr(o), ptr(x), ctypes.c_int(N), ctypes.c_int(N), ctypes.c_int(M), ctypes.c_int(N), *lens(o, x), ptr(err)])
            cf = compiled(lambda x: torch.softmax(x, -1))
            yield "softmax", f"{M}x{N}", name, k, fuse, (lambda cf=cf, x=x: cf(x)), o, torch.softmax(x.float(), -1), 2 * M * N * x.element_size()
        for dt, name in ((torch.float32, "float32"), (torch.float16, "float16")):
            rows_per_program = (1024 if dt == torch.float32 else 2048) // N
            x = torch.randn(M, N, device=dev, dtype=dt)
            w = (1 + 0.1 * torch.randn(N, device=dev)).to(dt); b = (0.1 * torch.randn(N, device=dev)).to(dt)
            o = torch.full_like(x, float("nan"))
            k = Cubin(os.path.join(cubins, f"layernorm_{M}x{N}_{name}"), "layernorm_rows")
            fuse = k.launcher(triton.cdiv(M, rows_per_program),
                              [ptr(x), ptr(o), ptr(w), ptr(b), ctypes.c_int(N), ctypes.c_int(M), ctypes.c_int(N),
                               ctypes.c_float(1e-5), *lens(x, o, w, b), host_inv(N), ptr(err)])
            cf = compiled(lambda x, w, b: F.layer_norm(x, (N,), w, b, 1e-5))
            ref = F.layer_norm(x.float(), (N,), w.float(), b.float(), 1e-5)
            yield "layernorm", f"{M}x{N}", name, k, fuse, (lambda cf=cf, x=x, w=w, b=b: cf(x, w, b)), o, ref, \
                2 * M * N * x.element_size() + 2 * N * x.element_size()


def checked(label, fn, out, ref):
    """Runs fn on a poisoned `out` and checks `out` (or fn's return value, for torch.compile's)."""
    out.fill_(float("nan"))
    ret = fn()
    torch.cuda.synchronize()
    got = ret if isinstance(ret, torch.Tensor) else out
    assert not got.isnan().any(), f"{label}: NaN in the output"
    close(label, got, ref)  # peers_v2.py's per-dtype tolerance (f32: 1e-5 + 1e-4 relative)


def main():
    cubins = sys.argv[1]
    profile = "ncu" in sys.argv[2:]
    narrow = "rows" in sys.argv[2:]
    peer = "torch.compile" if narrow else "triton"
    rows = []
    err = torch.zeros(64, dtype=torch.int64, device=dev)
    for pattern, shape, name, k, fuse, other, out, ref, nbytes in (rows_cases if narrow else short_cases)(cubins, err):
        label = f"{pattern}/{shape}/{name}"
        checked(f"{label} fuse", fuse, out, ref)
        assert not (err != 0).any(), f"{label}: fuse's {k.name} reported an out-of-bounds access: {err.tolist()[:2]}"
        checked(f"{label} {peer}", other, out, ref)
        print(f"{label}: fuse {k.name} ({os.path.basename(k.path)[:12]}) {k.threads} threads, {k.regs} registers, "
              f"{k.smem} B static shared", flush=True)
        if profile:
            for fn in (fuse, other):
                for _ in range(20):
                    flush_l2()
                    fn()
            torch.cuda.synchronize()
            continue
        runs = {"fuse cubin": [], peer: []}
        for r in range(ROUNDS):
            order = ("fuse cubin", peer) if r % 2 == 0 else (peer, "fuse cubin")
            for side in order:
                fn = fuse if side == "fuse cubin" else other
                runs[side] += [do_bench(fn, warmup=25, rep=100, return_mode="median") for _ in range(5)]
        best = {s: min(v) for s, v in runs.items()}
        for side, v in runs.items():
            rows.append(dict(pattern=pattern, shape=shape, dtype=name, impl=side, ms=best[side],
                             gbs=nbytes / (best[side] * 1e-3) / 1e9, runs_ms=v))
        med = {s: sorted(v)[len(v) // 2] for s, v in runs.items()}
        print(f"{label}: fuse cubin {best['fuse cubin']:.4f} ms, {peer} {best[peer]:.4f} ms, "
              f"fuse/{peer} speed {best[peer] / best['fuse cubin']:.3f} "
              f"(medians of their runs {med['fuse cubin']:.4f} / {med[peer]:.4f})", flush=True)
    torch.cuda.synchronize()
    assert not (err != 0).any(), f"a fuse kernel reported an out-of-bounds access: {err.tolist()[:2]}"
    out = os.environ.get("OUT")
    if out and not profile:
        json.dump(rows, open(os.path.join(out, "same_harness_rows.json" if narrow else "same_harness.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
