//! Shared by the integration tests: the example kernels (from the fuse-kernels crate) and
//! small helpers for fresh random inputs and float64 comparisons.
#![allow(dead_code)]

pub mod attention_checks;
pub mod backend;
pub mod dot;
pub mod quant_ffn;

pub use fuse_kernels::add_activation;
pub use fuse_kernels::add_mul;
pub use fuse_kernels::add_rmsnorm;
pub use fuse_kernels::attention;
pub use fuse_kernels::bias_gelu_dropout;
pub use fuse_kernels::cross_entropy;
pub use fuse_kernels::ffn_sublayer;
pub use fuse_kernels::l2norm;
pub use fuse_kernels::layernorm;
pub use fuse_kernels::layernorm_quant;
pub use fuse_kernels::matmul_int8;
pub use fuse_kernels::qk_norm_rope;
pub use fuse_kernels::silu_and_mul;
pub use fuse_kernels::softmax;

use fuse::{Buffer, Device, KernelSpec, LaunchConfig};

/// Kernels that exercise emitter paths the examples do not.
pub mod paths {
    use fuse::fused_kernel;

    /// A rem-indexed gather (`(offs - shift) % h`, negative for the first lanes when `shift > 0`) and
    /// a two-sided mask: the vector paths the emitter licenses by chunk-uniform masks and
    /// chunk-consecutive remainders, against the CPU interpreter bit for bit, over shapes that take
    /// both the specialised (multiples of 16) and the per-lane paths.
    #[fused_kernel]
    pub fn rem_gather<const BLOCK: usize>(
        x: *const f16,
        bias: *const f16,
        out: *mut f16,
        n: i32,
        lo: i32,
        h: i32,
        shift: i32,
    ) {
        let offs = program_id(0) * BLOCK + arange(0, BLOCK);
        let m = (offs < n) & (offs >= lo);
        let r = (offs - shift) % h;
        let b = load(bias + r, m & (r >= 0), 0.5);
        store(out + offs, load(x + offs, m, 0.0) * 2.0 + b, m);
    }

    /// `erf` alone, for its accuracy over the whole float range.
    #[fused_kernel]
    pub fn erf_only<const BLOCK: usize>(x: *const f32, out: *mut f32, n: i32) {
        let offs = program_id(0) * BLOCK + arange(0, BLOCK);
        let m = offs < n;
        store(out + offs, erf(load(x + offs, m)), m);
    }

    /// Every float constant of `T`, stored in this order: `INFINITY`, `NEG_INFINITY`, `NAN`, `MAX`,
    /// `MIN`, `MIN_POSITIVE`, `EPSILON`, then 0.
    #[fused_kernel]
    pub fn float_consts<T: Float>(out: *mut T) {
        let i = arange(0, 8);
        let low =
            where_(i == 0, T::INFINITY, where_(i == 1, T::NEG_INFINITY, where_(i == 2, T::NAN, T::MAX)));
        let high = where_(i == 4, T::MIN, where_(i == 5, T::MIN_POSITIVE, where_(i == 6, T::EPSILON, 0.0)));
        store(out + i, where_(i < 4, low, high));
    }

    /// `sigmoid` alone, for its accuracy over the whole float range (both of the GPU's branches).
    #[fused_kernel]
    pub fn sigmoid_only<const BLOCK: usize>(x: *const f32, out: *mut f32, n: i32) {
        let offs = program_id(0) * BLOCK + arange(0, BLOCK);
        let m = offs < n;
        store(out + offs, sigmoid(load(x + offs, m)), m);
    }

    /// `rand(seed, offs) > p` and `p < rand(seed, offs)` (the GPU tests them on the Philox words
    /// with integer bounds) next to `rand(seed, offs) >= p` (tested on the floats).
    #[fused_kernel]
    pub fn rand_threshold<const BLOCK: usize>(out: *mut f32, seed: u64, p: f32, n: i32) {
        let offs = program_id(0) * BLOCK + arange(0, BLOCK);
        let m = offs < n;
        let r = rand(seed, offs);
        let v = where_(r > p, 1.0, 0.0) + where_(p < r, 2.0, 0.0) + where_(r >= p, 4.0, 0.0);
        store(out + offs, v, m);
    }

