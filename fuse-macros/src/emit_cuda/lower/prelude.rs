//! Device helpers the kernel body calls, emitted only when used. Everything is inline PTX or a
//! CUDA builtin, so the source needs no `#include` (NVRTC compiles it without the toolkit headers).

/// What the body used; filled in while the body is emitted.
#[derive(Default)]
pub struct Needs {
    pub f16: bool,
    pub bf16: bool,
    /// Saturating float → int conversions.
    pub f2i: bool,
    /// Integer division/remainder with the IR's "by zero gives 0" rule.
    pub int_div: bool,
    pub oob: bool,
    /// 16-byte (and narrower) vector loads/stores through 32-bit words.
    pub words: bool,
    pub philox: bool,
    /// `rand16`'s helpers (with `philox`).
    pub philox16: bool,
    pub step: bool,
    pub erf: bool,
    /// `exp2` as one `ex2.approx.ftz` (subnormal results flush to zero).
    pub exp2: bool,
    /// `sigmoid` with its reciprocal's fast path inline (no slow-path call).
    pub sigmoid: bool,
    /// Tensor-core `dot` (ldmatrix, mma.sync, the swizzle).
    pub mma: bool,
    /// f32 → TF32 rounding (the general fallback `dot` of f32 tiles).
    pub tf32: bool,
    /// The TF32 tensor-core `dot` (m16n8k8, its swizzle and fragment rounding).
    pub tf32_mma: bool,
    /// `cp.async` and its groups (the pipelined loops of `dot`).
    pub pipeline: bool,
    /// TMA copies and `mbarrier`s (pipelined loads of tensor boxes, sm_90a).
    pub tma: bool,
    /// `wgmma` (sm_90a), per (input type, MN-major B) used.
    pub wgmma: std::collections::BTreeSet<crate::emit_cuda::analysis::tensor_cores::WgForm>,
}

