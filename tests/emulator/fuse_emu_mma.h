// Host emulations of the tensor-core helpers of the emitted CUDA (fuse-macros emit_cuda/lower/mma.rs,
// tf32.rs, pipeline.rs) and of the conversions its epilogues use (prelude.rs: f16, float -> int),
// for tests/emulated_tensor_cores.rs: the harness removes their inline-PTX definitions from the
// source and these stand in. `ldmatrix` and `mma.sync` are warp-collective (fuse_emu_warp: all 32
// lanes must reach them), with the fragment layouts of the PTX ISA; `mma.sync ... tf32` fails
// unless its A and B registers hold TF32 values (low 13 bits 0), so an operand that skipped the
// rounding is caught. `cp.async` copies are queued per thread and land either at once or at the
// `cp.async.wait_group` that retires their group (chosen at random), so a missing wait, or a stage
// refilled while a warp still reads it, gives wrong values.
#pragma once
#include <limits>
#include "fuse_emu.h"

// Shared addresses are 32-bit offsets from an anchor in the same image as the kernel's
// `__shared__` (static) arrays.
static unsigned char fuse_emu_anchor;
static inline unsigned int fuse_smem_addr(const void* p) {
  return (unsigned int)(long long)((const unsigned char*)p - &fuse_emu_anchor);
}
static inline unsigned char* fuse_emu_shared(unsigned int a) { return &fuse_emu_anchor + (int)a; }

static inline unsigned short fuse_emu_u16(unsigned int a) {
  unsigned short v;
  memcpy(&v, fuse_emu_shared(a), 2);
  return v;
}

struct fuse_emu_ldm {
  unsigned int* r;
  unsigned int addr;
  int n;  // matrices
  bool trans;
};

// Lane i gets, of matrix q (rows addressed by lanes 8q..8q+7), row i / 4's 16-bit elements
// 2 (i % 4) and 2 (i % 4) + 1 (`.trans`: column i / 4's elements of rows 2 (i % 4), 2 (i % 4) + 1).
static void fuse_emu_ldmatrix_op(void* const* lanes) {
  const fuse_emu_ldm* l0 = (const fuse_emu_ldm*)lanes[0];
  unsigned int rows[4][8];
  for (int q = 0; q < l0->n; ++q)
    for (int j = 0; j < 8; ++j) {
      const unsigned int a = ((const fuse_emu_ldm*)lanes[8 * q + j])->addr;
      if ((unsigned long long)fuse_emu_shared(a) % 16 != 0) fuse_emu_fail("ldmatrix row address not 16-byte aligned", -1);
      rows[q][j] = a;
    }
  for (int i = 0; i < 32; ++i) {
    const fuse_emu_ldm* l = (const fuse_emu_ldm*)lanes[i];
    if (l->n != l0->n || l->trans != l0->trans) fuse_emu_fail("lanes of a warp at different ldmatrix forms", -1);
    for (int q = 0; q < l0->n; ++q) {
      unsigned int lo, hi;
      if (l0->trans) {
        lo = fuse_emu_u16(rows[q][2 * (i % 4)] + 2 * (i / 4));
        hi = fuse_emu_u16(rows[q][2 * (i % 4) + 1] + 2 * (i / 4));
      } else {
        lo = fuse_emu_u16(rows[q][i / 4] + 4 * (i % 4));
        hi = fuse_emu_u16(rows[q][i / 4] + 4 * (i % 4) + 2);
      }
      l->r[q] = lo | (hi << 16);
    }
  }
}

#define FUSE_EMU_LDMATRIX(name, count, transposed)                   \
  static inline void name(unsigned int* r, unsigned int a) {         \
    fuse_emu_ldm args{r, a, count, transposed};                      \
    fuse_emu_warp(fuse_emu_ldmatrix_op, &args, __LINE__);            \
  }
