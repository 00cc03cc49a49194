"""Variants of an emitted kernel's 16-byte read-only loads (fuse_ldg_words' uint4 __ldg): the PTX
load instruction given as argv[3] (e.g. ld.global.v4.u32, ld.global.nc.L2::256B.v4.u32)."""
import sys
src = open(sys.argv[1]).read()
ins = sys.argv[3]
helper = ('__device__ __forceinline__ uint4 fuse_ld4_variant(const uint4* p) {\n'
          '  uint4 t;\n'
          f'  asm volatile("{ins} {{%0, %1, %2, %3}}, [%4];" : "=r"(t.x), "=r"(t.y), "=r"(t.z), "=r"(t.w) : "l"(p));\n'
          '  return t;\n}\n')
old = "const uint4 t = __ldg((const uint4*)p + k);"
assert old in src
src = src.replace(old, "const uint4 t = fuse_ld4_variant((const uint4*)p + k);")
i = src.index("template <int fuse_nw> __device__ __forceinline__ void fuse_ldg_words")
src = src[:i] + helper + src[i:]
open(sys.argv[2], "w").write(src)
