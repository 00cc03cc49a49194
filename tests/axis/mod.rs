//! Axis-0 reductions and arg-reductions along either axis: kernels that put each result in every
//! layout the emitter gives it, inputs with ties, NaN, infinities and signed zeros, a float64 (or
//! exact integer) reference, and one runner for the CPU interpreter, a GPU and the host emulation
//! of the emitted CUDA (`emu`). Used by tests/emulated_cuda.rs, which checks the emulation against
//! the reference and the CPU interpreter.
#![allow(dead_code)]

pub mod emu;

use fuse::fuse_ir::ParamKind;
use fuse::prelude::*;
use fuse::{KernelArg, KernelSpec};

/// Every axis-0 reduction and arg-reduction of one `[R, C]` f32 tile per program, in each layout
/// the emitter gives a result: stored at once (the length's layout: the fold's result posted
/// through shared memory), broadcast back over the tile (the column layout for axis 0, the row
/// layout for axis 1: in registers), broadcast to a taller tile (another tile's column layout),
/// and a whole-tile argmax/argmin (a scalar).
#[fused_kernel]
pub fn axis_f32<const R: usize, const C: usize>(
    x: *const f32,
    red: *mut f32,
    arg: *mut i32,
    soft: *mut f32,
    hot: *mut i32,
    tall: *mut f32,
) {
    let pid = program_id(0);
    let r = arange(0, R);
    let c = arange(0, C);
    let offs = r.expand_dims(1) * C + c.expand_dims(0);
    let v = load(x + pid * (R * C) + offs);
    // [3][C] per program: sum, max, min along axis 0, each stored at once.
    let o = arange(0, C);
    let rb = pid * (3 * C);
    store(red + rb + o, v.sum(0));
    store(red + rb + C + o, v.max(0));
    store(red + rb + 2 * C + o, v.min(0));
    // [2][C] argmax/argmin along axis 0, [2][R] along axis 1, argmax and argmin of the tile.
    let q = arange(0, R);
    let ab = pid * (2 * C + 2 * R + 2);
    store(arg + ab + o, v.argmax(0));
    store(arg + ab + C + o, v.argmin(0));
    store(arg + ab + 2 * C + q, v.argmax(1));
    store(arg + ab + 2 * C + R + q, v.argmin(1));
    store(arg + ab + 2 * C + 2 * R, argmax(v));
    store(arg + ab + 2 * C + 2 * R + 1, argmin(v));
    // Softmax down the columns: max and sum in the column layout, broadcast back for free.
    let m = v.max(0);
    let e = exp(v - m.expand_dims(0));
    store(soft + pid * (R * C) + offs, e / e.sum(0).expand_dims(0));
    // One-hot of argmax along axis 0 (column layout) and of argmin along axis 1 (row layout).
    let h0 = (v.argmax(0).expand_dims(0) == r.expand_dims(1)).to(i32);
    let h1 = (v.argmin(1).expand_dims(1) == c.expand_dims(0)).to(i32);
    store(hot + pid * (2 * R * C) + offs, h0);
    store(hot + pid * (2 * R * C) + R * C + offs, h1);
    // min along axis 0 broadcast to [2R, C]: the column layout of the taller tile.
    let t2 = arange(0, 2 * R);
    let c2 = arange(0, C);
    let tall_v = full([2 * R, C], 0.5) * t2.to(f32).expand_dims(1) + v.min(0).expand_dims(0);
    store(tall + pid * (2 * R * C) + t2.expand_dims(1) * C + c2.expand_dims(0), tall_v);
}

/// The integer forms (wrapping sums, exact max/min, arg-reductions) of one `[R, C]` tile per
/// program, stored at once and broadcast back (`v - max(v, 0)`, `v - min(v, 1)` of the row
/// layout is the existing row path; `argmax(v, 1)` in the row layout).
macro_rules! int_kernel {
    ($name:ident, $t:ident) => {
        #[fused_kernel]
        pub fn $name<const R: usize, const C: usize>(
            x: *const $t,
            red: *mut $t,
            arg: *mut i32,
            back: *mut $t,
            hot: *mut i32,
        ) {
            let pid = program_id(0);
            let r = arange(0, R);
            let c = arange(0, C);
            let offs = r.expand_dims(1) * C + c.expand_dims(0);
            let v = load(x + pid * (R * C) + offs);
            let o = arange(0, C);
            let rb = pid * (3 * C);
            store(red + rb + o, v.sum(0));
            store(red + rb + C + o, v.max(0));
            store(red + rb + 2 * C + o, v.min(0));
            let q = arange(0, R);
            let ab = pid * (2 * C + 2 * R + 2);
            store(arg + ab + o, v.argmax(0));
            store(arg + ab + C + o, v.argmin(0));
            store(arg + ab + 2 * C + q, v.argmax(1));
            store(arg + ab + 2 * C + R + q, v.argmin(1));
            store(arg + ab + 2 * C + 2 * R, argmax(v));
            store(arg + ab + 2 * C + 2 * R + 1, argmin(v));
            store(back + pid * (R * C) + offs, v - v.max(0).expand_dims(0) + v.sum(0).expand_dims(0));
            let h = (v.argmin(0).expand_dims(0) == r.expand_dims(1))
                & (v.argmax(1).expand_dims(1) == c.expand_dims(0));
            store(hot + pid * (R * C) + offs, h.to(i32));
        }
    };
}
int_kernel!(axis_i32, i32);
int_kernel!(axis_u32, u32);
int_kernel!(axis_i64, i64);