FUSE_EMU_LDMATRIX(fuse_ldmatrix_x4, 4, false)
FUSE_EMU_LDMATRIX(fuse_ldmatrix_x2, 2, false)
FUSE_EMU_LDMATRIX(fuse_ldmatrix_x4_trans, 4, true)
FUSE_EMU_LDMATRIX(fuse_ldmatrix_x2_trans, 2, true)

struct fuse_emu_mma_args {
  float* d;
  const unsigned int* a;
  const unsigned int* b;
};

static inline float fuse_emu_f16(unsigned int h) {
  const unsigned int s = (h >> 15) & 1, e = (h >> 10) & 31, m = h & 1023;
  float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexpf((float)(m | 1024), (int)e - 25);
  return s ? -v : v;
}

// The f16 conversions (cvt.f32.f16, cvt.rn.f16.f32: to nearest even, overflow to infinity).
static inline float fuse_f16_to_f32(unsigned short h) { return fuse_emu_f16(h); }
static inline unsigned short fuse_f32_to_f16(float f) {
  const unsigned int x = __float_as_uint(f), sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return (unsigned short)(sign | 0x7e00u);
  if (ax >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u);
  if (ax < 0x38800000u) return (unsigned short)(sign | (unsigned int)lrintf(__uint_as_float(ax) * 16777216.0f));
  unsigned int h = (((ax >> 23) - 112u) << 10) | ((ax & 0x7fffffu) >> 13);
  const unsigned int rest = ax & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return (unsigned short)(sign | h);
}

// The float -> int casts (cvt.rzi.{s,u}{32,64}.f32): toward zero, saturating, NaN -> 0.
template <class T> static inline T fuse_emu_f2i(float f) {
  if (f != f) return 0;
  const double t = trunc((double)f);
  if (t <= (double)std::numeric_limits<T>::min()) return std::numeric_limits<T>::min();
  if (t >= (double)std::numeric_limits<T>::max()) return std::numeric_limits<T>::max();
  return (T)t;
}
static inline int fuse_f2i_s32(float f) { return fuse_emu_f2i<int>(f); }
static inline unsigned int fuse_f2i_u32(float f) { return fuse_emu_f2i<unsigned int>(f); }
static inline long long fuse_f2i_s64(float f) { return fuse_emu_f2i<long long>(f); }
static inline unsigned long long fuse_f2i_u64(float f) { return fuse_emu_f2i<unsigned long long>(f); }

// D = A B + C for m16n8k8 TF32 (`k8`) or m16n8k16 f16 (`!k8`), in double, then rounded once.
// (g = lane / 4, t = lane % 4.) TF32 A: a0 (g, t), a1 (g + 8, t), a2 (g, t + 4), a3 (g + 8, t + 4);
// B: b0 (k t, n g), b1 (k t + 4, n g). f16 A: register r holds rows g (r even), g + 8 (r odd),
// columns 2t + 8 (r / 2) and one more; B: register r holds k 2t + 8r and one more, n g.
// C and D: c0, c1 row g, c2, c3 row g + 8, columns 2t, 2t + 1.
// The language's erf (its device version ends in an inline-PTX ex2): the host's, within the
// tests' tolerance of it.
static inline float fuse_erff(float x) { return erff(x); }

