//! Tests of the CPU interpreter: the seed kernels (as in fuse-kernels) built by hand as the
//! checker would lower them, run on random data against float64 references, plus targeted
//! semantics tests.
//!
//! Imports the back end's entry point (`cpu/mod.rs`) and the IR.
#![allow(clippy::needless_range_loop)]

use super::{run, CpuArg, CpuError};
use fuse_ir::philox;
use fuse_ir::{
    BinaryOp as B, DType as D, Expr, Kernel, Len, Literal, Param, ParamKind, ReduceOp, Shape, Stmt, Ty,
    UnaryOp as U, Var, VarId,
};
use half::{bf16, f16};

// ------------------------------------------------------------------------------------------------
// A small IR builder.

struct Kb {
    k: Kernel,
    stack: Vec<Vec<Stmt>>,
}

fn ptr(name: &str, elem: D, mutable: bool) -> Param {
    Param { name: name.into(), kind: ParamKind::Ptr { elem, mutable } }
}
fn scalar(name: &str, d: D) -> Param {
    Param { name: name.into(), kind: ParamKind::Scalar(d) }
}
fn block() -> Len {
    Len::of_const(0)
}

impl Kb {
    fn new(name: &str, consts: &[&str], params: Vec<Param>) -> Kb {
        Kb {
            k: Kernel {
                name: name.into(),
                consts: consts.iter().map(|s| s.to_string()).collect(),
                params,
                vars: vec![],
                body: vec![],
            },
            stack: vec![vec![]],
        }
    }
    fn finish(mut self) -> Kernel {
        assert_eq!(self.stack.len(), 1);
        self.k.body = self.stack.pop().unwrap();
        self.k
    }
    fn ty(&self, v: VarId) -> Ty {
        self.k.vars[v.0 as usize].ty.clone()
    }
    fn var(&mut self, ty: Ty) -> VarId {
        let id = VarId(self.k.vars.len() as u32);
        self.k.vars.push(Var { name: format!("t{}", id.0), ty });
        id
    }
    fn push(&mut self, s: Stmt) {
        self.stack.last_mut().unwrap().push(s);
    }
    fn set(&mut self, dst: VarId, expr: Expr) {
        self.push(Stmt::Assign { dst, expr });
    }
    fn let_(&mut self, ty: Ty, expr: Expr) -> VarId {
        let v = self.var(ty);
        self.set(v, expr);
        v
    }
    /// The tile shape among `vs`, else scalar.
    fn shape(&self, vs: &[VarId]) -> Shape {
        vs.iter().map(|&v| self.ty(v).shape).find(|s| !s.is_scalar()).unwrap_or(Shape::Scalar)
    }
    fn lit(&mut self, d: D, l: Literal) -> VarId {
        self.let_(Ty::scalar(d), Expr::Lit(l))
    }
    fn f32(&mut self, x: f64) -> VarId {
        self.lit(D::F32, Literal::Float(x))
    }
    fn i32(&mut self, x: i64) -> VarId {
        self.lit(D::I32, Literal::Int(x))
    }
    fn pid(&mut self, axis: u8) -> VarId {
        self.let_(Ty::scalar(D::I32), Expr::ProgramId(axis))
    }
    fn nprog(&mut self, axis: u8) -> VarId {
        self.let_(Ty::scalar(D::I32), Expr::NumPrograms(axis))
    }
    fn konst(&mut self, i: u32, d: D) -> VarId {
        self.let_(Ty::scalar(d), Expr::ConstGeneric(i))
    }
    fn param(&mut self, i: u32) -> VarId {
        let ParamKind::Scalar(d) = self.k.params[i as usize].kind else { panic!("not a scalar param") };
        self.let_(Ty::scalar(d), Expr::Param(i))
    }
    fn arange(&mut self, start: i64, len: Len) -> VarId {
        self.let_(Ty::tile(D::I32, len), Expr::Arange { start })
    }
    fn splat(&mut self, v: VarId, len: Len) -> VarId {
        let d = self.ty(v).dtype;
        self.let_(Ty::tile(d, len), Expr::Splat(v))
    }
    fn bin(&mut self, op: B, a: VarId, b: VarId) -> VarId {
        let d = if op.is_comparison() { D::Bool } else { self.ty(a).dtype };
        let shape = self.shape(&[a, b]);
        self.let_(Ty { dtype: d, shape }, Expr::Binary(op, a, b))
    }
    fn un(&mut self, op: U, a: VarId) -> VarId {
        let ty = self.ty(a);
        self.let_(ty, Expr::Unary(op, a))
    }
    fn cast(&mut self, a: VarId, d: D) -> VarId {
        let shape = self.ty(a).shape;
        self.let_(Ty { dtype: d, shape }, Expr::Cast(a))
    }
    fn where_(&mut self, c: VarId, a: VarId, b: VarId) -> VarId {
        let d = self.ty(a).dtype;
        let shape = self.shape(&[c, a, b]);
        self.let_(Ty { dtype: d, shape }, Expr::Where(c, a, b))
    }
    fn reduce(&mut self, op: ReduceOp, a: VarId) -> VarId {
        let d = self.ty(a).dtype;
        self.let_(Ty::scalar(d), Expr::Reduce(op, a))
    }
    fn load(&mut self, param: u32, offset: VarId, mask: Option<VarId>, other: Option<VarId>) -> VarId {
        let ParamKind::Ptr { elem, .. } = self.k.params[param as usize].kind else { panic!("not a pointer") };
        let mut vs = vec![offset];
        vs.extend(mask);
        let shape = self.shape(&vs);
        self.let_(Ty { dtype: elem, shape }, Expr::Load { param, offset, mask, other })
    }
    fn rand(&mut self, seed: VarId, offset: VarId) -> VarId {
        let shape = self.ty(offset).shape;
        self.let_(Ty { dtype: D::F32, shape }, Expr::Rand { seed, offset, width: fuse_ir::RandWidth::W32 })
    }
    fn store(&mut self, param: u32, offset: VarId, value: VarId, mask: Option<VarId>) {
        self.push(Stmt::Store { param, offset, value, mask });
    }
    fn for_(&mut self, var: VarId, start: VarId, end: VarId, step: VarId, f: impl FnOnce(&mut Kb)) {
        self.stack.push(vec![]);
        f(self);
        let body = self.stack.pop().unwrap();
        self.push(Stmt::For { var, start, end, step, body });
    }
    fn if_(&mut self, cond: VarId, then: impl FnOnce(&mut Kb), els: impl FnOnce(&mut Kb)) {
        self.stack.push(vec![]);
        then(self);
        let then_body = self.stack.pop().unwrap();
        self.stack.push(vec![]);
        els(self);
        let else_body = self.stack.pop().unwrap();
        self.push(Stmt::If { cond, then_body, else_body });
    }
}

// ------------------------------------------------------------------------------------------------
// Data helpers.

/// Plain-data element types (no padding, any bit pattern valid).
trait Pod: Copy {}
impl Pod for f32 {}
impl Pod for f16 {}
impl Pod for bf16 {}
impl Pod for i32 {}
impl Pod for u32 {}
impl Pod for i64 {}
impl Pod for u8 {}

fn bytes<T: Pod>(v: &[T]) -> &[u8] {
    // SAFETY: T is plain data; the byte view covers exactly the slice.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast(), std::mem::size_of_val(v)) }
}
fn bytes_mut<T: Pod>(v: &mut [T]) -> &mut [u8] {
    // SAFETY: as above, and every byte pattern is a valid T.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast(), std::mem::size_of_val(v)) }
}

/// splitmix64.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [lo, hi).
    fn f32(&mut self, lo: f32, hi: f32) -> f32 {
        let u = (self.next() >> 40) as f32 / (1u64 << 24) as f32;
        lo + (hi - lo) * u
    }
    fn vec(&mut self, n: usize, lo: f32, hi: f32) -> Vec<f32> {
        (0..n).map(|_| self.f32(lo, hi)).collect()
    }
}

fn cdiv(a: usize, b: usize) -> u32 {
    a.div_ceil(b) as u32
}

#[track_caller]
fn assert_close(got: f32, want: f64, rel: f64, abs: f64, what: &str) {
    assert!(!got.is_nan(), "{what}: NaN (want {want})");
    let err = (f64::from(got) - want).abs();
    assert!(err <= abs + rel * want.abs(), "{what}: got {got}, want {want} (err {err:e})");
}

// ------------------------------------------------------------------------------------------------
// The seed kernels.