const F16: &str = r#"// f16 <-> f32 (the bits travel as unsigned short).
__device__ __forceinline__ float fuse_f16_to_f32(unsigned short h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
__device__ __forceinline__ unsigned short fuse_f32_to_f16(float f) {
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
"#;

const BF16: &str = r#"// bf16 <-> f32. Widening is a shift, so it also works before sm_90.
__device__ __forceinline__ float fuse_bf16_to_f32(unsigned short h) {
  return __uint_as_float((unsigned int)h << 16);
}
__device__ __forceinline__ unsigned short fuse_f32_to_bf16(float f) {
  unsigned short h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
"#;

const F2I: &str = r#"// float -> int truncating toward zero; PTX cvt saturates and maps NaN to 0.
__device__ __forceinline__ int fuse_f2i_s32(float f) {
  int r;
  asm("cvt.rzi.s32.f32 %0, %1;" : "=r"(r) : "f"(f));
  return r;
}
__device__ __forceinline__ unsigned int fuse_f2i_u32(float f) {
  unsigned int r;
  asm("cvt.rzi.u32.f32 %0, %1;" : "=r"(r) : "f"(f));
  return r;
}
__device__ __forceinline__ long long fuse_f2i_s64(float f) {
  long long r;
  asm("cvt.rzi.s64.f32 %0, %1;" : "=l"(r) : "f"(f));
  return r;
}
__device__ __forceinline__ unsigned long long fuse_f2i_u64(float f) {
  unsigned long long r;
  asm("cvt.rzi.u64.f32 %0, %1;" : "=l"(r) : "f"(f));
  return r;
}
__device__ __forceinline__ int fuse_clamp_s32(int x, int lo, int hi) {
  return x < lo ? lo : (x > hi ? hi : x);
}
"#;

const INT_DIV: &str = r#"// Integer / and %: by zero gives 0; MIN / -1 wraps (no trap, no UB).
__device__ __forceinline__ int fuse_div(int a, int b) {
  return b == 0 ? 0 : (b == -1 ? (int)(0u - (unsigned int)a) : a / b);
}
__device__ __forceinline__ int fuse_rem(int a, int b) {
  return (b == 0 || b == -1) ? 0 : a % b;
}
__device__ __forceinline__ long long fuse_div(long long a, long long b) {
  return b == 0 ? 0 : (b == -1 ? (long long)(0ull - (unsigned long long)a) : a / b);
}
__device__ __forceinline__ long long fuse_rem(long long a, long long b) {
  return (b == 0 || b == -1) ? 0 : a % b;
}
__device__ __forceinline__ unsigned int fuse_div(unsigned int a, unsigned int b) { return b == 0 ? 0u : a / b; }
__device__ __forceinline__ unsigned int fuse_rem(unsigned int a, unsigned int b) { return b == 0 ? 0u : a % b; }
__device__ __forceinline__ unsigned long long fuse_div(unsigned long long a, unsigned long long b) { return b == 0 ? 0ull : a / b; }
__device__ __forceinline__ unsigned long long fuse_rem(unsigned long long a, unsigned long long b) { return b == 0 ? 0ull : a % b; }
"#;

const TF32: &str = r#"// f32 -> TF32 (10 mantissa bits, round to nearest, ties away from zero) as an f32: the inputs of
// an f32 `dot`, as tensor cores take them. NaN gives the canonical NaN the CPU interpreter gives.
__device__ __forceinline__ float fuse_tf32(float f) {
  if (f != f) return __int_as_float(0x7fc00000);
#if __CUDA_ARCH__ >= 800
  unsigned int r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(f));
  return __uint_as_float(r);
#else
  // The same rounding on the bits: half of the dropped field added to the magnitude.
  const unsigned int b = __float_as_uint(f);
  return __uint_as_float((b & 0x80000000u) | (((b & 0x7fffffffu) + 0x1000u) & ~0x1fffu));
#endif
}
"#;

const OOB: &str = r#"// Records the first out-of-bounds access: fuse_err[0] = parameter index + 1, fuse_err[1] = offset.
__device__ __noinline__ void fuse_oob(unsigned long long* fuse_err, unsigned long long param, long long offset) {
  if (atomicCAS(&fuse_err[0], 0ull, param + 1ull) == 0ull) fuse_err[1] = (unsigned long long)offset;
}
"#;

const WORDS: &str = r#"// fuse_nw 32-bit words at a (4*fuse_nw)-byte aligned global address; fuse_nw is 1, 2 or a multiple of 4,
// so every access is one 4-, 8- or 16-byte vector instruction.
template <int fuse_nw> __device__ __forceinline__ void fuse_ldg_words(unsigned int* w, const void* p) {
  if (fuse_nw == 1) {
    w[0] = __ldg((const unsigned int*)p);
  } else if (fuse_nw == 2) {
    const uint2 t = __ldg((const uint2*)p);
    w[0] = t.x; w[1] = t.y;
  } else {
#pragma unroll
    for (int k = 0; k < fuse_nw / 4; ++k) {
      const uint4 t = __ldg((const uint4*)p + k);
      w[4 * k] = t.x; w[4 * k + 1] = t.y; w[4 * k + 2] = t.z; w[4 * k + 3] = t.w;
    }
  }
}
template <int fuse_nw> __device__ __forceinline__ void fuse_ld_words(unsigned int* w, const void* p) {
  if (fuse_nw == 1) {
    w[0] = *(const unsigned int*)p;
  } else if (fuse_nw == 2) {
    const uint2 t = *(const uint2*)p;
    w[0] = t.x; w[1] = t.y;
  } else {
#pragma unroll
    for (int k = 0; k < fuse_nw / 4; ++k) {
      const uint4 t = ((const uint4*)p)[k];
      w[4 * k] = t.x; w[4 * k + 1] = t.y; w[4 * k + 2] = t.z; w[4 * k + 3] = t.w;
    }
  }
}
template <int fuse_nw> __device__ __forceinline__ void fuse_st_words(void* p, const unsigned int* w) {
  if (fuse_nw == 1) {
    *(unsigned int*)p = w[0];
  } else if (fuse_nw == 2) {
    *(uint2*)p = make_uint2(w[0], w[1]);
  } else {
#pragma unroll
    for (int k = 0; k < fuse_nw / 4; ++k) ((uint4*)p)[k] = make_uint4(w[4 * k], w[4 * k + 1], w[4 * k + 2], w[4 * k + 3]);
  }
}
"#;

const PHILOX: &str = r#"// Philox4x32-10 (Random123, as Triton uses it) and Triton's uint -> uniform float mapping.
__device__ __forceinline__ uint4 fuse_philox(unsigned int c0, unsigned int c1, unsigned int k0, unsigned int k1) {
  unsigned int c2 = 0u, c3 = 0u;
#pragma unroll
  for (int r = 0; r < 10; ++r) {
    // One 32 x 32 -> 64-bit multiply per product (IMAD.WIDE.U32) instead of separate high and
    // low halves: NVRTC does not fuse __umulhi with the low product itself.
    unsigned int hi_b, lo_b, hi_a, lo_a;
    asm("{ .reg .b64 t; mul.wide.u32 t, %2, 0xCD9E8D57; mov.b64 {%0, %1}, t; }" : "=r"(lo_b), "=r"(hi_b) : "r"(c2));
    asm("{ .reg .b64 t; mul.wide.u32 t, %2, 0xD2511F53; mov.b64 {%0, %1}, t; }" : "=r"(lo_a), "=r"(hi_a) : "r"(c0));
    c0 = hi_b ^ c1 ^ k0;
    c1 = lo_b;
    c2 = hi_a ^ c3 ^ k1;
    c3 = lo_a;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return make_uint4(c0, c1, c2, c3);
}
__device__ __forceinline__ float fuse_uniform(unsigned int x) {
  int i = (int)x;
  if (i < 0) i = ~i;
  return __fmul_rn((float)i, 4.6566127342e-10f);  // __fmul_rn: never contracted into an FMA
}
// rand(seed, offset)'s Philox word for one offset: counter (o >> 2, o >> 34, 0, 0), output lane o & 3.
__device__ __forceinline__ unsigned int fuse_rand_bits(unsigned long long seed, unsigned long long o) {
  const unsigned long long b = o >> 2;
  const uint4 r = fuse_philox((unsigned int)b, (unsigned int)(b >> 32), (unsigned int)seed, (unsigned int)(seed >> 32));
  const unsigned int s = (unsigned int)o & 3u;
  return s == 0u ? r.x : (s == 1u ? r.y : (s == 2u ? r.z : r.w));
}
__device__ __forceinline__ float fuse_rand(unsigned long long seed, unsigned long long o) {
  return fuse_uniform(fuse_rand_bits(seed, o));
}
// `fuse_uniform(x) > p` as `x >= L && x <= ~L` with L = fuse_rand_gt_bound(p). The constant is
// 2^-31 * (1 - 2^-24), and multiplying a positive float y by it rounds to the float just below y,
// so with i = x ^ sign(x) in [0, 2^31): fuse_uniform(x) > p  <=>  float(i) > Q, Q the float just
// above p * 2^31 (exact); L is one past the largest i with float(i) <= Q.
__device__ __forceinline__ unsigned int fuse_rand_gt_bound(float p) {
  if (!(p < 1.0f)) return 0x80000000u;  // NaN, or at least every value's 1 - 2^-24: none
  if (p < 0.0f) return 0u;  // every lane
  if (p == 0.0f) return 1u;  // every lane but i = 0
  const float Q = __uint_as_float(__float_as_uint(p * 2147483648.0f) + 1u);
  if (Q >= 2147483648.0f) return 0x80000000u;
  if (Q < 16777216.0f) return (unsigned int)floorf(Q) + 1u;  // every i <= 2^24 is exact
  // Q is a whole number in [2^e, 2^(e+1)), e >= 24: i in (Q, Q + ulp/2) rounds down to Q, and
  // Q + ulp/2 too when Q's significand is even (ties to even).
  const unsigned int b = __float_as_uint(Q);
  const unsigned int half_ulp = 1u << (((b >> 23) - 127u) - 24u);
  return (unsigned int)Q + half_ulp - (b & 1u) + 1u;
}
"#;

const PHILOX16: &str = r#"// rand16(seed, offset)'s 16-bit half-word for one offset: counter (o >> 3, o >> 35, 0, 0),
// half-word o & 7 (word (o & 7) >> 1, its low half for even o, its high half for odd).
__device__ __forceinline__ unsigned int fuse_rand16_bits(unsigned long long seed, unsigned long long o) {
  const unsigned long long b = o >> 3;
  const uint4 r = fuse_philox((unsigned int)b, (unsigned int)(b >> 32), (unsigned int)seed, (unsigned int)(seed >> 32));
  const unsigned int s = ((unsigned int)o >> 1) & 3u;
  const unsigned int w = s == 0u ? r.x : (s == 1u ? r.y : (s == 2u ? r.z : r.w));
  return ((unsigned int)o & 1u) ? (w >> 16) : (w & 0xFFFFu);
}
// (h + 1/2) / 2^16: the product and the sum are exact (17 significant bits), so any rounding agrees.
__device__ __forceinline__ float fuse_uniform16(unsigned int h) {
  return __fmaf_rn((float)h, 1.52587890625e-05f, 7.62939453125e-06f);
}
__device__ __forceinline__ float fuse_rand16(unsigned long long seed, unsigned long long o) {
  return fuse_uniform16(fuse_rand16_bits(seed, o));
}
// `fuse_uniform16(h) > p` as `h >= M`, M = fuse_rand16_gt_bound(p): how many h have
// (h + 1/2) / 2^16 <= p, floor(p * 2^16 + 1/2) clamped to [0, 2^16] (exact in double); NaN: none.
__device__ __forceinline__ unsigned int fuse_rand16_gt_bound(float p) {
  if (p != p) return 65536u;
  const double m = floor((double)p * 65536.0 + 0.5);
  return m <= 0.0 ? 0u : (m >= 65536.0 ? 65536u : (unsigned int)m);
}
"#;

const ERF: &str = r#"// erff in the form CUDA's libdevice uses (two 7-term polynomials, the one for |x| >= ~1 feeding
// 1 - 2^-|.|), with the coefficients of the NVRTC 13 wheel's libdevice, but both polynomials
// evaluated and one select at the end instead of a select per coefficient: the selects run on the
// ALU pipe, which bounds kernels like GELU + dropout; the FMAs have room. Within 2 ulp of erf
// (GPU test); CUDA 13.0's own erff has slightly different coefficients (results within 1 ulp).
__device__ __forceinline__ float fuse_erff(float x) {
  const float a = fabsf(x), s = x * x;
  // |x| < 1.0037584: erf(x) = x + x * p(x^2)
  float p = 6.7498600401449948549e-05f;
  p = fmaf(s, p, -7.6476467074826359749e-04f);
  p = fmaf(s, p, 5.1430170424282550812e-03f);
  p = fmaf(s, p, -2.6827244088053703308e-02f);
  p = fmaf(s, p, 1.1282869428396224976e-01f);
  p = fmaf(s, p, -3.7612557411193847656e-01f);
  p = fmaf(s, p, 1.2837916612625122070e-01f);
  // above: erf(x) = sign(x) * (1 - 2^-|x + x * q(|x|)|)
  float q = __int_as_float(0x388e49b7);
  q = fmaf(a, q, __int_as_float(0xba73c723));
  q = fmaf(a, q, __int_as_float(0x3be3e044));
  q = fmaf(a, q, __int_as_float(0xbd19b6f7));
  q = fmaf(a, q, __int_as_float(0x3e2072ab));
  q = fmaf(a, q, __int_as_float(0x3f6a18f3));
  q = fmaf(a, q, __int_as_float(0x3f20f3eb));
  const float small = fmaf(x, p, x);
  float e;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(-fabsf(fmaf(x, q, x))));
  const float big = copysignf(1.0f - e, x);
  return a >= 1.0037584304809570312f ? big : small;
}
"#;

const EXP2: &str = r#"// 2^x in one MUFU instruction: `ex2.approx` (2 ulp, as exp2f) with subnormal results flushed
// to +0, where exp2f adds a range fix-up around it (3 more instructions an element, which
// softmax-like loops of half-precision data are bound by). The host build (tests' emulator) flushes
// the same way.
__device__ __forceinline__ float fuse_exp2(float x) {
#ifdef __CUDA_ARCH__
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  const float y = exp2f(x);
  return y < 1.17549435e-38f ? 0.0f : y;
#endif
}
"#;

const SIGMOID: &str = r#"// 1 / (1 + e^-x) without a division's slow-path call: for y = 1 + e^-x below 2^126 the
// reciprocal `rcp.approx` refined by one FMA Newton step, which equals the IEEE `1.0f / y` bit for
// bit there (an exhaustive check over every such float on the GPU agrees);
// past it (x < -87.3, where 1 / (1 + e^-x) = e^x to far below an ulp) `expf(x)`, NaN included.
__device__ __forceinline__ float fuse_sigmoid(float x) {
  const float y = 1.0f + expf(-x);
  const bool normal_reciprocal = y < 8.50705917e+37f;  // 2^126
#ifdef __CUDA_ARCH__
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(y));
  return normal_reciprocal ? fmaf(r, fmaf(-y, r, 1.0f), r) : expf(x);
#else
  return normal_reciprocal ? 1.0f / y : expf(x);
#endif
}
"#;

const STEP: &str = r#"// The next value of a `for` counter that runs while < hi, without overflowing past hi.
__device__ __forceinline__ int fuse_next(int k, int hi, int step) {
  return (unsigned int)hi - (unsigned int)k > (unsigned int)step ? k + step : hi;
}
__device__ __forceinline__ unsigned int fuse_next(unsigned int k, unsigned int hi, unsigned int step) {
  return hi - k > step ? k + step : hi;
}
__device__ __forceinline__ long long fuse_next(long long k, long long hi, long long step) {
  return (unsigned long long)hi - (unsigned long long)k > (unsigned long long)step ? k + step : hi;
}
__device__ __forceinline__ unsigned long long fuse_next(unsigned long long k, unsigned long long hi, unsigned long long step) {
  return hi - k > step ? k + step : hi;
}
"#;

impl Needs {
    /// The helper definitions, in a fixed order.
    pub fn text(&self) -> String {
        let parts: [(bool, &str); 17] = [
            (self.f16, F16),
            (self.bf16, BF16),
            (self.f2i, F2I),
            (self.int_div, INT_DIV),
            (self.oob, OOB),
            (self.words, WORDS),
            (self.philox, PHILOX),
            (self.philox16, PHILOX16),
            (self.step, STEP),
            (self.erf, ERF),
            (self.exp2, EXP2),
            (self.sigmoid, SIGMOID),
            (self.mma, super::mma::PRELUDE),
            (self.tf32_mma, super::tf32::PRELUDE),
            (self.tf32, TF32),
            (self.pipeline, super::pipeline::PRELUDE),
            (self.tma, super::tma::PRELUDE),
        ];
        let mut out = String::new();
        for (used, text) in parts {
            if used {
                out.push_str(text);
            }
        }
        if !self.wgmma.is_empty() {
            out.push_str(&super::wgmma::prelude(&self.wgmma));
        }
        out
    }
}