/// Axes of literal length 1 (`[N, 1]` and `[1, N]` by reshape), which take their own paths: a
/// single column folded over the block, a single row copied, indices that are all 0.
#[fused_kernel]
pub fn axis_units<const N: usize>(x: *const f32, out: *mut f32, idx: *mut i32) {
    let pid = program_id(0);
    let n = arange(0, N);
    let v = load(x + pid * N + n);
    let col = reshape(v, [N, 1]);
    let row = reshape(v, [1, N]);
    // [3 + N] per program: sum, max, min of the column, then max(row, 0) (a copy).
    let ob = pid * (3 + N);
    let one = arange(0, 1);
    store(out + ob + one, col.sum(0));
    store(out + ob + 1 + one, col.max(0));
    store(out + ob + 2 + one, col.min(0));
    store(out + ob + 3 + n, row.max(0));
    // [4 + 2N] per program: argmax/argmin of the column along axis 0 and of the row along axis
    // 1, then argmax(col, 1) and argmin(row, 0) (all 0).
    let ib = pid * (4 + 2 * N);
    store(idx + ib + one, col.argmax(0));
    store(idx + ib + 1 + one, col.argmin(0));
    store(idx + ib + 2 + one, row.argmax(1));
    store(idx + ib + 3 + one, row.argmin(1));
    store(idx + ib + 4 + n, col.argmax(1));
    store(idx + ib + 4 + N + n, row.argmin(0));
}

/// A buffer of one of the element types these kernels take.
#[derive(Clone, Debug, PartialEq)]
pub enum Buf {
    F32(Vec<f32>),
    I32(Vec<i32>),
    U32(Vec<u32>),
    I64(Vec<i64>),
}

impl Buf {
    pub fn len(&self) -> usize {
        match self {
            Buf::F32(v) => v.len(),
            Buf::I32(v) => v.len(),
            Buf::U32(v) => v.len(),
            Buf::I64(v) => v.len(),
        }
    }

    /// The bytes, little-endian (the emulation's files).
    pub fn bytes(&self) -> Vec<u8> {
        match self {
            Buf::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Buf::I32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Buf::U32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Buf::I64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        }
    }

    /// The same type and length, from little-endian bytes.
    pub fn like_from_bytes(&self, b: &[u8]) -> Buf {
        fn w<const N: usize>(b: &[u8]) -> impl Iterator<Item = [u8; N]> + '_ {
            b.chunks_exact(N).map(|c| c.try_into().expect("whole elements"))
        }
        match self {
            Buf::F32(_) => Buf::F32(w::<4>(b).map(f32::from_le_bytes).collect()),
            Buf::I32(_) => Buf::I32(w::<4>(b).map(i32::from_le_bytes).collect()),
            Buf::U32(_) => Buf::U32(w::<4>(b).map(u32::from_le_bytes).collect()),
            Buf::I64(_) => Buf::I64(w::<8>(b).map(i64::from_le_bytes).collect()),
        }
    }
}

/// One launch of a kernel whose parameters are all pointers: the buffers in parameter order.
#[derive(Clone)]
pub struct Launch {
    pub spec: &'static KernelSpec,
    pub consts: Vec<u64>,
    pub warps: u32,
    pub grid: u32,
    pub bufs: Vec<Buf>,
}

/// Where a launch runs.
#[derive(Clone, Copy)]
pub enum Target<'a> {
    /// The CPU interpreter or a GPU.
    Device(&'a Device),
    /// The emitted CUDA on the host ([`emu`]), with this schedule seed.
    Emulated(u64),
}

