#!/usr/bin/env python3
"""Issue 14's narrow rows (softmax and LayerNorm, 65536x128 and 16384x256, f32 and f16): every
`[ROWS, BLOCK]` tile x warps variant of fuse's `softmax_rows` / `layernorm_rows` (cubins compiled
from the emitted sources by nvrtc_regs.py, named `<pattern>_<dtype>_<R>x<B>_w<W>[_minbN].cubin`)
timed beside torch.compile in Triton's harness (scripts/same_harness.py's launch path), alternated
rounds, each side's least median. `python rows_sweep.py DIR` (run from scripts/); JSON to
$OUT/rows_sweep.json."""
import ctypes, glob, json, os, re, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))  # scripts/
import torch, triton
import torch.nn.functional as F
from triton.testing import do_bench
from peers_v2 import close, compiled
from same_harness import func_attr, host_inv, launcher, load_function, ptr, lens

dev = "cuda"
ROUNDS = int(os.environ.get("ROUNDS", "3"))
RUNS = int(os.environ.get("RUNS", "3"))


class Raw:
    """Kernel `name` of the cubin file `path`."""

    def __init__(self, path, name):
        self.path, self.name = path, name
        self.module, self.func = load_function(open(path, "rb").read(), name)
        self.regs = func_attr(self.func, 4)  # CU_FUNC_ATTRIBUTE_NUM_REGS

    def launcher(self, grid, threads, args, shared=0):
        return launcher(self.func, grid, threads, args, shared)


def tc_cubins(n_cols, dname):
    """[(cubin, rows a program, warps, dynamic shared bytes)] of torch.compile's LayerNorm kernels for `n_cols`-wide
    `dname` rows in $TRITON_CACHE_DIR: every config Inductor compiled (it times them and keeps one)."""
    elem = {"float16": "f16", "float32": "f32"}[dname]
    found = []
    for meta in glob.glob(os.path.join(os.environ.get("TRITON_CACHE_DIR", "/nonexistent"), "*", "triton_per_fused_native_layer_norm_0.json")):
        d = os.path.dirname(meta)
        ttgir = open(os.path.join(d, "triton_per_fused_native_layer_norm_0.ttgir")).read()
        rows = [int(r) for r in re.findall(r"tensor<(\d+)x" + str(n_cols) + r"x", ttgir)]
        if rows and f"!tt.ptr<{elem}>" in ttgir:
            m = json.load(open(meta))
            # The launch passes null scratch pointers (Triton 3.6's two trailing arguments).
            assert m.get("global_scratch_size", 0) == 0 and m.get("profile_scratch_size", 0) == 0, meta
            found.append((os.path.join(d, "triton_per_fused_native_layer_norm_0.cubin"), max(rows), m["num_warps"], m["shared"]))
    assert found, f"TC_CUBIN: no Inductor LayerNorm cubin for {n_cols} {dname} in $TRITON_CACHE_DIR"
    return sorted(found)