static void fuse_emu_mma(void* const* lanes, bool k8) {
  double A[16][16], B[16][8], C[16][8];
  const int kk = k8 ? 8 : 16;
  for (int i = 0; i < 32; ++i) {
    const fuse_emu_mma_args* l = (const fuse_emu_mma_args*)lanes[i];
    const int g = i / 4, t = i % 4;
    if (k8) {
      for (int r = 0; r < 4; ++r) {
        if (l->a[r] & 0x1fffu) fuse_emu_fail("a TF32 mma's A register is not rounded to TF32", -1);
        A[g + 8 * (r % 2)][t + 4 * (r / 2)] = __uint_as_float(l->a[r]);
      }
      for (int r = 0; r < 2; ++r) {
        if (l->b[r] & 0x1fffu) fuse_emu_fail("a TF32 mma's B register is not rounded to TF32", -1);
        B[t + 4 * r][g] = __uint_as_float(l->b[r]);
      }
    } else {
      for (int r = 0; r < 4; ++r)
        for (int e = 0; e < 2; ++e) A[g + 8 * (r % 2)][2 * t + 8 * (r / 2) + e] = fuse_emu_f16((l->a[r] >> (16 * e)) & 0xffffu);
      for (int r = 0; r < 2; ++r)
        for (int e = 0; e < 2; ++e) B[2 * t + 8 * r + e][g] = fuse_emu_f16((l->b[r] >> (16 * e)) & 0xffffu);
    }
    for (int r = 0; r < 4; ++r) C[g + 8 * (r / 2)][2 * t + r % 2] = l->d[r];
  }
  for (int i = 0; i < 32; ++i) {
    const fuse_emu_mma_args* l = (const fuse_emu_mma_args*)lanes[i];
    const int g = i / 4, t = i % 4;
    for (int r = 0; r < 4; ++r) {
      const int row = g + 8 * (r / 2), col = 2 * t + r % 2;
      double s = C[row][col];
      for (int k = 0; k < kk; ++k) s += A[row][k] * B[k][col];
      l->d[r] = (float)s;
    }
  }
}
static void fuse_emu_mma_tf32_op(void* const* lanes) { fuse_emu_mma(lanes, true); }
static void fuse_emu_mma_f16_op(void* const* lanes) { fuse_emu_mma(lanes, false); }

static inline void fuse_mma_tf32(float* d, const unsigned int* a, const unsigned int* b) {
  fuse_emu_mma_args args{d, a, b};
  fuse_emu_warp(fuse_emu_mma_tf32_op, &args, __LINE__);
}
static inline void fuse_mma_f16(float* d, const unsigned int* a, const unsigned int* b) {
  fuse_emu_mma_args args{d, a, b};
  fuse_emu_warp(fuse_emu_mma_f16_op, &args, __LINE__);
}

struct fuse_emu_mma_s8_args {
  int* d;
  const unsigned int* a;
  const unsigned int* b;
};

// D = A B + C for m16n8k32 s8 with s32 accumulators, exactly, wrapping (no .satfinite). The PTX
// ISA's fragments are the f16 m16n8k16 ones with a byte pair for each half: A register r holds
// row g (r even) or g + 8 (r odd), columns 4t + 16 (r / 2) + 0..3; B register r holds k
// 4t + 16 r + 0..3, n g (lowest byte first); C and D as for f16.
static void fuse_emu_mma_s8_op(void* const* lanes) {
  int A[16][32], B[32][8];
  unsigned int C[16][8];
  for (int i = 0; i < 32; ++i) {
    const fuse_emu_mma_s8_args* l = (const fuse_emu_mma_s8_args*)lanes[i];
    const int g = i / 4, t = i % 4;
    for (int r = 0; r < 4; ++r)
      for (int e = 0; e < 4; ++e) A[g + 8 * (r % 2)][4 * t + 16 * (r / 2) + e] = (signed char)(l->a[r] >> (8 * e));
    for (int r = 0; r < 2; ++r)
      for (int e = 0; e < 4; ++e) B[4 * t + 16 * r + e][g] = (signed char)(l->b[r] >> (8 * e));
    for (int r = 0; r < 4; ++r) C[g + 8 * (r / 2)][2 * t + r % 2] = (unsigned int)l->d[r];
  }
  for (int i = 0; i < 32; ++i) {
    const fuse_emu_mma_s8_args* l = (const fuse_emu_mma_s8_args*)lanes[i];
    const int g = i / 4, t = i % 4;
    for (int r = 0; r < 4; ++r) {
      const int row = g + 8 * (r / 2), col = 2 * t + r % 2;
      unsigned int s = C[row][col];
      for (int k = 0; k < 32; ++k) s += (unsigned int)(A[row][k] * B[k][col]);
      l->d[r] = (int)s;
    }
  }
}
static inline void fuse_mma_s8(int* d, const unsigned int* a, const unsigned int* b) {
  fuse_emu_mma_s8_args args{d, a, b};
  fuse_emu_warp(fuse_emu_mma_s8_op, &args, __LINE__);
}