    /// `rand16` at offsets `offs + base`: its value, and `r > p`, `p < r` (on the GPU integer
    /// tests of the half-word) next to `r >= p` (on the floats). `base % 8 != 0` takes the GPU's
    /// per-element path, a multiple of 8 the one-Philox-per-eight-lanes path.
    #[fused_kernel]
    pub fn rand16_threshold<const BLOCK: usize>(
        out: *mut f32,
        vals: *mut f32,
        seed: u64,
        p: f32,
        base: i32,
        n: i32,
    ) {
        let offs = program_id(0) * BLOCK + arange(0, BLOCK);
        let m = offs < n;
        let r = rand16(seed, offs + base);
        let v = where_(r > p, 1.0, 0.0) + where_(p < r, 2.0, 0.0) + where_(r >= p, 4.0, 0.0);
        store(out + offs, v, m);
        store(vals + offs, r, m);
    }
    /// Lane `c` of each program's row reads `src[row + (c ^ 1)]` and `src[row + (c ^ 3)]`
    /// (offsets permuted within each vector chunk, `affine::Fact::ChunkXor`: one vector read, the
    /// lanes swapped in registers); lanes at or past `limit[0]` read `other`. Host-emulated in
    /// tests/emulated_cuda.rs, run on the CPU and the GPU in tests/elementwise.rs.
    #[fused_kernel]
    pub fn xor_gather<T: Float, const N: usize>(
        src: *const T,
        limit: *const i32,
        out1: *mut T,
        out3: *mut T,
    ) {
        let c = arange(0, N);
        let row = program_id(0) * N;
        let lim = load(limit);
        store(out1 + row + c, load(src + row + (c ^ 1), c < lim, -1.0));
        store(out3 + row + c, load(src + row + (c ^ 3), c < lim, -1.0));
    }
    /// Four rows of `N` per program split into even and odd columns, rotated as RoPE pairs by the
    /// cosines and sines `cs` (`[N / 2]` each) and joined back (`out`), the pairs' squared norms
    /// summed per row (`norms`), and the program's first row with each pair swapped by a 1-D
    /// split and join (`swapped`).
    #[fused_kernel]
    pub fn pair_rotate<const N: usize>(
        x: *const f32,
        cs: *const f32,
        out: *mut f32,
        norms: *mut f32,
        swapped: *mut f32,
    ) {
        let rows = program_id(0) * 4 + arange(0, 4);
        let c = arange(0, N);
        let offs = rows.expand_dims(1) * N + c.expand_dims(0);
        let (a, b) = split(load(x + offs)); // [4, N / 2]
        let j = arange(0, N / 2);
        let cos = load(cs + j).expand_dims(0);
        let sin = load(cs + N / 2 + j).expand_dims(0);
        store(out + offs, join(a * cos - b * sin, b * cos + a * sin));
        store(norms + rows, (a * a + b * b).sum(1));
        let (even, odd) = load(x + program_id(0) * 4 * N + c).split();
        store(swapped + program_id(0) * N + c, join(odd, even));
    }
    /// [`pair_rotate`] in float64 for `programs` programs of width `n` (`x`: the programs' rows,
    /// `cs`: the `n / 2` cosines then the sines): `[out, norms, swapped]`.
    pub fn pair_rotate_reference(x: &[f32], cs: &[f32], n: usize, programs: usize) -> [Vec<f64>; 3] {
        let h = n / 2;
        let (mut out, mut norms, mut swapped) =
            (vec![0.0; x.len()], vec![0.0; programs * 4], vec![0.0; programs * n]);
        for r in 0..programs * 4 {
            for p in 0..h {
                let (a, b) = (f64::from(x[r * n + 2 * p]), f64::from(x[r * n + 2 * p + 1]));
                let (co, si) = (f64::from(cs[p]), f64::from(cs[h + p]));
                norms[r] += a * a + b * b;
                out[r * n + 2 * p] = a * co - b * si;
                out[r * n + 2 * p + 1] = b * co + a * si;
            }
        }
        for prog in 0..programs {
            for k in 0..n {
                swapped[prog * n + k] = f64::from(x[prog * 4 * n + (k ^ 1)]);
            }
        }
        [out, norms, swapped]
    }
    /// Eight rows of `N` per program (`[8, N]`: warp slabs where a row is wider than 32 chunks
    /// and the warps divide the rows): each row's weights `1 / (1 + (v - max)^2)` normalised by
    /// their sum, scaled by a weight row and shifted by the row's minimum (`y`: axis-1 max, sum and
    /// min broadcast back), the row sums (`sums`) and their sums in pairs of rows (`pairs`: a
    /// reshape, so the sums also go to the length's layout through shared memory), and each
    /// lane's offset modulo a runtime `modulus[0]` (`cols`, from the flat `[8 N]` offsets, which
    /// share the tile's layout: stepped chunk by chunk where the modulus exceeds the chunk step,
    /// else divided lane by lane), and the maxima of the lanes as `[8 N / 32, 32]` rows (`groups`:
    /// a second column count of the tile's length, at most 32 chunks a row). No `exp` or
    /// `rand`: the host emulator runs no inline PTX.
    #[fused_kernel]
    pub fn row_stats<const N: usize>(
        x: *const f32,
        w: *const f32,
        modulus: *const i32,
        y: *mut f32,
        sums: *mut f32,
        pairs: *mut f32,
        cols: *mut i32,
        groups: *mut f32,
    ) {
        let n = load(modulus);
        let rows = arange(0, 8);
        let c = arange(0, N);
        let offs = program_id(0) * (8 * N) + rows.expand_dims(1) * N + c.expand_dims(0);
        let v = load(x + offs);
        let d = v - v.max(1).expand_dims(1);
        let e = 1.0 / (1.0 + d * d);
        let s = e.sum(1);
        store(y + offs, e / s.expand_dims(1) * load(w + c).expand_dims(0) + v.min(1).expand_dims(1));
        store(sums + program_id(0) * 8 + rows, s);
        store(pairs + program_id(0) * 2 + arange(0, 2), reshape(s, [2, 4]).sum(1));
        let flat = program_id(0) * (8 * N) + arange(0, 8 * N); // the tile's lanes, in its layout
        store(cols + flat, flat % n);
        // The same lanes as 32-column rows (another column count of the length): their maxima.
        let g = arange(0, 8 * N / 32);
        store(groups + program_id(0) * (8 * N / 32) + g, reshape(v, [8 * N / 32, 32]).max(1));
    }
    /// [`row_stats`]' outputs: `(y, sums, pairs, cols, groups)`.
    pub type RowStats = (Vec<f64>, Vec<f64>, Vec<f64>, Vec<i32>, Vec<f64>);