fn add_mul_kernel(elem: D) -> Kernel {
    let mut b = Kb::new(
        "add_mul",
        &["BLOCK"],
        vec![
            ptr("x", elem, false),
            ptr("y", elem, false),
            ptr("z", elem, false),
            ptr("out", elem, true),
            scalar("n", D::I32),
        ],
    );
    let pid = b.pid(0);
    let blk = b.konst(0, D::I32);
    let base = b.bin(B::Mul, pid, blk);
    let ar = b.arange(0, block());
    let offs = b.bin(B::Add, base, ar);
    let n = b.param(4);
    let mask = b.bin(B::Lt, offs, n);
    let mut xs = [0u32, 1, 2].map(|p| b.load(p, offs, Some(mask), None));
    if elem != D::F32 {
        xs = xs.map(|x| b.cast(x, D::F32));
    }
    let s = b.bin(B::Add, xs[0], xs[1]);
    let mut p = b.bin(B::Mul, s, xs[2]);
    if elem != D::F32 {
        p = b.cast(p, elem);
    }
    b.store(3, offs, p, Some(mask));
    b.finish()
}

fn softmax_kernel() -> Kernel {
    let mut b = Kb::new(
        "softmax",
        &["BLOCK"],
        vec![
            ptr("out", D::F32, true),
            ptr("inp", D::F32, false),
            scalar("in_stride", D::I32),
            scalar("out_stride", D::I32),
            scalar("n_cols", D::I32),
        ],
    );
    let row = b.pid(0);
    let cols = b.arange(0, block());
    let n_cols = b.param(4);
    let mask = b.bin(B::Lt, cols, n_cols);
    let ninf = b.f32(f64::NEG_INFINITY);
    let in_stride = b.param(2);
    let t = b.bin(B::Mul, row, in_stride);
    let off = b.bin(B::Add, t, cols);
    let x = b.load(1, off, Some(mask), Some(ninf));
    let mx = b.reduce(ReduceOp::Max, x);
    let x = b.bin(B::Sub, x, mx);
    let num = b.un(U::Exp, x);
    let den = b.reduce(ReduceOp::Sum, num);
    let y = b.bin(B::Div, num, den);
    let out_stride = b.param(3);
    let t = b.bin(B::Mul, row, out_stride);
    let off = b.bin(B::Add, t, cols);
    b.store(0, off, y, Some(mask));
    b.finish()
}

fn layernorm_f16_kernel() -> Kernel {
    let mut b = Kb::new(
        "layernorm_f16",
        &["BLOCK"],
        vec![
            ptr("x", D::F16, false),
            ptr("y", D::F16, true),
            ptr("w", D::F16, false),
            ptr("b", D::F16, false),
            scalar("stride", D::I32),
            scalar("n_cols", D::I32),
            scalar("eps", D::F32),
        ],
    );
    let row = b.pid(0);
    let cols = b.arange(0, block());
    let n_cols = b.param(5);
    let mask = b.bin(B::Lt, cols, n_cols);
    let zero16 = b.lit(D::F16, Literal::Float(0.0));
    let stride = b.param(4);
    let t = b.bin(B::Mul, row, stride);
    let off = b.bin(B::Add, t, cols);
    let xs = b.load(0, off, Some(mask), Some(zero16));
    let xs = b.cast(xs, D::F32);
    let s = b.reduce(ReduceOp::Sum, xs);
    let ncf = b.cast(n_cols, D::F32);
    let mean = b.bin(B::Div, s, ncf);
    let xm = b.bin(B::Sub, xs, mean);
    let zero = b.f32(0.0);
    let xc = b.where_(mask, xm, zero);
    let sq = b.bin(B::Mul, xc, xc);
    let ss = b.reduce(ReduceOp::Sum, sq);
    let var = b.bin(B::Div, ss, ncf);
    let eps = b.param(6);
    let ve = b.bin(B::Add, var, eps);
    let rstd = b.un(U::Rsqrt, ve);
    let w = b.load(2, cols, Some(mask), None);
    let w = b.cast(w, D::F32);
    let bb = b.load(3, cols, Some(mask), None);
    let bb = b.cast(bb, D::F32);
    let t = b.bin(B::Mul, xc, rstd);
    let t = b.bin(B::Mul, t, w);
    let yv = b.bin(B::Add, t, bb);
    let y16 = b.cast(yv, D::F16);
    b.store(1, off, y16, Some(mask));
    b.finish()
}

fn layernorm_wide_kernel() -> Kernel {
    let mut b = Kb::new(
        "layernorm_wide",
        &["BLOCK"],
        vec![
            ptr("x", D::F32, false),
            ptr("y", D::F32, true),
            ptr("w", D::F32, false),
            ptr("b", D::F32, false),
            scalar("stride", D::I32),
            scalar("n_cols", D::I32),
            scalar("eps", D::F32),
        ],
    );
    let row = b.pid(0);
    let stride = b.param(4);
    let rowoff = b.bin(B::Mul, row, stride);
    let n_cols = b.param(5);
    let zero = b.f32(0.0);
    let s0 = b.i32(0);
    let step = b.konst(0, D::I32);
    // `for start in (0..n_cols).step_by(BLOCK) { let cols = start + arange(0, BLOCK); ... }`
    let cols_of = |b: &mut Kb, start: VarId| {
        let ar = b.arange(0, block());
        let cols = b.bin(B::Add, start, ar);
        let m = b.bin(B::Lt, cols, n_cols);
        let off = b.bin(B::Add, rowoff, cols);
        (cols, m, off)
    };
    let acc = b.splat(zero, block());
    let start = b.var(Ty::scalar(D::I32));
    b.for_(start, s0, n_cols, step, |b| {
        let (_, m, off) = cols_of(b, start);
        let t = b.load(0, off, Some(m), Some(zero));
        b.set(acc, Expr::Binary(B::Add, acc, t));
    });
    let s = b.reduce(ReduceOp::Sum, acc);
    let ncf = b.cast(n_cols, D::F32);
    let mean = b.bin(B::Div, s, ncf);
    let acc2 = b.splat(zero, block());
    let start2 = b.var(Ty::scalar(D::I32));
    b.for_(start2, s0, n_cols, step, |b| {
        let (_, m, off) = cols_of(b, start2);
        let t = b.load(0, off, Some(m), Some(zero));
        let d = b.bin(B::Sub, t, mean);
        let d = b.where_(m, d, zero);
        let dd = b.bin(B::Mul, d, d);
        b.set(acc2, Expr::Binary(B::Add, acc2, dd));
    });
    let s2 = b.reduce(ReduceOp::Sum, acc2);
    let var = b.bin(B::Div, s2, ncf);
    let eps = b.param(6);
    let ve = b.bin(B::Add, var, eps);
    let sq = b.un(U::Sqrt, ve);
    let one = b.f32(1.0);
    let rstd = b.bin(B::Div, one, sq);
    let start3 = b.var(Ty::scalar(D::I32));
    b.for_(start3, s0, n_cols, step, |b| {
        let (cols, m, off) = cols_of(b, start3);
        let xv = b.load(0, off, Some(m), None);
        let d = b.bin(B::Sub, xv, mean);
        let d = b.bin(B::Mul, d, rstd);
        let w = b.load(2, cols, Some(m), None);
        let d = b.bin(B::Mul, d, w);
        let bb = b.load(3, cols, Some(m), None);
        let v = b.bin(B::Add, d, bb);
        b.store(1, off, v, Some(m));
    });
    b.finish()
}

fn bias_gelu_dropout_kernel() -> Kernel {
    let mut b = Kb::new(
        "bias_gelu_dropout",
        &["BLOCK"],
        vec![
            ptr("x", D::F32, false),
            ptr("bias", D::F32, false),
            ptr("out", D::F32, true),
            scalar("seed", D::U64),
            scalar("p", D::F32),
            scalar("n", D::I32),
            scalar("h", D::I32),
        ],
    );
    let pid = b.pid(0);
    let blk = b.konst(0, D::I32);
    let base = b.bin(B::Mul, pid, blk);
    let ar = b.arange(0, block());
    let offs = b.bin(B::Add, base, ar);
    let n = b.param(5);
    let m = b.bin(B::Lt, offs, n);
    let xv = b.load(0, offs, Some(m), None);
    let h = b.param(6);
    let oh = b.bin(B::Rem, offs, h);
    let bv = b.load(1, oh, Some(m), None);
    let v = b.bin(B::Add, xv, bv);
    let half_ = b.f32(0.5);
    let c = b.f32(std::f64::consts::FRAC_1_SQRT_2);
    let one = b.f32(1.0);
    let t = b.bin(B::Mul, half_, v);
    let u = b.bin(B::Mul, v, c);
    let e = b.un(U::Erf, u);
    let e1 = b.bin(B::Add, one, e);
    let g = b.bin(B::Mul, t, e1);
    let seed = b.param(3);
    let r = b.rand(seed, offs);
    let p = b.param(4);
    let keep = b.bin(B::Gt, r, p);
    let q = b.bin(B::Sub, one, p);
    let gq = b.bin(B::Div, g, q);
    let zero = b.f32(0.0);
    let res = b.where_(keep, gq, zero);
    b.store(2, offs, res, Some(m));
    b.finish()
}