impl Target<'_> {
    pub fn describe(&self) -> String {
        match self {
            Target::Device(d) if d.is_cpu() => "CPU interpreter".into(),
            Target::Device(d) => d.description(),
            Target::Emulated(seed) => format!("emulated CUDA (schedule seed {seed})"),
        }
    }
}

enum DevBuf {
    F32(Buffer<f32>),
    I32(Buffer<i32>),
    U32(Buffer<u32>),
    I64(Buffer<i64>),
}

/// Runs `l` on `t`, replacing its buffers with what the kernel left in them.
pub fn run(t: Target, l: &mut Launch) -> Result<(), String> {
    match t {
        Target::Emulated(seed) => emu::run(l, seed),
        Target::Device(d) => {
            let k = l.spec.kernel().map_err(|e| e.to_string())?;
            let mut bufs = Vec::new();
            for b in &l.bufs {
                let e = |e: fuse::Error| e.to_string();
                bufs.push(match b {
                    Buf::F32(v) => DevBuf::F32(d.upload(v).map_err(e)?),
                    Buf::I32(v) => DevBuf::I32(d.upload(v).map_err(e)?),
                    Buf::U32(v) => DevBuf::U32(d.upload(v).map_err(e)?),
                    Buf::I64(v) => DevBuf::I64(d.upload(v).map_err(e)?),
                });
            }
            {
                let mut args: Vec<KernelArg> = Vec::new();
                for (b, p) in bufs.iter_mut().zip(&k.params) {
                    let mutable = matches!(p.kind, ParamKind::Ptr { mutable: true, .. });
                    args.push(match (b, mutable) {
                        (DevBuf::F32(b), true) => b.into(),
                        (DevBuf::F32(b), false) => (&*b).into(),
                        (DevBuf::I32(b), true) => b.into(),
                        (DevBuf::I32(b), false) => (&*b).into(),
                        (DevBuf::U32(b), true) => b.into(),
                        (DevBuf::U32(b), false) => (&*b).into(),
                        (DevBuf::I64(b), true) => b.into(),
                        (DevBuf::I64(b), false) => (&*b).into(),
                    });
                }
                let cfg = LaunchConfig::new(l.grid).num_warps(l.warps);
                fuse::launch(l.spec, d, cfg, &l.consts, &mut args).map_err(|e| e.to_string())?;
            }
            for (b, db) in l.bufs.iter_mut().zip(&bufs) {
                let e = |e: fuse::Error| e.to_string();
                *b = match db {
                    DevBuf::F32(x) => Buf::F32(x.to_vec().map_err(e)?),
                    DevBuf::I32(x) => Buf::I32(x.to_vec().map_err(e)?),
                    DevBuf::U32(x) => Buf::U32(x.to_vec().map_err(e)?),
                    DevBuf::I64(x) => Buf::I64(x.to_vec().map_err(e)?),
                };
            }
            Ok(())
        }
    }
}

/// The input patterns: each stresses one rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// Small integers (many ties: the first index must win).
    Ties,
    /// Ties plus NaNs: lone ones, several in a line, whole columns and rows of NaN.
    Nan,
    /// Infinities of both signs, whole lines of -0.0 (whose sum is -0.0), equal values.
    Special,
    /// Spread values (float sums: rounding differs by order only in the last bits).
    Spread,
}

pub const PATTERNS: [Pattern; 4] = [Pattern::Ties, Pattern::Nan, Pattern::Special, Pattern::Spread];

/// A small generator (xorshift*), seeded per case so a failure names its inputs.
pub struct Gen(u64);