    /// [`row_stats`] in float64 for `programs` programs of width `n` with modulus `m`.
    pub fn row_stats_reference(x: &[f32], w: &[f32], n: usize, m: i32, programs: usize) -> RowStats {
        let (mut y, mut sums) = (vec![0.0; x.len()], vec![0.0; programs * 8]);
        for r in 0..programs * 8 {
            let row: Vec<f64> = x[r * n..(r + 1) * n].iter().map(|&v| f64::from(v)).collect();
            let (hi, lo) =
                row.iter().fold((f64::NEG_INFINITY, f64::INFINITY), |(a, b), &v| (a.max(v), b.min(v)));
            let e: Vec<f64> = row.iter().map(|v| 1.0 / (1.0 + (v - hi) * (v - hi))).collect();
            let s: f64 = e.iter().sum();
            sums[r] = s;
            for c in 0..n {
                y[r * n + c] = e[c] / s * f64::from(w[c]) + lo;
            }
        }
        let pairs = sums.chunks(4).map(|q| q.iter().sum()).collect();
        let cols = (0..x.len()).map(|o| (o as i64 % i64::from(m)) as i32).collect();
        let groups =
            x.chunks(32).map(|q| q.iter().fold(f64::NEG_INFINITY, |a, &v| a.max(f64::from(v)))).collect();
        (y, sums, pairs, cols, groups)
    }
    /// Four rows of `N` per program scaled by a weight row `w` (`[N]`, broadcast down the rows:
    /// a column layout), their row sums and maxima (axis-1 reductions: a row layout), and full
    /// reductions of those row and column layout tiles: `out[4 p..4 p + 4]` = the sum of the row
    /// sums, the max of the row maxima, the sum of `w`, the min of `2 * rowsum - rowmax`.
    #[fused_kernel]
    pub fn layout_totals<const N: usize>(x: *const f32, w: *const f32, out: *mut f32) {
        let rows = arange(0, 4);
        let cols = arange(0, N);
        let v = load(x + program_id(0) * 4 * N + rows.expand_dims(1) * N + cols.expand_dims(0));
        let wc = load(w + cols);
        let y = v * wc.expand_dims(0);
        let rs = y.sum(1);
        let rm = y.max(1);
        store(out + program_id(0) * 4, sum(rs));
        store(out + program_id(0) * 4 + 1, max(rm));
        store(out + program_id(0) * 4 + 2, sum(wc));
        store(out + program_id(0) * 4 + 3, min(rs * 2.0 - rm));
    }
}

