#!/usr/bin/env python3
"""Hand-edited variants of emitted narrow-row sources (sessions 22-23), to find what separates fuse's
LayerNorm from torch.compile's kernel at the same tile.

`variants.py SRC.cu [COMBO ...]` writes SRC_<combo>.cu beside SRC.cu for each COMBO, a `-`-joined
list of edits (`early-last`); without COMBOs, session 22's set: plain, last, tri (plain-last), approx.
Edits:
  plain   the 16-byte loads of x as `ld.global.v4` (Triton's default) instead of `ld.global.nc`
  first   the loads of x with an L2 evict_first policy (read once: their lines are the first
          victims, before other kernels' dirty lines)
  cs      the loads of x as `ld.global.cs` (cache streaming)
  last    the weight and bias loads with an L2 evict_last policy (Inductor's eviction_policy)
  approx  `rsqrt.approx.ftz` for `rsqrtf` (Inductor's instruction), and `__fdividef` for the
          `1 / n` division in sources emitted before session 24 (since then the runtime
          computes `1 / n` and passes it: `inv_n = fuse_host0;`)
  early   the weight and bias loads moved to right after the load of x (what the emitter's early
          loads do for 4-byte kernels on one warp; Inductor writes them there too)
  nocap   no one-warp register cap (`FUSE_NO_WARP_CAP`, as the runtime compiles a variant the cap spills)
  vec16, vec32
          (x's tile) 16 or 32 consecutive elements of a row a thread (two or four 16-byte accesses) instead of
          8: a row over 16 or 8 lanes, so fewer shuffle rounds and fewer rows a thread
"""
import re, sys

PRELUDE = r'''
__device__ __forceinline__ void fuse_ld_plain(unsigned int* w, const void* p) {
  asm("ld.global.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3]) : "l"(p));
}
__device__ __forceinline__ float fuse_rsqrt_approx(float x) {
  float r;
  asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ void fuse_ld_first(unsigned int* w, const void* p) {
  unsigned long long pol;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
  asm("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;" : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3]) : "l"(p), "l"(pol));
}
__device__ __forceinline__ void fuse_ld_cs(unsigned int* w, const void* p) {
  asm("ld.global.cs.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3]) : "l"(p));
}
__device__ __forceinline__ void fuse_ld_last(unsigned int* w, const void* p) {
  unsigned long long pol;
  asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(pol));
  asm("ld.global.L1::evict_last.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;" : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3]) : "l"(p), "l"(pol));
}
'''
ANCHOR = "extern \"C\" __global__"


def sub_loads(s, ptr, fn):
    """The vector path's 16-byte loads from `ptr` (fuse_ldg_words<FUSE_VECk * E / 4>(dst, ptr + ...))
    as fn(dst, ptr + ...) per 16 bytes."""
    pat = re.compile(r"fuse_ldg_words<FUSE_VEC(\d+) \* (\d) / 4>\((fuse_wd \+ fuse_j \* \(FUSE_VEC\d+ \* \d / 4\)), (" + ptr + r" \+ \(long long\)[a-z_0-9]+\[fuse_b\])\)")
    n = len(pat.findall(s))
    assert n >= 1, (ptr, n)
    # One call per 16 bytes of the chunk (FUSE_VEC * E / 4 words, 4 a call).
    # (A chunk under 16 bytes would run the loop no times and lose the load: refused at compile time.)
    return pat.sub(lambda m: f"static_assert(FUSE_VEC{m.group(1)} * {m.group(2)} % 16 == 0, \"variants.py: 16-byte chunks only\"); "
                   f"for (int fuse_q = 0; fuse_q < FUSE_VEC{m.group(1)} * {m.group(2)} / 16; ++fuse_q) "
                   f"{fn}({m.group(3)} + 4 * fuse_q, (const char*)({m.group(4)}) + 16 * fuse_q)", s)


def plain(s):
    return sub_loads(s, "x", "fuse_ld_plain")


def first(s):
    return sub_loads(s, "x", "fuse_ld_first")


def cs(s):
    return sub_loads(s, "x", "fuse_ld_cs")


def last(s):
    for p in ("w", "b"):
        if re.search(r"fuse_ldg_words<[^>]*>\([^,]*, " + p + r" \+", s):
            s = sub_loads(s, p, "fuse_ld_last")
    return s


def approx(s):
    s = s.replace("rsqrtf(", "fuse_rsqrt_approx(")
    s, n = re.subn(r"inv_n = \((t\d+) / (t\d+)\);", r"inv_n = __fdividef(\1, \2);", s)
    assert (n >= 1 or "inv_n = fuse_host0;" in s) and "fuse_rsqrt_approx(" in s
    return s


def early(s):
    # The weight's load through the bias's copy (`wb`, `bb`), moved to after x's load block.
    assert len(re.findall(r"^  // t\d+ = load\(w\[", s, re.M)) == 1, "early: one weight load block expected"
    lines = s.split("\n")
    start = next(i for i, l in enumerate(lines) if re.match(r"  // t\d+ = load\(w\[", l))
    end = next(i for i, l in enumerate(lines) if i > start and re.search(r"\bbb\[fuse_i\] = ", l))
    block = lines[start:end + 1]
    rest = lines[:start] + lines[end + 1:]
    x = next(i for i, l in enumerate(rest) if l.startswith("  // xs = load(x["))
    endif = next(i for i, l in enumerate(rest) if i > x and l == "#endif")
    return "\n".join(rest[:endif + 1] + block + rest[endif + 1:])


def vec(n):
    def edit(s):
        # The layout of x's tile (its load's vector width), whatever its number.
        m = (re.search(r"fuse_ldg_words<FUSE_VEC(\d+) \* \d / 4>\([^,]*, x \+", s)
             or re.search(r"fuse_q < FUSE_VEC(\d+) \* \d / 16; \+\+fuse_q\) fuse_ld_\w+\([^,]*, \(const char\*\)\(x \+", s))
        assert m, "vec: no load of x"  # (plain, first or cs may have rewritten it already)
        k = m.group(1)
        m = re.search(r"^#define FUSE_VEC" + k + " .*$", s, re.M)
        assert m
        return s[:m.end()] + f"\n#undef FUSE_VEC{k}\n#define FUSE_VEC{k} {n}" + s[m.end():]
    return edit


def nocap(s):
    return "#define FUSE_NO_WARP_CAP 1\n" + s


EDITS = {"first": first, "cs": cs, "nocap": nocap, "plain": plain, "last": last, "approx": approx, "early": early, "vec16": vec(16), "vec32": vec(32)}


def write(src_path, src, combo):
    s = src
    for e in combo.split("-"):
        s = EDITS[e](s)
    s = s.replace(ANCHOR, PRELUDE + ANCHOR, 1)
    # Its own kernel name (rows_sweep.py reads it from the source), so that a profile tells variants apart.
    s, n = re.subn(r"(__global__ void FUSE_LAUNCH_BOUNDS \w+)\(", lambda m: f"{m.group(1)}_{combo.replace('-', '_')}(", s, count=1)
    assert n == 1
    open(src_path[:-3] + f"_{combo}.cu", "w").write(s)


def main():
    src_path = sys.argv[1]
    src = open(src_path).read()
    assert ANCHOR in src
    for combo in sys.argv[2:] or ["approx", "plain", "last", "plain-last"]:
        write(src_path, src, combo)


if __name__ == "__main__":
    main()
