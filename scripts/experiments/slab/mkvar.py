"""Hand edits of an emitted LayerNorm-rows kernel (session 18), each a flag in argv[3]
(comma-separated): `sink` (a compiler memory barrier before the store, so every load is issued
before any store), `wide` (the in-bounds x and y chunk addresses as `rows * stride + cols` in 64-bit
arithmetic instead of the wrapped 32-bit `offs`, so ptxas may fold each row's chunks into one base
plus immediates), `nozero` (the first row sum's per-chunk fold starts at the chunk's first element,
not at 0.0f)."""
import sys
src = open(sys.argv[1]).read()
flags = sys.argv[3].split(",") if len(sys.argv) > 3 else []
def sub(old, new, count=1):
    global src
    assert old in src, old
    src = src.replace(old, new, count)
if "sink" in flags:
    sub("  // store(y[offs]", '  asm volatile("" ::: "memory");\n  // store(y[offs]')
if "wide" in flags:
    wide = "((long long)rows[fuse_b / FUSE_VEC2] * (long long)stride + (long long)cols[fuse_b])"
    sub("x + (long long)offs[fuse_b])", f"x + {wide})")
    sub("y + (long long)offs[fuse_b], fuse_w)", f"y + {wide}, fuse_w)")
if "nozero" in flags:
    sub("""      float fuse_r = 0.0f;
      if (FUSE_OK2(fuse_j)) {
#pragma unroll
        for (int fuse_v = 0; fuse_v < FUSE_VEC2; ++fuse_v) fuse_r = fuse_r + xs[fuse_j * FUSE_VEC2 + fuse_v];""",
        """      float fuse_r = 0.0f;
      if (FUSE_OK2(fuse_j)) {
        fuse_r = xs[fuse_j * FUSE_VEC2];
#pragma unroll
        for (int fuse_v = 1; fuse_v < FUSE_VEC2; ++fuse_v) fuse_r = fuse_r + xs[fuse_j * FUSE_VEC2 + fuse_v];""")
open(sys.argv[2], "w").write(src)