impl Gen {
    pub fn new(seed: u64) -> Gen {
        Gen(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// `programs` tiles `[r, c]` of f32 in `p`'s pattern.
pub fn f32_input(p: Pattern, programs: usize, r: usize, c: usize, g: &mut Gen) -> Vec<f32> {
    let n = programs * r * c;
    let mut x: Vec<f32> = (0..n)
        .map(|_| match p {
            Pattern::Spread => ((g.next() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * 100.0,
            _ => g.below(7) as f32 - 3.0,
        })
        .collect();
    let at = |pr: usize, i: usize, j: usize| pr * r * c + i * c + j;
    for pr in 0..programs {
        match p {
            Pattern::Nan => {
                for _ in 0..(r * c / 8).max(1) {
                    let (i, j) = (g.below(r as u64) as usize, g.below(c as u64) as usize);
                    x[at(pr, i, j)] = f32::NAN;
                }
                let j = g.below(c as u64) as usize;
                (0..r).for_each(|i| x[at(pr, i, j)] = f32::NAN);
                let i = g.below(r as u64) as usize;
                (0..c).for_each(|j| x[at(pr, i, j)] = f32::NAN);
            }
            Pattern::Special => {
                for _ in 0..(r * c / 8).max(1) {
                    let (i, j) = (g.below(r as u64) as usize, g.below(c as u64) as usize);
                    x[at(pr, i, j)] = if g.below(2) == 0 { f32::INFINITY } else { f32::NEG_INFINITY };
                }
                let j = g.below(c as u64) as usize;
                (0..r).for_each(|i| x[at(pr, i, j)] = -0.0);
                let i = g.below(r as u64) as usize;
                (0..c).for_each(|j| x[at(pr, i, j)] = -0.0);
                let j = g.below(c as u64) as usize;
                (0..r).for_each(|i| x[at(pr, i, j)] = 2.0);
            }
            _ => {}
        }
    }
    x
}

/// `programs` tiles of integers in `p`'s pattern (`Nan` and `Special` put the type's extremes in:
/// sums wrap).
pub fn int_input(
    p: Pattern,
    programs: usize,
    r: usize,
    c: usize,
    g: &mut Gen,
    min: i64,
    max: i64,
) -> Vec<i64> {
    (0..programs * r * c)
        .map(|_| match (p, g.below(8)) {
            (Pattern::Nan | Pattern::Special, 0) => min,
            (Pattern::Nan | Pattern::Special, 1) => max,
            (Pattern::Spread, _) => (g.next() >> 1) as i64 % (max / 2).max(1),
            _ => g.below(7) as i64 - if min < 0 { 3 } else { 0 },
        })
        .collect()
}

/// Max/min of floats as the language defines them: NaN ignored unless every lane is NaN.
fn fmax(a: f64, b: f64) -> f64 {
    if a.is_nan() {
        b
    } else if b.is_nan() || a >= b {
        a
    } else {
        b
    }
}

fn fmin(a: f64, b: f64) -> f64 {
    if a.is_nan() {
        b
    } else if b.is_nan() || a <= b {
        a
    } else {
        b
    }
}

/// First index of the largest (`max`) or smallest lane; a NaN beats every number, the first NaN wins.
fn first_index(v: &[f64], max: bool) -> i32 {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate().skip(1) {
        let b = v[best];
        let better = if max { x > b } else { x < b };
        if better || (x.is_nan() && !b.is_nan()) {
            best = i;
        }
    }
    best as i32
}

/// Floats equal as the reductions define them: both NaN, or equal (`-0.0 == 0.0` for max/min, whose
/// sign of zero is the hardware's choice), and for sums a zero's sign too (`-0.0` sums to `-0.0`).
fn same_f32(got: f32, want: f64, sign_of_zero: bool) -> bool {
    if want.is_nan() {
        return got.is_nan();
    }
    f64::from(got) == want
        && (!sign_of_zero || got != 0.0 || got.is_sign_negative() == want.is_sign_negative())
}

/// An f32 sum against its float64 reference and error bound ([`sum_ref`]): NaN, infinities and
/// exact zeros (sign included) exactly, the rest within the bound.
fn sum_ok(got: f32, want: f64, tol: f64) -> bool {
    if want.is_nan() {
        got.is_nan()
    } else if want.is_infinite() || tol == 0.0 {
        same_f32(got, want, true)
    } else {
        (f64::from(got) - want).abs() <= tol
    }
}

/// The column `j` of program `p`'s `[r, c]` tile, and row `i`.
fn column(x: &[f64], p: usize, r: usize, c: usize, j: usize) -> Vec<f64> {
    (0..r).map(|i| x[p * r * c + i * c + j]).collect()
}

fn row(x: &[f64], p: usize, r: usize, c: usize, i: usize) -> Vec<f64> {
    (0..c).map(|j| x[p * r * c + i * c + j]).collect()
}

fn show(v: &[f64]) -> String {
    let s: Vec<String> = v.iter().take(64).map(|x| format!("{x}")).collect();
    format!("[{}{}]", s.join(", "), if v.len() > 64 { ", .." } else { "" })
}

/// The reference sum of `v` in float64, and the bound on an f32 sum's error in any order
/// (`n * eps * sum |v|`, plus the rounding of the result).
fn sum_ref(v: &[f64]) -> (f64, f64) {
    if v.iter().any(|x| x.is_nan()) || (v.contains(&f64::INFINITY) && v.contains(&f64::NEG_INFINITY)) {
        return (f64::NAN, 0.0);
    }
    let s: f64 = v.iter().sum();
    let s = if v.iter().all(|&x| x == 0.0 && x.is_sign_negative()) { -0.0 } else { s };
    let abs: f64 = v.iter().map(|x| x.abs()).filter(|x| x.is_finite()).sum();
    (s, (v.len() as f64) * f64::from(f32::EPSILON) * abs + s.abs() * f64::from(f32::EPSILON))
}

/// Checks an `axis_f32` launch's outputs (`l.bufs` after the run) against float64 and, where
/// given, the CPU interpreter's (`cpu`: the same launch run there; exact for everything but
/// the sums and the softmax's `exp`).
pub fn check_f32(case: &str, l: &Launch, cpu: Option<&Launch>) -> Result<(), String> {
    let (r, c) = (l.consts[0] as usize, l.consts[1] as usize);
    let programs = l.grid as usize;
    let Buf::F32(x) = &l.bufs[0] else { unreachable!() };
    let x: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
    let (Buf::F32(red), Buf::I32(arg), Buf::F32(soft), Buf::I32(hot), Buf::F32(tall)) =
        (&l.bufs[1], &l.bufs[2], &l.bufs[3], &l.bufs[4], &l.bufs[5])
    else {
        unreachable!()
    };
    for p in 0..programs {
        for j in 0..c {
            let col = column(&x, p, r, c, j);
            let ctx = |what: &str| format!("program {p}, column {j} = {}; {what}", show(&col));
            // sum: float64 within the f32 bound; the CPU's (serial) sum within twice it.
            let (want, tol) = sum_ref(&col);
            let got = red[p * 3 * c + j];
            if !sum_ok(got, want, tol) {
                return Err(format!(
                    "{case}: sum(x, 0)[{j}]: got {got:e}, want {want:e} (tolerance {tol:e}); {}",
                    ctx("")
                ));
            }
            let mx = col.iter().copied().fold(f64::NAN, fmax);
            let mn = col.iter().copied().fold(f64::NAN, fmin);
            for (what, got, want) in
                [("max(x, 0)", red[p * 3 * c + c + j], mx), ("min(x, 0)", red[p * 3 * c + 2 * c + j], mn)]
            {
                if !same_f32(got, want, false) {
                    return Err(format!("{case}: {what}[{j}]: got {got:e}, want {want:e}; {}", ctx("")));
                }
            }
            let ab = p * (2 * c + 2 * r + 2);
            for (what, got, want) in [
                ("argmax(x, 0)", arg[ab + j], first_index(&col, true)),
                ("argmin(x, 0)", arg[ab + c + j], first_index(&col, false)),
            ] {
                if got != want {
                    return Err(format!("{case}: {what}[{j}]: got {got}, want {want}; {}", ctx("")));
                }
            }
            // The one-hot of argmax(x, 0) (column layout) down this column.
            let want = first_index(&col, true) as usize;
            for i in 0..r {
                let got = hot[p * 2 * r * c + i * c + j];
                if got != i32::from(i == want) {
                    return Err(format!(
                        "{case}: argmax(x, 0) broadcast back (one-hot) at row {i}, column {j}: got {got}, want {} (argmax {want}); {}",
                        i32::from(i == want),
                        ctx("")
                    ));
                }
            }
            // The taller tile: 0.5 * row + min(x, 0).
            for i in 0..2 * r {
                let got = tall[p * 2 * r * c + i * c + j];
                let want = f64::from(0.5 * i as f32 + mn as f32);
                if !same_f32(got, want, false) {
                    return Err(format!(
                        "{case}: min(x, 0) broadcast to [2R, C] at row {i}, column {j}: got {got:e}, want {want:e}; {}",
                        ctx("")
                    ));
                }
            }
            // Softmax down the column (finite columns only: inf - inf is NaN on every back end).
            if col.iter().all(|v| v.is_finite()) {
                let e: Vec<f64> = col.iter().map(|v| (v - mx).exp()).collect();
                let s: f64 = e.iter().sum();
                for i in 0..r {
                    let got = f64::from(soft[p * r * c + i * c + j]);
                    let want = e[i] / s;
                    if (got - want).abs() > 1e-6 + 1e-5 * want.abs() {
                        return Err(format!(
                            "{case}: softmax down column {j} at row {i}: got {got:e}, want {want:e}; {}",
                            ctx("")
                        ));
                    }
                }
            }
        }
        for i in 0..r {
            let rw = row(&x, p, r, c, i);
            let ab = p * (2 * c + 2 * r + 2);
            for (what, got, want) in [
                ("argmax(x, 1)", arg[ab + 2 * c + i], first_index(&rw, true)),
                ("argmin(x, 1)", arg[ab + 2 * c + r + i], first_index(&rw, false)),
            ] {
                if got != want {
                    return Err(format!(
                        "{case}: {what}[{i}]: got {got}, want {want}; program {p}, row {i} = {}",
                        show(&rw)
                    ));
                }
            }
            let want = first_index(&rw, false) as usize;
            for j in 0..c {
                let got = hot[p * 2 * r * c + r * c + i * c + j];
                if got != i32::from(j == want) {
                    return Err(format!(
                        "{case}: argmin(x, 1) broadcast back (one-hot) at row {i}, column {j}: got {got}, want {} (argmin {want}); program {p}, row {i} = {}",
                        i32::from(j == want),
                        show(&rw)
                    ));
                }
            }
        }
        let tile: Vec<f64> = x[p * r * c..(p + 1) * r * c].to_vec();
        let ab = p * (2 * c + 2 * r + 2);
        for (what, got, want) in [
            ("argmax(x)", arg[ab + 2 * c + 2 * r], first_index(&tile, true)),
            ("argmin(x)", arg[ab + 2 * c + 2 * r + 1], first_index(&tile, false)),
        ] {
            if got != want {
                return Err(format!(
                    "{case}: {what} of program {p}: got {got}, want {want}; tile = {}",
                    show(&tile)
                ));
            }
        }
    }
    if let Some(cpu) = cpu {
        // Exact agreement with the interpreter for everything but the sums (order) and the
        // softmax (order and exp).
        let (Buf::F32(cred), Buf::I32(carg), Buf::I32(chot), Buf::F32(ctall)) =
            (&cpu.bufs[1], &cpu.bufs[2], &cpu.bufs[4], &cpu.bufs[5])
        else {
            unreachable!()
        };
        for p in 0..programs {
            for j in c..3 * c {
                let (g, w) = (red[p * 3 * c + j], cred[p * 3 * c + j]);
                if !(g == w || (g.is_nan() && w.is_nan())) {
                    return Err(format!(
                        "{case}: {} [{}] of program {p}: got {g:e}, the CPU interpreter {w:e}",
                        if j < 2 * c { "max(x, 0)" } else { "min(x, 0)" },
                        j % c
                    ));
                }
            }
        }
        if arg != carg {
            let i = arg.iter().zip(carg).position(|(a, b)| a != b).unwrap_or(0);
            return Err(format!(
                "{case}: the indices differ from the CPU interpreter's at arg[{i}]: {} vs {}",
                arg[i], carg[i]
            ));
        }
        if hot != chot {
            let i = hot.iter().zip(chot).position(|(a, b)| a != b).unwrap_or(0);
            return Err(format!(
                "{case}: the one-hots differ from the CPU interpreter's at hot[{i}]: {} vs {}",
                hot[i], chot[i]
            ));
        }
        for (i, (g, w)) in tall.iter().zip(ctall).enumerate() {
            if !(g == w || (g.is_nan() && w.is_nan())) {
                return Err(format!("{case}: tall[{i}]: got {g:e}, the CPU interpreter {w:e}"));
            }
        }
    }
    Ok(())
}

/// An `axis_f32` launch over `programs` programs in pattern `p`, outputs poisoned.
pub fn f32_launch(r: usize, c: usize, warps: u32, programs: usize, p: Pattern, seed: u64) -> Launch {
    let mut g = Gen::new(seed);
    let x = f32_input(p, programs, r, c, &mut g);
    Launch {
        spec: &axis_f32::SPEC,
        consts: vec![r as u64, c as u64],
        warps,
        grid: programs as u32,
        bufs: vec![
            Buf::F32(x),
            Buf::F32(vec![f32::NAN; programs * 3 * c]),
            Buf::I32(vec![-7; programs * (2 * c + 2 * r + 2)]),
            Buf::F32(vec![f32::NAN; programs * r * c]),
            Buf::I32(vec![-7; programs * 2 * r * c]),
            Buf::F32(vec![f32::NAN; programs * 2 * r * c]),
        ],
    }
}

/// The integer kernels by element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntType {
    I32,
    U32,
    I64,
}

pub const INT_TYPES: [IntType; 3] = [IntType::I32, IntType::U32, IntType::I64];

impl IntType {
    fn spec(self) -> &'static KernelSpec {
        match self {
            IntType::I32 => &axis_i32::SPEC,
            IntType::U32 => &axis_u32::SPEC,
            IntType::I64 => &axis_i64::SPEC,
        }
    }
    fn range(self) -> (i64, i64) {
        match self {
            IntType::I32 => (i64::from(i32::MIN), i64::from(i32::MAX)),
            IntType::U32 => (0, i64::from(u32::MAX)),
            IntType::I64 => (i64::MIN, i64::MAX),
        }
    }
    fn buf(self, v: &[i64]) -> Buf {
        match self {
            IntType::I32 => Buf::I32(v.iter().map(|&x| x as i32).collect()),
            IntType::U32 => Buf::U32(v.iter().map(|&x| x as u32).collect()),
            IntType::I64 => Buf::I64(v.to_vec()),
        }
    }
    /// The values as i128 (exact for all three types).
    fn wide(b: &Buf) -> Vec<i128> {
        match b {
            Buf::I32(v) => v.iter().map(|&x| i128::from(x)).collect(),
            Buf::U32(v) => v.iter().map(|&x| i128::from(x)).collect(),
            Buf::I64(v) => v.iter().map(|&x| i128::from(x)).collect(),
            Buf::F32(_) => unreachable!(),
        }
    }
    /// `x` wrapped to the type.
    fn wrap(self, x: i128) -> i128 {
        match self {
            IntType::I32 => i128::from(x as i32),
            IntType::U32 => i128::from(x as u32),
            IntType::I64 => i128::from(x as i64),
        }
    }
}

/// An integer kernel's launch, outputs poisoned.
pub fn int_launch(
    t: IntType,
    r: usize,
    c: usize,
    warps: u32,
    programs: usize,
    p: Pattern,
    seed: u64,
) -> Launch {
    let mut g = Gen::new(seed);
    let (min, max) = t.range();
    let x = int_input(p, programs, r, c, &mut g, min, max);
    let poison = |n: usize| t.buf(&vec![3; n]);
    Launch {
        spec: t.spec(),
        consts: vec![r as u64, c as u64],
        warps,
        grid: programs as u32,
        bufs: vec![
            t.buf(&x),
            poison(programs * 3 * c),
            Buf::I32(vec![-7; programs * (2 * c + 2 * r + 2)]),
            poison(programs * r * c),
            Buf::I32(vec![-7; programs * r * c]),
        ],
    }
}

/// Checks an integer kernel's outputs exactly (sums wrap).
pub fn check_int(t: IntType, case: &str, l: &Launch) -> Result<(), String> {
    let (r, c) = (l.consts[0] as usize, l.consts[1] as usize);
    let x = IntType::wide(&l.bufs[0]);
    let red = IntType::wide(&l.bufs[1]);
    let Buf::I32(arg) = &l.bufs[2] else { unreachable!() };
    let back = IntType::wide(&l.bufs[3]);
    let Buf::I32(hot) = &l.bufs[4] else { unreachable!() };
    let first = |v: &[i128], max: bool| {
        let mut best = 0;
        for (i, &x) in v.iter().enumerate() {
            if (max && x > v[best]) || (!max && x < v[best]) {
                best = i;
            }
        }
        best as i32
    };
    for p in 0..l.grid as usize {
        let at = |i: usize, j: usize| x[p * r * c + i * c + j];
        for j in 0..c {
            let col: Vec<i128> = (0..r).map(|i| at(i, j)).collect();
            let ctx = format!("program {p}, column {j} = {col:?}");
            let sum = t.wrap(col.iter().sum());
            let (mx, mn) = (*col.iter().max().unwrap(), *col.iter().min().unwrap());
            let rb = p * 3 * c;
            for (what, got, want) in [
                ("sum(x, 0)", red[rb + j], sum),
                ("max(x, 0)", red[rb + c + j], mx),
                ("min(x, 0)", red[rb + 2 * c + j], mn),
            ] {
                if got != want {
                    return Err(format!("{case}: {what}[{j}]: got {got}, want {want}; {ctx}"));
                }
            }
            let ab = p * (2 * c + 2 * r + 2);
            for (what, got, want) in [
                ("argmax(x, 0)", arg[ab + j], first(&col, true)),
                ("argmin(x, 0)", arg[ab + c + j], first(&col, false)),
            ] {
                if got != want {
                    return Err(format!("{case}: {what}[{j}]: got {got}, want {want}; {ctx}"));
                }
            }
            for i in 0..r {
                let want = t.wrap(at(i, j) - mx + sum);
                let got = back[p * r * c + i * c + j];
                if got != want {
                    return Err(format!("{case}: x - max(x, 0) + sum(x, 0) at row {i}, column {j}: got {got}, want {want}; {ctx}"));
                }
            }
        }
        for i in 0..r {
            let rw: Vec<i128> = (0..c).map(|j| at(i, j)).collect();
            let ab = p * (2 * c + 2 * r + 2);
            for (what, got, want) in [
                ("argmax(x, 1)", arg[ab + 2 * c + i], first(&rw, true)),
                ("argmin(x, 1)", arg[ab + 2 * c + r + i], first(&rw, false)),
            ] {
                if got != want {
                    return Err(format!(
                        "{case}: {what}[{i}]: got {got}, want {want}; program {p}, row {i} = {rw:?}"
                    ));
                }
            }
            for j in 0..c {
                let col: Vec<i128> = (0..r).map(|i| at(i, j)).collect();
                let want = i32::from(first(&col, false) as usize == i && first(&rw, true) as usize == j);
                let got = hot[p * r * c + i * c + j];
                if got != want {
                    return Err(format!("{case}: argmin(x, 0) and argmax(x, 1) broadcast back at row {i}, column {j}: got {got}, want {want}"));
                }
            }
        }
        let tile: Vec<i128> = x[p * r * c..(p + 1) * r * c].to_vec();
        let ab = p * (2 * c + 2 * r + 2);
        for (what, got, want) in [
            ("argmax(x)", arg[ab + 2 * c + 2 * r], first(&tile, true)),
            ("argmin(x)", arg[ab + 2 * c + 2 * r + 1], first(&tile, false)),
        ] {
            if got != want {
                return Err(format!("{case}: {what} of program {p}: got {got}, want {want}"));
            }
        }
    }
    Ok(())
}

/// An `axis_units` launch, outputs poisoned.
pub fn units_launch(n: usize, warps: u32, programs: usize, p: Pattern, seed: u64) -> Launch {
    let mut g = Gen::new(seed);
    Launch {
        spec: &axis_units::SPEC,
        consts: vec![n as u64],
        warps,
        grid: programs as u32,
        bufs: vec![
            Buf::F32(f32_input(p, programs, n, 1, &mut g)),
            Buf::F32(vec![f32::NAN; programs * (3 + n)]),
            Buf::I32(vec![-7; programs * (4 + 2 * n)]),
        ],
    }
}

pub fn check_units(case: &str, l: &Launch) -> Result<(), String> {
    let n = l.consts[0] as usize;
    let (Buf::F32(x), Buf::F32(out), Buf::I32(idx)) = (&l.bufs[0], &l.bufs[1], &l.bufs[2]) else {
        unreachable!()
    };
    for p in 0..l.grid as usize {
        let v: Vec<f64> = x[p * n..(p + 1) * n].iter().map(|&v| f64::from(v)).collect();
        let ctx = format!("program {p}, x = {}", show(&v));
        let ob = p * (3 + n);
        let (s, tol) = sum_ref(&v);
        let got = out[ob];
        if !sum_ok(got, s, tol) {
            return Err(format!(
                "{case}: sum([N, 1], 0): got {got:e}, want {s:e} (tolerance {tol:e}); {ctx}"
            ));
        }
        let mx = v.iter().copied().fold(f64::NAN, fmax);
        let mn = v.iter().copied().fold(f64::NAN, fmin);
        for (what, got, want) in [("max([N, 1], 0)", out[ob + 1], mx), ("min([N, 1], 0)", out[ob + 2], mn)] {
            if !same_f32(got, want, false) {
                return Err(format!("{case}: {what}: got {got:e}, want {want:e}; {ctx}"));
            }
        }
        for j in 0..n {
            let got = out[ob + 3 + j];
            if !(got.to_bits() == x[p * n + j].to_bits() || (got.is_nan() && x[p * n + j].is_nan())) {
                return Err(format!(
                    "{case}: max([1, N], 0)[{j}] must be x[{j}] = {:e}, got {got:e}; {ctx}",
                    x[p * n + j]
                ));
            }
        }
        let ib = p * (4 + 2 * n);
        for (what, got, want) in [
            ("argmax([N, 1], 0)", idx[ib], first_index(&v, true)),
            ("argmin([N, 1], 0)", idx[ib + 1], first_index(&v, false)),
            ("argmax([1, N], 1)", idx[ib + 2], first_index(&v, true)),
            ("argmin([1, N], 1)", idx[ib + 3], first_index(&v, false)),
        ] {
            if got != want {
                return Err(format!("{case}: {what}: got {got}, want {want}; {ctx}"));
            }
        }
        for j in 0..2 * n {
            if idx[ib + 4 + j] != 0 {
                let what = if j < n { "argmax([N, 1], 1)" } else { "argmin([1, N], 0)" };
                return Err(format!("{case}: {what}[{}]: got {}, want 0", j % n, idx[ib + 4 + j]));
            }
        }
    }
    Ok(())
}