/// Every example kernel (and the [`paths`] kernels) with the const-generic values it is compiled for in tests;
/// a generic kernel's every instantiation.
pub fn example_specs() -> Vec<(&'static KernelSpec, Vec<u64>)> {
    vec![
        (&add_mul::add_mul::f32::SPEC, vec![1024]),
        (&add_mul::add_mul::f16::SPEC, vec![1024]),
        (&add_mul::add_mul::bf16::SPEC, vec![1024]),
        (&softmax::softmax::f32::SPEC, vec![1024]),
        (&softmax::softmax::f16::SPEC, vec![4096]),
        (&softmax::softmax::bf16::SPEC, vec![4096]),
        (&layernorm::layernorm::f32::SPEC, vec![1024]),
        (&layernorm::layernorm::f16::SPEC, vec![8192]),
        (&layernorm::layernorm::bf16::SPEC, vec![8192]),
        (&layernorm::layernorm_wide::SPEC, vec![1024]),
        (&bias_gelu_dropout::bias_gelu_dropout::f32::SPEC, vec![1024]),
        (&bias_gelu_dropout::bias_gelu_dropout::f16::SPEC, vec![1024]),
        (&bias_gelu_dropout::bias_gelu_dropout::bf16::SPEC, vec![1024]),
        (&bias_gelu_dropout::bias_gelu_dropout16::f32::SPEC, vec![1024]),
        (&bias_gelu_dropout::bias_gelu_dropout16::f16::SPEC, vec![1024]),
        (&add_rmsnorm::add_rmsnorm::SPEC, vec![4096]),
        (&silu_and_mul::silu_and_mul::SPEC, vec![1024]),
        (&layernorm_quant::layernorm_quant::SPEC, vec![4096]),
        (&l2norm::l2norm::SPEC, vec![1024]),
        (&paths::rem_gather::SPEC, vec![1024]),
        (&paths::rand_threshold::SPEC, vec![1024]),
        (&paths::rand16_threshold::SPEC, vec![1024]),
        (&paths::erf_only::SPEC, vec![1024]),
        (&paths::float_consts::f32::SPEC, vec![]),
        (&paths::float_consts::f16::SPEC, vec![]),
        (&paths::float_consts::bf16::SPEC, vec![]),
        (&paths::pair_rotate::SPEC, vec![128]),
        (&paths::layout_totals::SPEC, vec![128]),
        (&paths::row_stats::SPEC, vec![256]),
    ]
}

