"""Turn an emitted narrow-row kernel into its warp-slab variant (an experiment, by hand):
chunk j of thread tid is chunk (warp * NCH + j) * 32 + lane, so a warp holds whole rows and an
axis-1 reduction of a row wider than 32 chunks stays in the warp (no shared memory, no barrier)."""
import re, sys
src = open(sys.argv[1]).read()
name = sys.argv[3]
# the tile's length index: the one whose row layout FUSE_G names
g = re.search(r"#define FUSE_G(\d+) \(\((\w+)\) / FUSE_VEC(\d+)\)", src)
r, cols, p = g.group(1), g.group(2), g.group(3)
ci = f"((fuse_tid >> 5) * (FUSE_NCH{p} * 32) + (j) * 32 + (fuse_tid & 31))"
src = src.replace(f"#define FUSE_IDX{p}(i) ((((i) / FUSE_VEC{p}) * FUSE_THREADS + fuse_tid) * FUSE_VEC{p} + (i) % FUSE_VEC{p})",
  f"#define FUSE_CI{p}(j) {ci}\n#define FUSE_IDX{p}(i) (FUSE_CI{p}((i) / FUSE_VEC{p}) * FUSE_VEC{p} + (i) % FUSE_VEC{p})")
old = f"#define FUSE_IDX{r}(i) ((int)((unsigned int)(((i) * FUSE_THREADS + fuse_tid) * FUSE_VEC{p}) / (unsigned int)({cols})))"
assert old in src, old
src = src.replace(old, f"#define FUSE_IDX{r}(i) ((int)((unsigned int)(FUSE_CI{p}(i) * FUSE_VEC{p}) / (unsigned int)({cols})))")
# every axis-1 reduction: replace the #if FUSE_Gr <= 32 ... #endif block
pat = re.compile(r"#if FUSE_G%s <= 32\n(.*?)\n#endif\n" % r, re.S)
def warp(m):
    body = m.group(1)
    op = re.search(r"fuse_rv\[fuse_j\] = (.*?)__shfl_xor_sync", body).group(1)  # "fuse_rv[fuse_j] + " or "fmaxf(fuse_rv[fuse_j], "
    if op.strip().endswith("+"):
        comb = lambda a, b: f"{a} + {b}"
    else:
        fn = op.split("(")[0]
        comb = lambda a, b: f"{fn}({a}, {b})"
    return f"""#if FUSE_G{r} <= 32
{body.split(chr(10)+'#else'+chr(10))[0]}
#else
  {{
    constexpr int fuse_gw = FUSE_G{r} / 32;  // consecutive chunks of one row in a lane
#pragma unroll
    for (int fuse_j = 0; fuse_j < FUSE_NCH{p}; fuse_j += fuse_gw) {{
      auto fuse_t = fuse_rv[fuse_j];
#pragma unroll
      for (int fuse_q = 1; fuse_q < fuse_gw; ++fuse_q) fuse_t = {comb('fuse_t', 'fuse_rv[fuse_j + fuse_q]')};
#pragma unroll
      for (int fuse_s = 16; fuse_s > 0; fuse_s >>= 1) fuse_t = {comb('fuse_t', '__shfl_xor_sync(0xffffffffu, fuse_t, fuse_s)')};
#pragma unroll
      for (int fuse_q = 0; fuse_q < fuse_gw; ++fuse_q) fuse_rv[fuse_j + fuse_q] = fuse_t;
    }}
  }}
#endif
"""
src, n = pat.subn(warp, src)
print("reductions rewritten:", n, file=sys.stderr)
open(sys.argv[2], "w").write(src)