// cvt.rna.tf32.f32 on the bits (NaN stays NaN).
template <int fuse_n> static inline void fuse_tf32_frag(unsigned int* r) {
  for (int i = 0; i < fuse_n; ++i) {
    const unsigned int b = r[i];
    if ((b & 0x7fffffffu) > 0x7f800000u) {
      r[i] = 0x7fc00000u;
    } else {
      r[i] = (b & 0x80000000u) | (((b & 0x7fffffffu) + 0x1000u) & ~0x1fffu);
    }
  }
}

// cp.async: per thread, the copies of its open group and of its committed ones.
struct fuse_emu_copy {
  unsigned char* dst;
  const unsigned char* src;
  int n, nb;
  long long group;
};
static std::vector<std::vector<fuse_emu_copy>> fuse_emu_copies;
static std::vector<long long> fuse_emu_commits;

static void fuse_emu_land(const fuse_emu_copy& c) {
  memcpy(c.dst, c.src, c.n);
  memset(c.dst + c.n, 0, c.nb - c.n);
}

template <int fuse_nb> static inline void fuse_cp_async(unsigned int dst, const void* src, int n) {
  if (fuse_nb != 4 && fuse_nb != 8 && fuse_nb != 16) fuse_emu_fail("cp.async of a size other than 4, 8, 16", -1);
  if ((unsigned long long)fuse_emu_shared(dst) % fuse_nb != 0) fuse_emu_fail("cp.async to a misaligned shared address", -1);
  if (n < 0 || n > fuse_nb) fuse_emu_fail("cp.async source size past the copy size", -1);
  if ((size_t)fuse_emu_copies.size() <= (size_t)fuse_emu_current) {
    fuse_emu_copies.resize(fuse_emu_current + 1);
    fuse_emu_commits.resize(fuse_emu_current + 1, 0);
  }
  fuse_emu_copy c{fuse_emu_shared(dst), (const unsigned char*)src, n, fuse_nb, fuse_emu_commits[fuse_emu_current]};
  if (fuse_emu_next() % 2 == 0) {
    fuse_emu_land(c);
  } else {
    fuse_emu_copies[fuse_emu_current].push_back(c);
  }
}
static inline void fuse_cp_async_commit() {
  if ((size_t)fuse_emu_commits.size() <= (size_t)fuse_emu_current) {
    fuse_emu_copies.resize(fuse_emu_current + 1);
    fuse_emu_commits.resize(fuse_emu_current + 1, 0);
  }
  ++fuse_emu_commits[fuse_emu_current];
}
// Retires every group but the newest fuse_n committed ones (and lands their copies).
template <int fuse_n> static inline void fuse_cp_async_wait() {
  if ((size_t)fuse_emu_copies.size() <= (size_t)fuse_emu_current) return;
  std::vector<fuse_emu_copy>& q = fuse_emu_copies[fuse_emu_current];
  const long long done = fuse_emu_commits[fuse_emu_current] - fuse_n;
  std::vector<fuse_emu_copy> left;
  for (const fuse_emu_copy& c : q) {
    if (c.group < done) {
      fuse_emu_land(c);
    } else {
      left.push_back(c);
    }
  }
  q.swap(left);
}
// Every thread's copies retired at its end (the kernel waits for all of them).
static void fuse_emu_check_copies_retired() {
  for (const auto& q : fuse_emu_copies)
    if (!q.empty()) fuse_emu_fail("cp.async copies never waited for", -1);
}