/// A kernel to compile with NVRTC: its spec, const generics, warps, architecture, and whether the
/// launch-time specialisations are all on (the proven, unchecked paths) or all off.
pub type CompileCase = (&'static KernelSpec, Vec<u64>, u32, &'static str, bool);

/// Compiles each case with NVRTC (no GPU needed), panicking with the compiler's message at the
/// first that fails; prints each one's time.
pub fn compile_each(cases: Vec<CompileCase>) {
    for (spec, consts, warps, arch, all) in cases {
        let values = vec![all; spec.specializations().len()];
        let t0 = std::time::Instant::now();
        let what =
            format!("{} {consts:?} with {warps} warps for {arch} (specialisations {all})", spec.name());
        if let Err(e) = spec.compile_for_arch_with(arch, &consts, warps, &values) {
            panic!("{what} failed:\n{e}");
        }
        println!("{what}: {:.1} s", t0.elapsed().as_secs_f64());
    }
}

/// A small deterministic-per-run generator (xorshift*), seeded from the clock so every run sees
/// fresh inputs; the seed is printed for replay.
pub struct Rng(u64);

impl Rng {
    pub fn fresh(test: &str) -> Rng {
        let seed = fuse_testkit::fresh_seed("FUSE_TEST_SEED");
        println!("{test}: seed {seed} (replay with FUSE_TEST_SEED={seed})");
        Rng(seed | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in [-1, 1) scaled by `scale`.
    pub fn vec(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n).map(|_| ((self.next_u64() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale).collect()
    }
}

/// Max abs error where every element is within `atol + rtol*|want|`; panics with the first
/// offender otherwise (NaN never passes).
pub fn assert_close(what: &str, got: &[f64], want: &[f64], atol: f64, rtol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= atol + rtol * w.abs(), "{what}: element {i}: got {g}, want {w}");
    }
}

pub fn f64s(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&x| f64::from(x)).collect()
}

pub fn f16s(v: &[f32]) -> Vec<fuse::half::f16> {
    v.iter().map(|&x| fuse::half::f16::from_f32(x)).collect()
}

pub fn bf16s(v: &[f32]) -> Vec<fuse::half::bf16> {
    v.iter().map(|&x| fuse::half::bf16::from_f32(x)).collect()
}

pub fn bf16_to_f64(v: &[fuse::half::bf16]) -> Vec<f64> {
    v.iter().map(|x| f64::from(x.to_f32())).collect()
}

pub fn f16_to_f64(v: &[fuse::half::f16]) -> Vec<f64> {
    v.iter().map(|x| f64::from(x.to_f32())).collect()
}

/// f32, f16 or bf16: the element types of the generic add_mul, softmax and LayerNorm kernels, with
/// what a test needs to state a case once for all of them.
pub trait Elem: fuse::Float {
    /// "f32", "f16" or "bf16", for failure messages.
    const NAME: &'static str;
    const NAN: Self;
    fn from_f32s(v: &[f32]) -> Vec<Self>;
    fn to_f64s(v: &[Self]) -> Vec<f64>;
    /// The bit patterns, for comparisons that NaN payloads must pass too.
    fn bits(v: &[Self]) -> Vec<u32>;
}

impl Elem for f32 {
    const NAME: &'static str = "f32";
    const NAN: Self = f32::NAN;
    fn from_f32s(v: &[f32]) -> Vec<Self> {
        v.to_vec()
    }
    fn to_f64s(v: &[Self]) -> Vec<f64> {
        f64s(v)
    }
    fn bits(v: &[Self]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }
}