// ------------------------------------------------------------------------------------------------
// Seed kernel tests.

fn run_add_mul_f32(
    n: usize,
    block: u64,
    x: &[f32],
    y: &[f32],
    z: &[f32],
    out: &mut [f32],
) -> Result<(), CpuError> {
    let k = add_mul_kernel(D::F32);
    let grid = [cdiv(n, block as usize), 1, 1];
    run(
        &k,
        &[block],
        grid,
        &mut [
            CpuArg::Read(bytes(x)),
            CpuArg::Read(bytes(y)),
            CpuArg::Read(bytes(z)),
            CpuArg::Write(bytes_mut(out)),
            CpuArg::I32(n as i32),
        ],
    )
}

#[test]
fn add_mul_f32_matches_reference() {
    let mut rng = Rng(1);
    for (n, block) in [(10_007usize, 256u64), (1, 64), (4096, 1024), (3000, 1)] {
        let (x, y, z) = (rng.vec(n, -4.0, 4.0), rng.vec(n, -4.0, 4.0), rng.vec(n, -4.0, 4.0));
        let mut out = vec![f32::NAN; n];
        run_add_mul_f32(n, block, &x, &y, &z, &mut out).unwrap();
        for i in 0..n {
            // Bit-exact with f32 arithmetic, and close to the f64 reference.
            assert_eq!(out[i].to_bits(), ((x[i] + y[i]) * z[i]).to_bits(), "lane {i}");
            let want = (f64::from(x[i]) + f64::from(y[i])) * f64::from(z[i]);
            assert_close(out[i], want, 1e-6, 1e-6, "add_mul");
        }
    }
}

#[test]
fn add_mul_f16_matches_reference() {
    let mut rng = Rng(2);
    let n = 5000;
    let block = 512u64;
    let gen = |rng: &mut Rng| (0..n).map(|_| f16::from_f32(rng.f32(-4.0, 4.0))).collect::<Vec<_>>();
    let (x, y, z) = (gen(&mut rng), gen(&mut rng), gen(&mut rng));
    let mut out = vec![f16::NAN; n];
    let k = add_mul_kernel(D::F16);
    run(
        &k,
        &[block],
        [cdiv(n, block as usize), 1, 1],
        &mut [
            CpuArg::Read(bytes(&x)),
            CpuArg::Read(bytes(&y)),
            CpuArg::Read(bytes(&z)),
            CpuArg::Write(bytes_mut(&mut out)),
            CpuArg::I32(n as i32),
        ],
    )
    .unwrap();
    for i in 0..n {
        let (a, b, c) = (x[i].to_f32(), y[i].to_f32(), z[i].to_f32());
        assert_eq!(out[i].to_bits(), f16::from_f32((a + b) * c).to_bits(), "lane {i}");
        let want = (f64::from(a) + f64::from(b)) * f64::from(c);
        assert_close(out[i].to_f32(), want, 1e-3, 1e-4, "add_mul f16");
    }
}

#[test]
fn softmax_matches_reference() {
    let mut rng = Rng(3);
    let (rows, n_cols, in_stride, out_stride, block) = (37usize, 300usize, 320usize, 310usize, 512u64);
    let inp = rng.vec(rows * in_stride, -8.0, 8.0);
    let mut out = vec![f32::NAN; rows * out_stride];
    run(
        &softmax_kernel(),
        &[block],
        [rows as u32, 1, 1],
        &mut [
            CpuArg::Write(bytes_mut(&mut out)),
            CpuArg::Read(bytes(&inp)),
            CpuArg::I32(in_stride as i32),
            CpuArg::I32(out_stride as i32),
            CpuArg::I32(n_cols as i32),
        ],
    )
    .unwrap();
    for r in 0..rows {
        let xs: Vec<f64> = (0..n_cols).map(|c| f64::from(inp[r * in_stride + c])).collect();
        let m = xs.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let den: f64 = xs.iter().map(|x| (x - m).exp()).sum();
        for c in 0..out_stride {
            let got = out[r * out_stride + c];
            if c < n_cols {
                assert_close(got, (xs[c] - m).exp() / den, 1e-5, 1e-9, &format!("softmax[{r}][{c}]"));
            } else {
                assert!(got.is_nan(), "softmax wrote outside the row: [{r}][{c}] = {got}");
            }
        }
    }
}

fn layernorm_ref(x: &[f64], w: &[f64], b: &[f64], eps: f64) -> Vec<f64> {
    let n = x.len() as f64;
    let mean = x.iter().sum::<f64>() / n;
    let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
    let rstd = 1.0 / (var + eps).sqrt();
    x.iter().zip(w).zip(b).map(|((v, w), b)| (v - mean) * rstd * w + b).collect()
}