def main():
    folder = sys.argv[1]
    only = sys.argv[2] if len(sys.argv) > 2 else ""
    # NCU=1: torch.compile's kernels only, 6 launches each, for Nsight Compute; NCU=all: every side,
    # checked and launched twice, untimed
    profile = os.environ.get("NCU") == "1"
    profile_all = os.environ.get("NCU") == "all"
    err = torch.zeros(64, dtype=torch.int64, device=dev)
    out_rows = []
    for (M, N) in ((65536, 128), (16384, 256)):
        for pattern in ("softmax", "layernorm"):
            for dt, dname, sfx in ((torch.float32, "float32", "f32"), (torch.float16, "float16", "f16")):
                label = f"{pattern}/{M}x{N}/{dname}"
                if only and not re.search(only, label):
                    continue
                x = torch.randn(M, N, device=dev, dtype=dt)
                o = torch.full_like(x, float("nan"))
                if pattern == "softmax":
                    ref = torch.softmax(x.float(), -1)
                    cf = compiled(lambda x: torch.softmax(x, -1))
                    peer = lambda cf=cf, x=x: cf(x)
                    nbytes = 2 * M * N * x.element_size()
                else:
                    w = (1 + 0.1 * torch.randn(N, device=dev)).to(dt); b = (0.1 * torch.randn(N, device=dev)).to(dt)
                    ref = F.layer_norm(x.float(), (N,), w.float(), b.float(), 1e-5)
                    cf = compiled(lambda x, w, b: F.layer_norm(x, (N,), w, b, 1e-5))
                    peer = lambda cf=cf, x=x, w=w, b=b: cf(x, w, b)
                    nbytes = 2 * M * N * x.element_size() + 2 * N * x.element_size()
                sides = {"torch.compile": peer}
                if os.environ.get("TC_CUBIN") and pattern == "layernorm":
                    # torch.compile's own kernel launched by this script's ctypes path, as fuse's are:
                    # separates the kernels from the ways they are launched
                    peer()
                    torch.cuda.synchronize()
                    for path, rows, warps, shared in tc_cubins(N, dname):
                        k = Raw(path, "triton_per_fused_native_layer_norm_0")
                        null = ctypes.c_void_p(0)
                        args = [ptr(x), ptr(w), ptr(b), ptr(o), ctypes.c_int(M), ctypes.c_int(N), null, null]
                        sides[f"tc cubin {rows}x{N}_w{warps} by ctypes ({k.regs} regs)"] = k.launcher(triton.cdiv(M, rows), 32 * warps, args, shared)
                if profile:
                    for _ in range(6):
                        peer()
                    torch.cuda.synchronize()
                    continue
                for path in sorted(glob.glob(os.path.join(folder, f"{pattern}_{dname}_*x{N}_w*.cubin"))):
                    tag = os.path.basename(path)[len(f"{pattern}_{dname}_"):-6]
                    R, W = int(tag.split("x")[0]), int(re.search(r"_w(\d+)", tag).group(1))
                    name = f"{pattern}_rows_{sfx}"
                    source = path[:-len(".cubin")] + ".cu"
                    text = open(source).read() if os.path.exists(source) else ""
                    if text:  # a variant may carry its own name (variants.py)
                        m = re.search(r"__global__ void FUSE_LAUNCH_BOUNDS (\w+)\(", text)
                        assert m, f"{source}: no kernel name"
                        name = m.group(1)
                    # `1 / n` as a parameter: sources emitted since session 24 (fuse-ir's host_scalars.rs)
                    host = [host_inv(N)] if "fuse_host0" in text or not text else []
                    k = Raw(path, name)
                    if pattern == "softmax":
                        args = [ptr(o), ptr(x), ctypes.c_int(N), ctypes.c_int(N), ctypes.c_int(M), ctypes.c_int(N), *lens(o, x), ptr(err)]
                    else:
                        args = [ptr(x), ptr(o), ptr(w), ptr(b), ctypes.c_int(N), ctypes.c_int(M), ctypes.c_int(N),
                                ctypes.c_float(1e-5), *lens(x, o, w, b), *host, ptr(err)]
                    sides[f"fuse {tag} ({k.regs} regs)"] = k.launcher(triton.cdiv(M, R), 32 * W, args)
                for side, fn in sides.items():
                    o.fill_(float("nan"))
                    ret = fn()
                    torch.cuda.synchronize()
                    got = ret if isinstance(ret, torch.Tensor) else o
                    assert not got.isnan().any(), f"{label} {side}: NaN"
                    close(f"{label} {side}", got, ref)
                    assert not (err != 0).any(), f"{label} {side}: out of bounds {err.tolist()[:2]}"
                if profile_all:
                    for fn in sides.values():
                        fn()
                    torch.cuda.synchronize()
                    continue
                runs = {s: [] for s in sides}
                names = list(sides)
                for r in range(ROUNDS):
                    order = names if r % 2 == 0 else names[::-1]
                    for s in order:
                        runs[s] += [do_bench(sides[s], warmup=25, rep=60, return_mode="median") for _ in range(RUNS)]
                best = {s: min(v) for s, v in runs.items()}
                tc = best["torch.compile"]
                print(f"== {label}: torch.compile {tc * 1e3:.2f} us", flush=True)
                for s in sorted(best, key=best.get):
                    print(f"   {s:34s} {best[s] * 1e3:7.2f} us  vs torch.compile {tc / best[s]:.3f}", flush=True)
                    out_rows.append(dict(pattern=pattern, shape=f"{M}x{N}", dtype=dname, impl=s, ms=best[s],
                                         gbs=nbytes / (best[s] * 1e-3) / 1e9, runs_ms=runs[s]))
    out = os.environ.get("OUT")
    if out:
        json.dump(out_rows, open(os.path.join(out, "rows_sweep.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