impl Elem for fuse::half::f16 {
    const NAME: &'static str = "f16";
    const NAN: Self = fuse::half::f16::NAN;
    fn from_f32s(v: &[f32]) -> Vec<Self> {
        f16s(v)
    }
    fn to_f64s(v: &[Self]) -> Vec<f64> {
        f16_to_f64(v)
    }
    fn bits(v: &[Self]) -> Vec<u32> {
        v.iter().map(|x| u32::from(x.to_bits())).collect()
    }
}

impl Elem for fuse::half::bf16 {
    const NAME: &'static str = "bf16";
    const NAN: Self = fuse::half::bf16::NAN;
    fn from_f32s(v: &[f32]) -> Vec<Self> {
        bf16s(v)
    }
    fn to_f64s(v: &[Self]) -> Vec<f64> {
        bf16_to_f64(v)
    }
    fn bits(v: &[Self]) -> Vec<u32> {
        v.iter().map(|x| u32::from(x.to_bits())).collect()
    }
}

/// Uploads every input to `d`, runs `launch` into a NaN-poisoned output of `len` elements and
/// returns it as f64.
pub fn run_on<T: Elem>(
    d: &Device,
    inputs: &[&[T]],
    len: usize,
    launch: impl FnOnce(&[&Buffer<T>], &mut Buffer<T>) -> fuse::Result<()>,
) -> Vec<f64> {
    let bufs: Vec<Buffer<T>> = inputs.iter().map(|v| d.upload(v).unwrap()).collect();
    let refs: Vec<&Buffer<T>> = bufs.iter().collect();
    let mut out = d.upload(&vec![T::NAN; len]).unwrap();
    launch(&refs, &mut out).unwrap();
    T::to_f64s(&out.to_vec().unwrap())
}

/// `add_mul` on `d` in blocks of `B` (`warps`: the runtime's choice if `None`).
pub fn add_mul_on<T: Elem, const B: usize>(
    d: &Device,
    warps: Option<u32>,
    x: &[T],
    y: &[T],
    z: &[T],
) -> Vec<f64> {
    let n = x.len();
    let c = LaunchConfig::new(n.div_ceil(B) as u32);
    let c = match warps {
        Some(w) => c.num_warps(w),
        None => c,
    };
    run_on(d, &[x, y, z], n, |inputs, out| {
        add_mul::add_mul::launch::<T, B>(d, c, inputs[0], inputs[1], inputs[2], out, n as i32)
    })
}

/// Row-wise softmax of `x` (`rows` x `cols`) on `d`, one row per tile of `B`.
pub fn softmax_on<T: Elem, const B: usize>(d: &Device, x: &[T], rows: usize, cols: usize) -> Vec<f64> {
    run_on(d, &[x], rows * cols, |inputs, out| {
        let cols = cols as i32;
        softmax::softmax::launch::<T, B>(d, rows as u32, out, inputs[0], cols, cols, cols)
    })
}

/// LayerNorm (weight `w`, bias `b`, eps 1e-5) of `x` (`rows` x `cols`) on `d`, one row per tile of `B`.
pub fn layernorm_on<T: Elem, const B: usize>(
    d: &Device,
    x: &[T],
    w: &[T],
    b: &[T],
    rows: usize,
    cols: usize,
) -> Vec<f64> {
    run_on(d, &[x, w, b], rows * cols, |inputs, y| {
        let ([x, w, b], cols) = ([inputs[0], inputs[1], inputs[2]], cols as i32);
        layernorm::layernorm::launch::<T, B>(d, rows as u32, x, y, w, b, cols, cols, 1e-5)
    })
}

/// The looped f32 LayerNorm (`layernorm_wide`: any row width, column blocks of `B`) on `d`.
pub fn layernorm_wide_on<const B: usize>(
    d: &Device,
    warps: u32,
    x: &[f32],
    w: &[f32],
    b: &[f32],
    rows: usize,
    cols: usize,
) -> Vec<f64> {
    run_on(d, &[x, w, b], rows * cols, |inputs, y| {
        let c = LaunchConfig::new(rows as u32).num_warps(warps);
        let [x, w, b] = [inputs[0], inputs[1], inputs[2]];
        layernorm::layernorm_wide::launch::<B>(d, c, x, y, w, b, cols as i32, cols as i32, 1e-5)
    })
}