#[test]
fn layernorm_f16_matches_reference() {
    let mut rng = Rng(4);
    let (rows, n_cols, stride, block, eps) = (64usize, 700usize, 768usize, 1024u64, 1e-5f32);
    let h = |v: Vec<f32>| v.into_iter().map(f16::from_f32).collect::<Vec<_>>();
    let x = h(rng.vec(rows * stride, -3.0, 5.0));
    let w = h(rng.vec(n_cols, 0.5, 1.5));
    let bb = h(rng.vec(n_cols, -1.0, 1.0));
    let mut y = vec![f16::NAN; rows * stride];
    run(
        &layernorm_f16_kernel(),
        &[block],
        [rows as u32, 1, 1],
        &mut [
            CpuArg::Read(bytes(&x)),
            CpuArg::Write(bytes_mut(&mut y)),
            CpuArg::Read(bytes(&w)),
            CpuArg::Read(bytes(&bb)),
            CpuArg::I32(stride as i32),
            CpuArg::I32(n_cols as i32),
            CpuArg::F32(eps),
        ],
    )
    .unwrap();
    let f = |v: &[f16]| v.iter().map(|x| f64::from(x.to_f32())).collect::<Vec<_>>();
    let (wf, bf) = (f(&w), f(&bb));
    for r in 0..rows {
        let want = layernorm_ref(&f(&x[r * stride..r * stride + n_cols]), &wf, &bf, f64::from(eps));
        for c in 0..stride {
            let got = y[r * stride + c];
            if c < n_cols {
                // f16 output: half an ulp is 2^-11 relative; allow a few.
                assert_close(got.to_f32(), want[c], 2e-3, 2e-3, &format!("layernorm_f16[{r}][{c}]"));
            } else {
                assert!(got.is_nan(), "wrote padding [{r}][{c}]");
            }
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn run_layernorm_wide(
    rows: usize,
    n_cols: usize,
    stride: usize,
    block: u64,
    x: &[f32],
    w: &[f32],
    b: &[f32],
    y: &mut [f32],
) {
    run(
        &layernorm_wide_kernel(),
        &[block],
        [rows as u32, 1, 1],
        &mut [
            CpuArg::Read(bytes(x)),
            CpuArg::Write(bytes_mut(y)),
            CpuArg::Read(bytes(w)),
            CpuArg::Read(bytes(b)),
            CpuArg::I32(stride as i32),
            CpuArg::I32(n_cols as i32),
            CpuArg::F32(1e-5),
        ],
    )
    .unwrap();
}

#[test]
fn layernorm_wide_matches_reference() {
    let mut rng = Rng(5);
    for (rows, n_cols, stride, block) in
        [(16usize, 3000usize, 3100usize, 256u64), (3, 1024, 1024, 1024), (5, 7, 9, 4)]
    {
        let x = rng.vec(rows * stride, -3.0, 5.0);
        let w = rng.vec(n_cols, 0.5, 1.5);
        let b = rng.vec(n_cols, -1.0, 1.0);
        let mut y = vec![f32::NAN; rows * stride];
        run_layernorm_wide(rows, n_cols, stride, block, &x, &w, &b, &mut y);
        let f = |v: &[f32]| v.iter().map(|&x| f64::from(x)).collect::<Vec<_>>();
        for r in 0..rows {
            let want = layernorm_ref(&f(&x[r * stride..r * stride + n_cols]), &f(&w), &f(&b), 1e-5);
            for c in 0..stride {
                let got = y[r * stride + c];
                if c < n_cols {
                    assert_close(got, want[c], 1e-4, 1e-5, &format!("layernorm_wide[{r}][{c}]"));
                } else {
                    assert!(got.is_nan(), "wrote padding [{r}][{c}]");
                }
            }
        }
    }
}

fn run_dropout(seed: u64, p: f32, x: &[f32], bias: &[f32], out: &mut [f32]) {
    let block = 1024u64;
    let n = x.len();
    run(
        &bias_gelu_dropout_kernel(),
        &[block],
        [cdiv(n, block as usize), 1, 1],
        &mut [
            CpuArg::Read(bytes(x)),
            CpuArg::Read(bytes(bias)),
            CpuArg::Write(bytes_mut(out)),
            CpuArg::U64(seed),
            CpuArg::F32(p),
            CpuArg::I32(n as i32),
            CpuArg::I32(bias.len() as i32),
        ],
    )
    .unwrap();
}

#[test]
fn bias_gelu_dropout_matches_reference() {
    let mut rng = Rng(6);
    let (n, h, p) = (100_003usize, 1000usize, 0.3f32);
    let x = rng.vec(n, -3.0, 3.0);
    let bias = rng.vec(h, -1.0, 1.0);
    let seed = 0x1234_5678_9abc_def0u64;
    let mut out = vec![f32::NAN; n];
    run_dropout(seed, p, &x, &bias, &mut out);
    let mut kept = 0usize;
    for i in 0..n {
        let keep = philox::rand(seed, i as u64) > p;
        if keep {
            kept += 1;
            let v = f64::from(x[i] + bias[i % h]);
            let g = 0.5 * v * (1.0 + libm::erf(v / std::f64::consts::SQRT_2));
            assert_close(out[i], g / (1.0 - f64::from(p)), 1e-5, 1e-6, &format!("dropout kept lane {i}"));
        } else {
            assert_eq!(out[i].to_bits(), 0, "dropped lane {i} is {}", out[i]);
        }
    }
    let (nf, q) = (n as f64, 1.0 - f64::from(p));
    let sigma = (nf * q * (1.0 - q)).sqrt();
    assert!(
        (kept as f64 - nf * q).abs() < 4.0 * sigma,
        "kept {kept} of {n}, expected {} ± {}",
        nf * q,
        4.0 * sigma
    );

    let mut again = vec![f32::NAN; n];
    run_dropout(seed, p, &x, &bias, &mut again);
    assert!(out.iter().zip(&again).all(|(a, b)| a.to_bits() == b.to_bits()), "same seed, same output");
    let mut other = vec![f32::NAN; n];
    run_dropout(seed + 1, p, &x, &bias, &mut other);
    let differ = out.iter().zip(&other).filter(|(a, b)| (**a == 0.0) != (**b == 0.0)).count();
    assert!(differ > n / 10, "another seed gives another mask ({differ} lanes differ)");
}

// ------------------------------------------------------------------------------------------------
// Targeted tests.

/// `y[offs] = x[offs + shift]` for `offs < n` (both f32).
fn copy_kernel(shift: i64, mask_lo: bool) -> Kernel {
    let mut b = Kb::new(
        "copy",
        &["BLOCK"],
        vec![ptr("x", D::F32, false), ptr("y", D::F32, true), scalar("n", D::I32)],
    );
    let pid = b.pid(0);
    let blk = b.konst(0, D::I32);
    let base = b.bin(B::Mul, pid, blk);
    let ar = b.arange(0, block());
    let offs = b.bin(B::Add, base, ar);
    let n = b.param(2);
    let mut mask = b.bin(B::Lt, offs, n);
    let sh = b.i32(shift);
    let src = b.bin(B::Add, offs, sh);
    if mask_lo {
        // also require src >= 0
        let zero = b.i32(0);
        let lo = b.bin(B::Ge, src, zero);
        mask = b.bin(B::And, mask, lo);
    }
    let seven = b.f32(7.0);
    let v = b.load(0, src, Some(mask), Some(seven));
    let all = b.bin(B::Lt, offs, n);
    b.store(1, offs, v, Some(all));
    b.finish()
}

fn run_copy(k: &Kernel, block: u64, grid: u32, x: &[f32], y: &mut [f32], n: i32) -> Result<(), CpuError> {
    run(k, &[block], [grid, 1, 1], &mut [CpuArg::Read(bytes(x)), CpuArg::Write(bytes_mut(y)), CpuArg::I32(n)])
}

#[test]
fn out_of_bounds_load_is_an_error() {
    let x = vec![1.0f32; 100];
    let mut y = vec![0.0f32; 128];
    let err = run_copy(&copy_kernel(0, false), 64, 2, &x, &mut y, 101).unwrap_err();
    assert_eq!(err, CpuError::OutOfBounds { param: "x".into(), index: 100, len: 100, program: [1, 0, 0] });
    assert!(err.to_string().contains("`x`"), "{err}");
    // Negative offsets too.
    let err = run_copy(&copy_kernel(-3, false), 64, 1, &x, &mut y, 64).unwrap_err();
    assert_eq!(err, CpuError::OutOfBounds { param: "x".into(), index: -3, len: 100, program: [0, 0, 0] });
}

#[test]
fn out_of_bounds_store_is_an_error() {
    let x = vec![1.0f32; 128];
    let mut y = vec![0.0f32; 100];
    let err = run_copy(&copy_kernel(0, false), 64, 2, &x, &mut y, 128).unwrap_err();
    assert_eq!(err, CpuError::OutOfBounds { param: "y".into(), index: 100, len: 100, program: [1, 0, 0] });
}

#[test]
fn masked_off_lanes_are_not_accessed() {
    // Buffers of exactly n elements with n not a multiple of BLOCK, and negative offsets masked.
    let n = 70;
    let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let mut y = vec![f32::NAN; n];
    run_copy(&copy_kernel(-5, true), 64, 2, &x, &mut y, n as i32).unwrap();
    for i in 0..n {
        let want = if i >= 5 { (i - 5) as f32 } else { 7.0 };
        assert_eq!(y[i], want, "lane {i}");
    }
    // Empty buffers with every lane masked off.
    let mut empty: Vec<f32> = vec![];
    run_copy(&copy_kernel(0, false), 64, 3, &[], &mut empty, 0).unwrap();
}

/// `out[i] = cast(x[i])` for one tile of 16 lanes.
fn cast_kernel(from: D, to: D) -> Kernel {
    let mut b = Kb::new("cast", &[], vec![ptr("x", from, false), ptr("out", to, true)]);
    let offs = b.arange(0, Len::literal_log2(4));
    let x = b.load(0, offs, None, None);
    let y = b.cast(x, to);
    b.store(1, offs, y, None);
    b.finish()
}

fn cast16<F: Pod, T: Pod + Default>(from: D, to: D, x: &[F]) -> Vec<T> {
    assert_eq!(x.len(), 16);
    let mut out = vec![T::default(); 16];
    run(
        &cast_kernel(from, to),
        &[],
        [1, 1, 1],
        &mut [CpuArg::Read(bytes(x)), CpuArg::Write(bytes_mut(&mut out))],
    )
    .unwrap();
    out
}

fn pad16(v: &[f32]) -> Vec<f32> {
    let mut v = v.to_vec();
    v.resize(16, 0.0);
    v
}

#[test]
fn f16_and_bf16_round_to_nearest_even() {
    let p = |e: i32| 2f32.powi(e);
    let x = pad16(&[
        1.0 + p(-11),       // tie between 1 and 1 + 2^-10 → 1 (even)
        1.0 + 3.0 * p(-11), // tie → 1 + 2^-9 (even)
        1.0 + p(-11) + p(-20),
        65520.0, // tie between 65504 and 65536 → inf
        65519.0,
        p(-25),       // tie between 0 and the smallest subnormal → 0
        3.0 * p(-25), // tie → 2 * 2^-24
        -(1.0 + p(-11)),
        f32::NAN,
        -f32::NAN,
        f32::from_bits(0x7f80_0001), // signalling NaN
        f32::INFINITY,
        -0.0,
    ]);
    let h: Vec<f16> = cast16(D::F32, D::F16, &x);
    let want: [u16; 13] = [
        0x3c00, 0x3c02, 0x3c01, 0x7c00, 0x7bff, 0x0000, 0x0002, 0xbc00, 0x7fff, 0x7fff, 0x7fff, 0x7c00,
        0x8000,
    ];
    for (i, w) in want.iter().enumerate() {
        assert_eq!(h[i].to_bits(), *w, "f16 lane {i}: {} -> {:#06x}", x[i], h[i].to_bits());
    }
    let x =
        pad16(&[1.0 + p(-8), 1.0 + 3.0 * p(-8), 1.0 + p(-8) + p(-20), f32::NAN, -f32::NAN, f32::MAX, -0.0]);
    let b: Vec<bf16> = cast16(D::F32, D::BF16, &x);
    let want: [u16; 7] = [0x3f80, 0x3f82, 0x3f81, 0x7fff, 0x7fff, 0x7f80, 0x8000];
    for (i, w) in want.iter().enumerate() {
        assert_eq!(b[i].to_bits(), *w, "bf16 lane {i}: {} -> {:#06x}", x[i], b[i].to_bits());
    }
    // f16 → f16 is not a conversion: bits (NaN payloads included) pass through.
    let hx: Vec<f16> = (0..16u16).map(|i| f16::from_bits(0x7e01 + i)).collect();
    let hy: Vec<f16> = cast16(D::F16, D::F16, &hx);
    assert!(hx.iter().zip(&hy).all(|(a, b)| a.to_bits() == b.to_bits()));
}

#[test]
fn float_to_int_casts_saturate() {
    let x =
        pad16(&[f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 3e9, -3e9, 2.7, -2.7, 255.9, 256.0, -0.5, 0.0]);
    let i: Vec<i32> = cast16(D::F32, D::I32, &x);
    assert_eq!(&i[..11], &[0, i32::MAX, i32::MIN, i32::MAX, i32::MIN, 2, -2, 255, 256, 0, 0]);
    let u: Vec<u8> = cast16(D::F32, D::U8, &x);
    assert_eq!(&u[..11], &[0, 255, 0, 255, 0, 2, 0, 255, 255, 0, 0]);
    let u: Vec<u32> = cast16(D::F32, D::U32, &x);
    assert_eq!(&u[..11], &[0, u32::MAX, 0, 3_000_000_000, 0, 2, 0, 255, 256, 0, 0]);
    let b: Vec<u8> = cast16(D::F32, D::Bool, &x);
    assert_eq!(&b[..11], &[1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0], "any → bool is != 0 (NaN is true)");
    // int → int wraps; int → float rounds to nearest even.
    let xi: Vec<i32> =
        [300, -1, 256, i32::MIN, 16_777_217, 16_777_219, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9].to_vec();
    let u: Vec<u8> = cast16(D::I32, D::U8, &xi);
    assert_eq!(&u[..4], &[44, 255, 0, 0]);
    let u: Vec<u32> = cast16(D::I32, D::U32, &xi);
    assert_eq!(u[1], u32::MAX);
    let f: Vec<f32> = cast16(D::I32, D::F32, &xi);
    assert_eq!(&f[4..6], &[16_777_216.0, 16_777_220.0]);
    let l: Vec<i64> = cast16(D::I32, D::I64, &xi);
    assert_eq!(l[3], i64::from(i32::MIN), "sign extends");
    let bo: Vec<u8> = cast16(D::I32, D::Bool, &xi);
    assert_eq!(&bo[6..8], &[0, 1]);
    // bool → number is 0/1.
    let xb: Vec<u8> = (0..16).map(|i| (i % 2) as u8).collect();
    let f: Vec<f32> = cast16(D::Bool, D::F32, &xb);
    assert_eq!(&f[..4], &[0.0, 1.0, 0.0, 1.0]);
}

/// `out = a op b` over one tile of 16 of dtype `d`.
fn binop_kernel(op: B, d: D) -> Kernel {
    let out_d = if op.is_comparison() { D::Bool } else { d };
    let mut b = Kb::new("binop", &[], vec![ptr("a", d, false), ptr("b", d, false), ptr("out", out_d, true)]);
    let offs = b.arange(0, Len::literal_log2(4));
    let x = b.load(0, offs, None, None);
    let y = b.load(1, offs, None, None);
    let z = b.bin(op, x, y);
    b.store(2, offs, z, None);
    b.finish()
}

fn binop16<T: Pod + Default>(op: B, d: D, a: &[T], b: &[T]) -> Vec<T> {
    let mut out = vec![T::default(); 16];
    run(
        &binop_kernel(op, d),
        &[],
        [1, 1, 1],
        &mut [CpuArg::Read(bytes(a)), CpuArg::Read(bytes(b)), CpuArg::Write(bytes_mut(&mut out))],
    )
    .unwrap();
    out
}

#[test]
fn integer_division_by_zero_and_wrapping() {
    let mut a: Vec<i32> = vec![7, -7, 7, -7, i32::MIN, i32::MIN, 5, i32::MAX];
    let mut b: Vec<i32> = vec![2, 2, 0, 0, -1, 0, -3, 1];
    a.resize(16, 1);
    b.resize(16, 1);
    assert_eq!(&binop16(B::Div, D::I32, &a, &b)[..8], &[3, -3, 0, 0, i32::MIN, 0, -1, i32::MAX]);
    assert_eq!(&binop16(B::Rem, D::I32, &a, &b)[..8], &[1, -1, 0, 0, 0, 0, 2, 0]);
    assert_eq!(binop16(B::Add, D::I32, &a, &b)[7], i32::MIN, "add wraps");
    assert_eq!(binop16(B::Mul, D::I32, &a, &b)[4], i32::MIN, "MIN * -1 wraps");
    let ua: Vec<u32> = (0..16).map(|i| 100 + i).collect();
    let ub: Vec<u32> = (0..16).map(|i| i % 3).collect();
    let q = binop16(B::Div, D::U32, &ua, &ub);
    let r = binop16(B::Rem, D::U32, &ua, &ub);
    for i in 0..16 {
        let (x, y) = (ua[i], ub[i]);
        assert_eq!(q[i], x.checked_div(y).unwrap_or(0));
        assert_eq!(r[i], x.checked_rem(y).unwrap_or(0));
    }
    assert_eq!(binop16(B::Sub, D::U32, &ub, &ua)[0], 0u32.wrapping_sub(100));
}

#[test]
fn float_max_min_and_fmod() {
    let a = pad16(&[f32::NAN, 1.0, f32::NAN, -2.0, 5.5, -5.5, 1.0, f32::INFINITY]);
    let b = pad16(&[1.0, f32::NAN, f32::NAN, 3.0, 2.0, 2.0, 0.0, 1.0]);
    let mx = binop16(B::Max, D::F32, &a, &b);
    let mn = binop16(B::Min, D::F32, &a, &b);
    assert_eq!(mx[0], 1.0);
    assert_eq!(mx[1], 1.0);
    assert!(mx[2].is_nan());
    assert_eq!(mx[3], 3.0);
    assert_eq!(mn[0], 1.0);
    assert_eq!(mn[3], -2.0);
    let r = binop16(B::Rem, D::F32, &a, &b);
    assert_eq!(&r[4..6], &[1.5, -1.5], "fmod keeps the dividend's sign");
    assert!(r[6].is_nan() && r[7].is_nan());
}

#[test]
fn reductions_follow_maxnum_and_wrap() {
    // max/min/sum over a 16-lane tile loaded from `x`; results stored to out[0..3].
    let mut b = Kb::new("red", &[], vec![ptr("x", D::F32, false), ptr("out", D::F32, true)]);
    let offs = b.arange(0, Len::literal_log2(4));
    let x = b.load(0, offs, None, None);
    for (i, op) in [ReduceOp::Max, ReduceOp::Min, ReduceOp::Sum].into_iter().enumerate() {
        let r = b.reduce(op, x);
        let o = b.i32(i as i64);
        b.store(1, o, r, None);
    }
    let k = b.finish();
    let go = |x: &[f32]| {
        let mut out = vec![0.0f32; 3];
        run(&k, &[], [1, 1, 1], &mut [CpuArg::Read(bytes(x)), CpuArg::Write(bytes_mut(&mut out))]).unwrap();
        out
    };
    let mut x: Vec<f32> = (0..16).map(|i| i as f32 - 3.0).collect();
    x[5] = f32::NAN;
    let out = go(&x);
    assert_eq!(out[0], 12.0);
    assert_eq!(out[1], -3.0);
    assert!(out[2].is_nan(), "sum propagates NaN");
    let out = go(&[f32::NAN; 16]);
    assert!(out[0].is_nan() && out[1].is_nan(), "all-NaN max/min is NaN");

    // Integer sum wraps.
    let mut b = Kb::new("ired", &[], vec![ptr("x", D::I32, false), ptr("out", D::I32, true)]);
    let offs = b.arange(0, Len::literal_log2(4));
    let x = b.load(0, offs, None, None);
    let r = b.reduce(ReduceOp::Sum, x);
    let o = b.i32(0);
    b.store(1, o, r, None);
    let x = vec![i32::MAX; 16];
    let mut out = vec![0i32; 1];
    run(&b.finish(), &[], [1, 1, 1], &mut [CpuArg::Read(bytes(&x)), CpuArg::Write(bytes_mut(&mut out))])
        .unwrap();
    assert_eq!(out[0], i32::MAX.wrapping_mul(16));
}

#[test]
fn rand_is_philox_lane_for_lane() {
    // out[i] = rand(seed, offs[i]) with i64 offsets read from a buffer and an i64 seed; and the
    // same with i32 offsets (sign-extended) and a u32 seed.
    for (od, sd) in [(D::I64, D::I64), (D::I32, D::U32), (D::U64, D::U64), (D::U32, D::I32)] {
        let mut b =
            Kb::new("r", &[], vec![ptr("o", od, false), ptr("out", D::F32, true), scalar("seed", sd)]);
        let idx = b.arange(0, Len::literal_log2(6));
        let offs = b.load(0, idx, None, None);
        let seed = b.param(2);
        let r = b.rand(seed, offs);
        b.store(1, idx, r, None);
        let k = b.finish();
        let mut rng = Rng(7);
        let raw: Vec<i64> = (0..64)
            .map(|i| match i % 4 {
                0 => i,
                1 => -(i * 3),
                2 => (rng.next() >> 1) as i64 - (1 << 62),
                _ => rng.next() as i64,
            })
            .collect();
        let mut out = vec![f32::NAN; 64];
        let seed_raw = -0x1234_5678_9abc_i64;
        let (seed_arg, seed_u64) = match sd {
            D::I64 => (CpuArg::I64(seed_raw), seed_raw as u64),
            D::U64 => (CpuArg::U64(seed_raw as u64), seed_raw as u64),
            D::U32 => (CpuArg::U32(seed_raw as u32), u64::from(seed_raw as u32)),
            _ => (CpuArg::I32(seed_raw as i32), seed_raw as i32 as i64 as u64),
        };
        let want: Vec<f32> = match od {
            D::I64 | D::U64 => {
                run(
                    &k,
                    &[],
                    [1, 1, 1],
                    &mut [CpuArg::Read(bytes(&raw)), CpuArg::Write(bytes_mut(&mut out)), seed_arg],
                )
                .unwrap();
                raw.iter().map(|&o| philox::rand(seed_u64, o as u64)).collect()
            }
            D::I32 => {
                let o32: Vec<i32> = raw.iter().map(|&o| o as i32).collect();
                run(
                    &k,
                    &[],
                    [1, 1, 1],
                    &mut [CpuArg::Read(bytes(&o32)), CpuArg::Write(bytes_mut(&mut out)), seed_arg],
                )
                .unwrap();
                o32.iter().map(|&o| philox::rand(seed_u64, o as i64 as u64)).collect()
            }
            _ => {
                let o32: Vec<u32> = raw.iter().map(|&o| o as u32).collect();
                run(
                    &k,
                    &[],
                    [1, 1, 1],
                    &mut [CpuArg::Read(bytes(&o32)), CpuArg::Write(bytes_mut(&mut out)), seed_arg],
                )
                .unwrap();
                o32.iter().map(|&o| philox::rand(seed_u64, u64::from(o))).collect()
            }
        };
        for i in 0..64 {
            assert_eq!(out[i].to_bits(), want[i].to_bits(), "{od}/{sd} lane {i}");
        }
    }
}

#[test]
fn grids_of_two_and_three_dimensions() {
    // out[(z * ny + y) * nx + x] = x + 10 y + 100 z + 1000 * (nx + ny + nz)
    let mut b = Kb::new("grid", &[], vec![ptr("out", D::I32, true)]);
    let [x, y, z] = [0, 1, 2].map(|a| b.pid(a));
    let [nx, ny, nz] = [0, 1, 2].map(|a| b.nprog(a));
    let t = b.bin(B::Mul, z, ny);
    let t = b.bin(B::Add, t, y);
    let t = b.bin(B::Mul, t, nx);
    let idx = b.bin(B::Add, t, x);
    let ten = b.i32(10);
    let hundred = b.i32(100);
    let thousand = b.i32(1000);
    let v = b.bin(B::Mul, y, ten);
    let v = b.bin(B::Add, v, x);
    let w = b.bin(B::Mul, z, hundred);
    let v = b.bin(B::Add, v, w);
    let s = b.bin(B::Add, nx, ny);
    let s = b.bin(B::Add, s, nz);
    let s = b.bin(B::Mul, s, thousand);
    let v = b.bin(B::Add, v, s);
    b.store(0, idx, v, None);
    let k = b.finish();
    for grid in [[3u32, 4, 5], [7, 2, 1], [1, 1, 9], [200, 3, 2]] {
        let total = grid.iter().product::<u32>() as usize;
        let mut out = vec![-1i32; total];
        run(&k, &[], grid, &mut [CpuArg::Write(bytes_mut(&mut out))]).unwrap();
        let sum = grid.iter().sum::<u32>() as i32;
        for zz in 0..grid[2] {
            for yy in 0..grid[1] {
                for xx in 0..grid[0] {
                    let i = ((zz * grid[1] + yy) * grid[0] + xx) as usize;
                    assert_eq!(
                        out[i],
                        (xx + 10 * yy + 100 * zz) as i32 + 1000 * sum,
                        "grid {grid:?} at ({xx},{yy},{zz})"
                    );
                }
            }
        }
    }
    // An empty grid runs nothing.
    let mut out = vec![-1i32; 1];
    run(&k, &[], [0, 4, 1], &mut [CpuArg::Write(bytes_mut(&mut out))]).unwrap();
    assert_eq!(out[0], -1);
}

/// `count = 0; sum = 0; for i in (start..end).step_by(step) { count += 1; sum += i };
/// if count > 2 { out[0] = count; out[1] = sum } else { out[0] = -count; out[1] = -sum }`
fn loop_kernel(d: D) -> Kernel {
    let mut b = Kb::new(
        "loops",
        &[],
        vec![ptr("out", D::I64, true), scalar("start", d), scalar("end", d), scalar("step", d)],
    );
    let (start, end, step) = (b.param(1), b.param(2), b.param(3));
    let count = b.lit(D::I64, Literal::Int(0));
    let sum = b.lit(D::I64, Literal::Int(0));
    let one = b.lit(D::I64, Literal::Int(1));
    let i = b.var(Ty::scalar(d));
    b.for_(i, start, end, step, |b| {
        b.set(count, Expr::Binary(B::Add, count, one));
        let iw = b.cast(i, D::I64);
        b.set(sum, Expr::Binary(B::Add, sum, iw));
    });
    let two = b.lit(D::I64, Literal::Int(2));
    let c = b.bin(B::Gt, count, two);
    let o0 = b.lit(D::I64, Literal::Int(0));
    let o1 = b.lit(D::I64, Literal::Int(1));
    b.if_(
        c,
        |b| {
            b.store(0, o0, count, None);
            b.store(0, o1, sum, None);
        },
        |b| {
            let nc = b.un(U::Neg, count);
            let ns = b.un(U::Neg, sum);
            b.store(0, o0, nc, None);
            b.store(0, o1, ns, None);
        },
    );
    b.finish()
}

fn run_loop_i32(start: i32, end: i32, step: i32) -> [i64; 2] {
    let mut out = [0i64; 2];
    run(
        &loop_kernel(D::I32),
        &[],
        [1, 1, 1],
        &mut [CpuArg::Write(bytes_mut(&mut out)), CpuArg::I32(start), CpuArg::I32(end), CpuArg::I32(step)],
    )
    .unwrap();
    out
}

#[test]
fn for_loops_and_ifs() {
    assert_eq!(run_loop_i32(0, 10, 1), [10, 45]);
    assert_eq!(run_loop_i32(0, 10, 3), [4, 18]);
    assert_eq!(run_loop_i32(-5, 5, 4), [3, -5 - 1 + 3]);
    assert_eq!(run_loop_i32(0, 2, 1), [-2, -1], "else branch");
    assert_eq!(run_loop_i32(5, 0, 1), [0, 0], "empty range");
    assert_eq!(run_loop_i32(0, 10, 0), [0, 0], "step 0 runs nothing");
    assert_eq!(run_loop_i32(0, 10, -1), [0, 0], "negative step runs nothing");
    // i + step would overflow: stop instead of wrapping.
    let m = i64::from(i32::MAX);
    assert_eq!(run_loop_i32(i32::MAX - 5, i32::MAX, 4), [-2, -((m - 5) + (m - 1))]);
    assert_eq!(
        run_loop_i32(i32::MIN, i32::MAX, i32::MAX),
        [3, i64::from(i32::MIN) + i64::from(i32::MIN) + m + i64::from(i32::MIN) + 2 * m]
    );
    // u64 bounds near the top of the range.
    let mut out = [0i64; 2];
    let k = loop_kernel(D::U64);
    run(
        &k,
        &[],
        [1, 1, 1],
        &mut [
            CpuArg::Write(bytes_mut(&mut out)),
            CpuArg::U64(u64::MAX - 10),
            CpuArg::U64(u64::MAX),
            CpuArg::U64(3),
        ],
    )
    .unwrap();
    assert_eq!(out[0], 4);
}

#[test]
fn in_place_update_through_a_writable_buffer() {
    // x[i] = x[i] * 2 + i for i < n, loading from the *mut buffer itself.
    let mut b = Kb::new("inplace", &["BLOCK"], vec![ptr("x", D::F32, true), scalar("n", D::I32)]);
    let pid = b.pid(0);
    let blk = b.konst(0, D::I32);
    let base = b.bin(B::Mul, pid, blk);
    let ar = b.arange(0, block());
    let offs = b.bin(B::Add, base, ar);
    let n = b.param(1);
    let m = b.bin(B::Lt, offs, n);
    let x = b.load(0, offs, Some(m), None);
    let two = b.f32(2.0);
    let y = b.bin(B::Mul, x, two);
    let fi = b.cast(offs, D::F32);
    let y = b.bin(B::Add, y, fi);
    b.store(0, offs, y, Some(m));
    let k = b.finish();
    let n = 100_000;
    let mut x: Vec<f32> = (0..n).map(|i| (i % 7) as f32).collect();
    run(&k, &[128], [cdiv(n, 128), 1, 1], &mut [CpuArg::Write(bytes_mut(&mut x)), CpuArg::I32(n as i32)])
        .unwrap();
    for (i, v) in x.iter().enumerate() {
        assert_eq!(*v, (i % 7) as f32 * 2.0 + i as f32);
    }
}

#[test]
fn mismatched_launches_are_errors_not_panics() {
    let k = add_mul_kernel(D::F32);
    let x = vec![0f32; 8];
    let mut out = vec![0f32; 8];
    let invalid = |r: Result<(), CpuError>| matches!(r, Err(CpuError::InvalidKernel(_)));
    // Too few arguments.
    assert!(invalid(run(&k, &[8], [1, 1, 1], &mut [CpuArg::Read(bytes(&x))])));
    // A scalar of the wrong type.
    assert!(invalid(run(
        &k,
        &[8],
        [1, 1, 1],
        &mut [
            CpuArg::Read(bytes(&x)),
            CpuArg::Read(bytes(&x)),
            CpuArg::Read(bytes(&x)),
            CpuArg::Write(bytes_mut(&mut out)),
            CpuArg::F32(8.0)
        ]
    )));
    // A read-only buffer for the output.
    assert!(invalid(run(
        &k,
        &[8],
        [1, 1, 1],
        &mut [
            CpuArg::Read(bytes(&x)),
            CpuArg::Read(bytes(&x)),
            CpuArg::Read(bytes(&x)),
            CpuArg::Read(bytes(&x)),
            CpuArg::I32(8)
        ]
    )));
    // A misaligned / ragged buffer.
    let raw = bytes(&x);
    assert!(invalid(run(
        &k,
        &[8],
        [1, 1, 1],
        &mut [
            CpuArg::Read(&raw[1..9]),
            CpuArg::Read(raw),
            CpuArg::Read(raw),
            CpuArg::Write(bytes_mut(&mut out)),
            CpuArg::I32(8)
        ]
    )));
    assert!(invalid(run(
        &k,
        &[8],
        [1, 1, 1],
        &mut [
            CpuArg::Read(&raw[..7]),
            CpuArg::Read(raw),
            CpuArg::Read(raw),
            CpuArg::Write(bytes_mut(&mut out)),
            CpuArg::I32(8)
        ]
    )));
    // Missing or non-power-of-two const generic.
    let args = || [CpuArg::Read(bytes(&x)), CpuArg::Read(bytes(&x)), CpuArg::Read(bytes(&x)), CpuArg::I32(8)];
    let _ = args;
    let mut out2 = vec![0f32; 8];
    assert!(invalid(run(
        &k,
        &[],
        [1, 1, 1],
        &mut [
            CpuArg::Read(bytes(&x)),
            CpuArg::Read(bytes(&x)),
            CpuArg::Read(bytes(&x)),
            CpuArg::Write(bytes_mut(&mut out2)),
            CpuArg::I32(8)
        ]
    )));
    assert!(invalid(run(
        &k,
        &[6],
        [1, 1, 1],
        &mut [
            CpuArg::Read(bytes(&x)),
            CpuArg::Read(bytes(&x)),
            CpuArg::Read(bytes(&x)),
            CpuArg::Write(bytes_mut(&mut out2)),
            CpuArg::I32(8)
        ]
    )));
    // A malformed kernel: an operand of the wrong dtype, a bad var index, a store to *const.
    let mut bad = k.clone();
    bad.body.push(Stmt::Assign { dst: VarId(0), expr: Expr::Lit(Literal::Int(0)) });
    bad.body.push(Stmt::Assign { dst: VarId(0), expr: Expr::Copy(VarId(9999)) });
    let mut bad2 = k.clone();
    bad2.body.push(Stmt::Store { param: 0, offset: VarId(5), value: VarId(9), mask: None });
    let mut bad3 = k.clone();
    if let Stmt::Assign { expr, .. } = &mut bad3.body[2] {
        *expr = Expr::Binary(B::Add, VarId(0), VarId(1)); // i32 scalar + i32 scalar into i32: fine
    }
    bad3.body.push(Stmt::Assign { dst: VarId(2), expr: Expr::Unary(U::Exp, VarId(0)) }); // exp of i32
    for kk in [bad, bad2, bad3] {
        let r = run(
            &kk,
            &[8],
            [1, 1, 1],
            &mut [
                CpuArg::Read(bytes(&x)),
                CpuArg::Read(bytes(&x)),
                CpuArg::Read(bytes(&x)),
                CpuArg::Write(bytes_mut(&mut out2)),
                CpuArg::I32(8),
            ],
        );
        assert!(invalid(r.clone()), "{r:?}");
    }
}

/// Measures the ulp error of the CPU math functions against f64 (run with --nocapture to see).
#[test]
fn math_functions_ulp_error() {
    fn ulp_diff(got: f32, want: f64) -> f64 {
        if got.is_nan() || want.is_nan() {
            return if got.is_nan() && want.is_nan() { 0.0 } else { f64::INFINITY };
        }
        let w = want as f32;
        if w.is_infinite() || got.is_infinite() {
            return if (got as f64) == (w as f64) { 0.0 } else { f64::INFINITY };
        }
        // ulp of the f32 nearest to the exact value
        let ulp = {
            let a = w.abs();
            let next = f32::from_bits(a.to_bits() + 1);
            f64::from(next) - f64::from(a)
        };
        (f64::from(got) - want).abs() / ulp
    }
    // (name, op, reference, lo, hi)
    type F = fn(f64) -> f64;
    let cases: [(&str, U, F, f32, f32); 13] = [
        ("exp", U::Exp, f64::exp, -80.0, 80.0),
        ("exp2", U::Exp2, f64::exp2, -120.0, 120.0),
        ("log", U::Log, f64::ln, 1e-30, 1e30),
        ("log2", U::Log2, f64::log2, 1e-30, 1e30),
        ("sqrt", U::Sqrt, f64::sqrt, 0.0, 1e30),
        ("rsqrt", U::Rsqrt, |x| 1.0 / x.sqrt(), 1e-30, 1e30),
        ("erf", U::Erf, libm::erf, -5.0, 5.0),
        ("tanh", U::Tanh, f64::tanh, -10.0, 10.0),
        ("sigmoid", U::Sigmoid, |x| 1.0 / (1.0 + (-x).exp()), -104.0, 30.0),
        ("floor", U::Floor, f64::floor, -1e4, 1e4),
        ("ceil", U::Ceil, f64::ceil, -1e4, 1e4),
        ("sin", U::Sin, f64::sin, -100.0, 100.0),
        ("cos", U::Cos, f64::cos, -100.0, 100.0),
    ];
    let n = 1 << 16;
    let mut report = String::new();
    let mut worst_over: Vec<String> = Vec::new();
    for (name, op, reference, lo, hi) in cases {
        let mut b = Kb::new("m", &[], vec![ptr("x", D::F32, false), ptr("out", D::F32, true)]);
        let offs = b.arange(0, Len::literal_log2(16));
        let x = b.load(0, offs, None, None);
        let y = b.un(op, x);
        b.store(1, offs, y, None);
        let k = b.finish();
        let mut rng = Rng(8);
        let x: Vec<f32> = if matches!(name, "log" | "log2" | "sqrt" | "rsqrt") {
            // log-uniform over [lo, hi]
            (0..n).map(|_| (rng.f32(lo.ln(), hi.max(1.0).ln())).exp()).collect()
        } else {
            rng.vec(n, lo, hi)
        };
        let mut out = vec![f32::NAN; n];
        run(&k, &[], [1, 1, 1], &mut [CpuArg::Read(bytes(&x)), CpuArg::Write(bytes_mut(&mut out))]).unwrap();
        let worst =
            x.iter().zip(&out).map(|(&x, &y)| ulp_diff(y, reference(f64::from(x)))).fold(0.0, f64::max);
        report += &format!("{name}: max {worst:.3} ulp\n");
        let bound = match name {
            "sqrt" | "floor" | "ceil" => 0.5,
            "sigmoid" => 3.0, // 1 / (1 + exp(-x)): three roundings
            _ => 2.0,
        };
        worst_over.extend((worst > bound).then(|| format!("{name}: {worst} ulp > {bound}")));
    }
    println!("{report}");
    assert!(worst_over.is_empty(), "{worst_over:?}");
}

/// `exp2` flushes subnormal results to +0 (the GPU's `ex2.approx.ftz`); normal results, 0, +inf,
/// -inf and NaN are exp2f's.
#[test]
fn exp2_flushes_subnormal_results() {
    let mut b = Kb::new("e", &[], vec![ptr("x", D::F32, false), ptr("out", D::F32, true)]);
    let offs = b.arange(0, Len::literal_log2(3));
    let x = b.load(0, offs, None, None);
    let y = b.un(U::Exp2, x);
    b.store(1, offs, y, None);
    let k = b.finish();
    let x: [f32; 8] = [-126.0, -126.5, -149.0, -1000.0, f32::NEG_INFINITY, f32::INFINITY, f32::NAN, 3.0];
    let mut out = [f32::NAN; 8];
    run(&k, &[], [1, 1, 1], &mut [CpuArg::Read(bytes(&x)), CpuArg::Write(bytes_mut(&mut out))]).unwrap();
    assert_eq!(out[0], f32::MIN_POSITIVE);
    for (i, v) in out[1..5].iter().enumerate() {
        assert!(*v == 0.0 && v.is_sign_positive(), "exp2({}) = {v:e}, not +0", x[i + 1]);
    }
    assert_eq!(out[5], f32::INFINITY);
    assert!(out[6].is_nan());
    assert_eq!(out[7], 8.0);
}

// ------------------------------------------------------------------------------------------------
// `dot`: the IR's order of accumulation, TF32 inputs, wrapping i8, and malformed IR refused.

impl Pod for i8 {}

/// `out = dot(a, b[, acc])` of one `[m, k] @ [k, n]` product: the operands (and the accumulator)
/// loaded flat and reshaped, the result reshaped back and stored flat.
fn dot_kernel(input: D, accum: D, with_acc: bool, [m, k, n]: [u32; 3]) -> Kernel {
    let lit = |x: u32| Len::literal_log2(x.trailing_zeros() as i32);
    let mut params = vec![ptr("a", input, false), ptr("b", input, false), ptr("out", accum, true)];
    if with_acc {
        params.push(ptr("acc", accum, false));
    }
    let mut kb = Kb::new("dot", &[], params);
    let operand = |kb: &mut Kb, param: u32, rows: u32, cols: u32| {
        let offs = kb.arange(0, lit(rows * cols));
        let flat = kb.load(param, offs, None, None);
        let d = kb.ty(flat).dtype;
        kb.let_(Ty::tile2(d, lit(rows), lit(cols)), Expr::Reshape(flat))
    };
    let a = operand(&mut kb, 0, m, k);
    let b = operand(&mut kb, 1, k, n);
    let acc = with_acc.then(|| operand(&mut kb, 3, m, n));
    let d = kb.let_(Ty::tile2(accum, lit(m), lit(n)), Expr::Dot { a, b, acc });
    let flat = kb.let_(Ty::tile(accum, lit(m * n)), Expr::Reshape(d));
    let offs = kb.arange(0, lit(m * n));
    kb.store(2, offs, flat, None);
    kb.finish()
}

fn run_dot<T: Pod, R: Pod + Default>(
    k: &Kernel,
    a: &[T],
    b: &[T],
    acc: Option<&[R]>,
    n_out: usize,
) -> Vec<R> {
    let mut out = vec![R::default(); n_out];
    let mut args = vec![CpuArg::Read(bytes(a)), CpuArg::Read(bytes(b)), CpuArg::Write(bytes_mut(&mut out))];
    args.extend(acc.map(|c| CpuArg::Read(bytes(c))));
    run(k, &[], [1, 1, 1], &mut args).unwrap();
    out
}

#[test]
fn dot_adds_in_order_from_the_accumulator() {
    let (m, k, n) = (16usize, 32usize, 16usize);
    let mut rng = Rng(15);
    // Magnitudes far apart, so a different order of additions gives a different f32.
    let a: Vec<f32> =
        (0..m * k).map(|i| rng.f32(-1.0, 1.0) * if i % 7 == 0 { 4096.0 } else { 1.0 }).collect();
    let b = rng.vec(k * n, -1.0, 1.0);
    let acc = rng.vec(m * n, -100.0, 100.0);
    let (a16, b16): (Vec<f16>, Vec<f16>) =
        (a.iter().map(|&x| f16::from_f32(x)).collect(), b.iter().map(|&x| f16::from_f32(x)).collect());
    let got = run_dot(&dot_kernel(D::F16, D::F32, true, [16, 32, 16]), &a16, &b16, Some(&acc), m * n);
    for i in 0..m {
        for j in 0..n {
            let mut r = acc[i * n + j];
            for kk in 0..k {
                r += a16[i * k + kk].to_f32() * b16[kk * n + j].to_f32();
            }
            assert_eq!(got[i * n + j].to_bits(), r.to_bits(), "({i}, {j})");
        }
    }
}

#[test]
fn dot_rounds_f32_inputs_to_tf32() {
    // 1 + 2^-12 is 1 in TF32 and 1 + 2^-11 rounds away from zero to 1 + 2^-10: every product is
    // exact, so the sums show the rounding.
    let (m, k, n) = (16usize, 16usize, 16usize);
    let mut a = vec![0f32; m * k];
    let mut b = vec![0f32; k * n];
    a[0] = 1.0 + 2f32.powi(-12);
    a[1] = 1.0 + 2f32.powi(-11);
    a[k] = -(1.0 + 2f32.powi(-11));
    b[0] = 1.0;
    b[n] = 1.0;
    let got = run_dot::<f32, f32>(&dot_kernel(D::F32, D::F32, false, [16, 16, 16]), &a, &b, None, m * n);
    assert_eq!(got[0], 1.0 + (1.0 + 2f32.powi(-10)), "row 0: tf32(1 + 2^-12) + tf32(1 + 2^-11)");
    assert_eq!(got[n], -(1.0 + 2f32.powi(-10)), "row 1: ties away from zero on negatives too");
    assert!(got.iter().enumerate().all(|(i, &x)| i == 0 || i == n || x == 0.0));
}

#[test]
fn dot_of_i8_wraps_in_i32() {
    let (m, k, n) = (16usize, 16usize, 16usize);
    let a = vec![-128i8; m * k];
    let b = vec![127i8; k * n];
    let acc: Vec<i32> = (0..m * n).map(|i| if i == 0 { i32::MIN } else { i as i32 }).collect();
    let got = run_dot::<i8, i32>(&dot_kernel(D::I8, D::I32, true, [16, 16, 16]), &a, &b, Some(&acc), m * n);
    let sum = 16 * -128 * 127;
    assert_eq!(got[0], i32::MIN.wrapping_add(sum), "wraps below i32::MIN");
    assert_eq!(got[5], 5 + sum);
}

#[test]
fn malformed_dots_are_refused() {
    let invalid = |k: Kernel| {
        let a = vec![0f32; 256];
        let mut out = vec![0f32; 256];
        let r = run(
            &k,
            &[],
            [1, 1, 1],
            &mut [CpuArg::Read(bytes(&a)), CpuArg::Read(bytes(&a)), CpuArg::Write(bytes_mut(&mut out))],
        );
        assert!(matches!(r, Err(CpuError::InvalidKernel(ref m)) if m.contains("bad dot")), "{r:?}");
    };
    // K below 16.
    invalid(dot_kernel(D::F32, D::F32, false, [16, 8, 16]));
    // An accumulator dtype that is not the inputs'.
    invalid(dot_kernel(D::F32, D::I32, false, [16, 16, 16]));
    // Inner dims that differ: b reshaped to [32, 8].
    let mut k = dot_kernel(D::F32, D::F32, false, [16, 16, 16]);
    let b = k
        .body
        .iter()
        .find_map(|s| match s {
            Stmt::Assign { expr: Expr::Dot { b, .. }, .. } => Some(*b),
            _ => None,
        })
        .unwrap();
    k.vars[b.0 as usize].ty = Ty::tile2(D::F32, Len::literal_log2(5), Len::literal_log2(3));
    invalid(k);
}
