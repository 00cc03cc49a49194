#!/usr/bin/env python3
"""Hand-edited variants of emitted narrow-row sources (session 22), to find what separates fuse's
f32 LayerNorm from torch.compile's kernel at the same tile: `variants.py SRC.cu` writes
SRC_<tag>.cu beside it for each tag:
  plain   the 16-byte loads of x as `ld.global.v4` (Triton's default) instead of `ld.global.nc`
  last    the weight and bias loads with an L2 evict_last policy (Inductor's eviction_policy)
  tri     both (Triton's instructions for these loads)
  approx  `rsqrt.approx.ftz` for `rsqrtf` and `__fdividef` for the `1 / n` division (Inductor's
          instructions for them)
  stcs    the stores as `st.global.cs` (streaming)
"""
import os, re, sys

PRELUDE = r'''
__device__ __forceinline__ void fuse_ld_plain(unsigned int* w, const void* p) {
  asm("ld.global.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3]) : "l"(p));
}
__device__ __forceinline__ float fuse_rsqrt_approx(float x) {
  float r;
  asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ void fuse_ld_last(unsigned int* w, const void* p) {
  unsigned long long pol;
  asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(pol));
  asm("ld.global.L1::evict_last.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;" : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3]) : "l"(p), "l"(pol));
}
'''

src_path = sys.argv[1]
src = open(src_path).read()
anchor = "extern \"C\" __global__"
assert anchor in src


def variant(tag, s):
    s = s.replace(anchor, PRELUDE + anchor, 1)
    open(src_path[:-3] + f"_{tag}.cu", "w").write(s)


def sub_loads(s, ptr, fn):
    # the vector path's call for pointer `ptr`: fuse_ldg_words<4>(dst, ptr + ...) -> fn(dst, ptr + ...)
    pat = re.compile(r"fuse_ldg_words<FUSE_VEC(\d+) \* 4 / 4>\((fuse_wd \+ fuse_j \* \(FUSE_VEC\d+ \* 4 / 4\)), (" + ptr + r" \+ \(long long\)[a-z_0-9]+\[fuse_b\])\)")
    n = len(pat.findall(s))
    assert n >= 1, (ptr, n)
    return pat.sub(lambda m: f"{fn}({m.group(2)}, {m.group(3)})", s)


approx = src.replace("rsqrtf(", "fuse_rsqrt_approx(")
approx, n = re.subn(r"inv_n = \((t\d+) / (t\d+)\);", r"inv_n = __fdividef(\1, \2);", approx)
assert n == 1 and "fuse_rsqrt_approx(" in approx
variant("approx", approx)
if os.environ.get("ONLY_APPROX"):
    sys.exit(0)
plain = sub_loads(src, "x", "fuse_ld_plain")
variant("plain", plain)
last = src
for p in ("w", "b"):
    if re.search(r"fuse_ldg_words<[^>]*>\([^,]*, " + p + r" \+", src):
        last = sub_loads(last, p, "fuse_ld_last")
variant("last", last)
tri = plain
for p in ("w", "b"):
    if re.search(r"fuse_ldg_words<[^>]*>\([^,]*, " + p + r" \+", src):
        tri = sub_loads(tri, p, "fuse_ld_last")
variant("tri", tri)