/// `softmax_rows` (several narrow rows per program, the tile its launcher picks) on `d`.
pub fn softmax_rows_on<T: Elem>(d: &Device, x: &[T], rows: usize, cols: usize) -> Vec<f64> {
    run_on(d, &[x], rows * cols, |inputs, out| softmax::launch_rows(d, None, out, inputs[0], rows, cols))
}

/// `layernorm_rows` (weight `w`, bias `b`, eps 1e-5; several narrow rows per program) on `d`.
pub fn layernorm_rows_on<T: Elem>(
    d: &Device,
    x: &[T],
    w: &[T],
    b: &[T],
    rows: usize,
    cols: usize,
) -> Vec<f64> {
    run_on(d, &[x, w, b], rows * cols, |inputs, y| {
        layernorm::launch_rows(d, None, inputs[0], y, inputs[1], inputs[2], rows, cols, 1e-5)
    })
}

/// Cross-entropy inputs: `rows` x `cols` logits in [-8, 8) with a +30 spike in a random column of
/// every other row (the running max jumps mid-row); of every three rows one has about an eighth of
/// its logits at -inf (a masked vocabulary; never the label) and one is scaled to +-3000 (exp
/// overflows f32 unless taken relative to the max). Labels with every `ignore_every`-th row (from
/// `ignore_at`) set to the ignore index.
pub fn cross_entropy_inputs<T: Elem>(
    rng: &mut Rng,
    rows: usize,
    cols: usize,
    ignore_every: usize,
    ignore_at: usize,
) -> (Vec<T>, Vec<i64>) {
    let mut x = rng.vec(rows * cols, 8.0);
    for r in (0..rows).step_by(2) {
        x[r * cols + (rng.next_u64() % cols as u64) as usize] += 30.0;
    }
    let labels: Vec<i64> = (0..rows)
        .map(|r| {
            if r % ignore_every == ignore_at {
                cross_entropy::IGNORE_INDEX
            } else {
                (rng.next_u64() % cols as u64) as i64
            }
        })
        .collect();
    for (r, &label) in labels.iter().enumerate() {
        let row = &mut x[r * cols..(r + 1) * cols];
        match r % 3 {
            // A masked vocabulary: about one logit in 8 is -inf (never the label's).
            1 => {
                for (c, v) in row.iter_mut().enumerate() {
                    if c as i64 != label && rng.next_u64() % 8 == 0 {
                        *v = f32::NEG_INFINITY;
                    }
                }
            }
            // Logits spread over +-3000: exp overflows f32 unless taken relative to the max.
            2 => row.iter_mut().for_each(|v| *v *= 375.0),
            _ => {}
        }
    }
    (T::from_f32s(&x), labels)
}

/// Per-row cross-entropy losses of `x` (`rows` x `cols` logits) on `d`, into NaN-poisoned f32.
pub fn cross_entropy_on<T: Elem>(d: &Device, x: &[T], labels: &[i64], cols: usize) -> Vec<f32> {
    let rows = labels.len();
    let (xb, lb) = (d.upload(x).unwrap(), d.upload(labels).unwrap());
    let mut loss = d.upload(&vec![f32::NAN; rows]).unwrap();
    cross_entropy::launch(d, None, &xb, &lb, &mut loss, rows, cols).unwrap();
    loss.to_vec().unwrap()
}

/// `add_gelu` / `add_silu` on `d`: (the residual after the launch, the NaN-poisoned output), as f64.
pub fn add_activation_on<T: Elem>(
    d: &Device,
    act: add_activation::Act,
    x: &[T],
    residual: &[T],
) -> (Vec<f64>, Vec<f64>) {
    let xb = d.upload(x).unwrap();
    let mut res = d.upload(residual).unwrap();
    let mut out = d.upload(&vec![T::NAN; x.len()]).unwrap();
    add_activation::launch(d, act, add_activation::BLOCK, None, &xb, &mut res, &mut out).unwrap();
    (T::to_f64s(&res.to_vec().unwrap()), T::to_f64s(&out.to_vec().unwrap()))
}

/// One qk_norm_rope problem: random packed qkv, positions, a cos/sin cache and both weights.
pub struct QkCase<T: Elem> {
    pub h: qk_norm_rope::Heads,
    pub tokens: usize,
    pub qkv: Vec<T>,
    pub positions: Vec<i64>,
    pub cos_sin: Vec<T>,
    pub q_w: Vec<T>,
    pub k_w: Vec<T>,
}

impl<T: Elem> QkCase<T> {
    pub const EPS: f32 = 1e-6;

    pub fn random(rng: &mut Rng, tokens: usize, h: qk_norm_rope::Heads) -> QkCase<T> {
        let max_pos = 512;
        let row = (h.q + h.k + h.v) * h.dim;
        let weights =
            |rng: &mut Rng| T::from_f32s(&rng.vec(h.dim, 0.5).iter().map(|v| v + 1.0).collect::<Vec<_>>());
        let cache: Vec<f32> =
            qk_norm_rope::cos_sin_cache(max_pos, h.dim, 10000.0).iter().map(|&v| v as f32).collect();
        QkCase {
            h,
            tokens,
            qkv: T::from_f32s(&rng.vec(tokens * row, 3.0)),
            positions: (0..tokens).map(|_| (rng.next_u64() % max_pos as u64) as i64).collect(),
            cos_sin: T::from_f32s(&cache),
            q_w: weights(rng),
            k_w: weights(rng),
        }
    }

    /// The packed qkv after the NeoX or the GPT-J kernel on `d` (the launcher's defaults).
    pub fn run_on(&self, d: &Device, neox: bool) -> Vec<T> {
        let up = |v: &[T]| d.upload(v).unwrap();
        let mut qkv = up(&self.qkv);
        let per = qk_norm_rope::heads_per_program(self.h);
        let (pos, cs, qw, kw) =
            (d.upload(&self.positions).unwrap(), up(&self.cos_sin), up(&self.q_w), up(&self.k_w));
        qk_norm_rope::launch(
            d,
            None,
            self.tokens,
            per,
            &mut qkv,
            &pos,
            &cs,
            &qw,
            &kw,
            self.h,
            Self::EPS,
            neox,
        )
        .unwrap();
        qkv.to_vec().unwrap()
    }

    /// Checks `got` (a whole qkv after the kernel): q and k within tolerance of float64, v
    /// bit-identical to the input.
    pub fn check(&self, what: &str, got: &[T], neox: bool, atol: f64, rtol: f64) {
        let input = T::to_f64s(&self.qkv);
        let want = qk_norm_rope::reference(
            &input,
            &self.positions,
            &T::to_f64s(&self.cos_sin),
            &T::to_f64s(&self.q_w),
            &T::to_f64s(&self.k_w),
            self.h,
            f64::from(Self::EPS),
            neox,
        );
        let (row, qk) = ((self.h.q + self.h.k + self.h.v) * self.h.dim, (self.h.q + self.h.k) * self.h.dim);
        let got64 = T::to_f64s(got);
        for t in 0..self.tokens {
            let at = t * row;
            assert_close(
                &format!("{what} token {t} q,k"),
                &got64[at..at + qk],
                &want[at..at + qk],
                atol,
                rtol,
            );
            for i in at + qk..at + row {
                assert!(
                    got64[i].to_bits() == input[i].to_bits(),
                    "{what}: v element {i} changed: {} -> {}",
                    input[i],
                    got64[i]
                );
            }
        }
    }
}
