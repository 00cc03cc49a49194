//! Hand-built IR, shaped as the checker lowers the seed kernels (add_mul, softmax, LayerNorm,
//! bias + GELU + dropout; their sources in fuse-kernels).
use fuse_ir::*;

pub fn blk() -> Len {
    Len::of_const(0)
}

pub fn ptr(elem: DType, mutable: bool) -> ParamKind {
    ParamKind::Ptr { elem, mutable }
}

/// A tiny IR builder: vars are declared by the statement that first assigns them.
pub struct Builder {
    k: Kernel,
    bodies: Vec<Vec<Stmt>>,
}

impl Builder {
    pub fn new(name: &str, consts: &[&str], params: &[(&str, ParamKind)]) -> Builder {
        Builder {
            k: Kernel {
                name: name.into(),
                consts: consts.iter().map(|c| c.to_string()).collect(),
                params: params.iter().map(|(n, kind)| Param { name: n.to_string(), kind: *kind }).collect(),
                vars: Vec::new(),
                body: Vec::new(),
            },
            bodies: vec![Vec::new()],
        }
    }

    pub fn var(&mut self, name: &str, ty: Ty) -> VarId {
        self.k.vars.push(Var { name: name.into(), ty });
        VarId(self.k.vars.len() as u32 - 1)
    }

    pub fn push(&mut self, s: Stmt) {
        self.bodies.last_mut().unwrap().push(s);
    }

    pub fn set(&mut self, dst: VarId, expr: Expr) {
        self.push(Stmt::Assign { dst, expr });
    }

    pub fn scalar(&mut self, name: &str, d: DType, expr: Expr) -> VarId {
        let v = self.var(name, Ty::scalar(d));
        self.set(v, expr);
        v
    }

    pub fn tile_expr(&mut self, name: &str, d: DType, len: Len, expr: Expr) -> VarId {
        let v = self.var(name, Ty::tile(d, len));
        self.set(v, expr);
        v
    }

    /// A new var of `like`'s type (or another dtype) holding `expr`.
    pub fn like(&mut self, name: &str, like: VarId, d: DType, expr: Expr) -> VarId {
        let shape = self.k.ty(like).shape.clone();
        let v = self.var(name, Ty { dtype: d, shape });
        self.set(v, expr);
        v
    }

    pub fn bin(&mut self, name: &str, op: BinaryOp, a: VarId, b: VarId) -> VarId {
        let (ta, tb) = (self.k.ty(a).clone(), self.k.ty(b).clone());
        let shape = if ta.shape.is_scalar() { tb.shape } else { ta.shape };
        let d = if op.is_comparison() { DType::Bool } else { ta.dtype };
        let v = self.var(name, Ty { dtype: d, shape });
        self.set(v, Expr::Binary(op, a, b));
        v
    }

    pub fn un(&mut self, name: &str, op: UnaryOp, a: VarId) -> VarId {
        let ty = self.k.ty(a).clone();
        let v = self.var(name, ty);
        self.set(v, Expr::Unary(op, a));
        v
    }

    pub fn cast(&mut self, name: &str, a: VarId, d: DType) -> VarId {
        self.like(name, a, d, Expr::Cast(a))
    }

    pub fn load(
        &mut self,
        name: &str,
        param: u32,
        offset: VarId,
        mask: Option<VarId>,
        other: Option<VarId>,
    ) -> VarId {
        let elem = match self.k.params[param as usize].kind {
            ParamKind::Ptr { elem, .. } => elem,
            _ => unreachable!(),
        };
        self.like(name, offset, elem, Expr::Load { param, offset, mask, other })
    }

    pub fn store(&mut self, param: u32, offset: VarId, value: VarId, mask: Option<VarId>) {
        self.push(Stmt::Store { param, offset, value, mask });
    }

    pub fn reduce(&mut self, name: &str, op: ReduceOp, t: VarId) -> VarId {
        let d = self.k.ty(t).dtype;
        self.scalar(name, d, Expr::Reduce(op, t))
    }

    pub fn lit_f(&mut self, name: &str, x: f64) -> VarId {
        self.scalar(name, DType::F32, Expr::Lit(Literal::Float(x)))
    }

    pub fn param(&mut self, name: &str, p: u32) -> VarId {
        let d = match self.k.params[p as usize].kind {
            ParamKind::Scalar(d) => d,
            _ => unreachable!(),
        };
        self.scalar(name, d, Expr::Param(p))
    }

    pub fn begin(&mut self) {
        self.bodies.push(Vec::new());
    }

    pub fn end(&mut self) -> Vec<Stmt> {
        self.bodies.pop().unwrap()
    }

    pub fn finish(mut self) -> Kernel {
        assert_eq!(self.bodies.len(), 1);
        self.k.body = self.bodies.pop().unwrap();
        self.k
    }

    /// `program_id(0) * BLOCK + arange(0, BLOCK)`.
    pub fn block_offsets(&mut self) -> VarId {
        let pid = self.scalar("t0", DType::I32, Expr::ProgramId(0));
        let b = self.scalar("t1", DType::I32, Expr::ConstGeneric(0));
        let base = self.bin("t2", BinaryOp::Mul, pid, b);
        let ar = self.tile_expr("t3", DType::I32, blk(), Expr::Arange { start: 0 });
        self.bin("offs", BinaryOp::Add, base, ar)
    }
}

pub fn add_mul(d: DType) -> Kernel {
    let name = if d == DType::F32 { "add_mul" } else { "add_mul_f16" };
    let mut b = Builder::new(
        name,
        &["BLOCK"],
        &[
            ("x", ptr(d, false)),
            ("y", ptr(d, false)),
            ("z", ptr(d, false)),
            ("out", ptr(d, true)),
            ("n", ParamKind::Scalar(DType::I32)),
        ],
    );
    let offs = b.block_offsets();
    let n = b.param("t4", 4);
    let mask = b.bin("mask", BinaryOp::Lt, offs, n);
    let mut vals = Vec::new();
    for (p, nm) in [(0, "x"), (1, "y"), (2, "z")] {
        let v = b.load(nm, p, offs, Some(mask), None);
        vals.push(if d == DType::F32 { v } else { b.cast(&format!("t_{nm}"), v, DType::F32) });
    }
    let s = b.bin("t5", BinaryOp::Add, vals[0], vals[1]);
    let p = b.bin("t6", BinaryOp::Mul, s, vals[2]);
    let p = if d == DType::F32 { p } else { b.cast("t7", p, d) };
    b.store(3, offs, p, Some(mask));
    b.finish()
}

pub fn softmax() -> Kernel {
    let i32s = ParamKind::Scalar(DType::I32);
    let mut b = Builder::new(
        "softmax",
        &["BLOCK"],
        &[
            ("out", ptr(DType::F32, true)),
            ("inp", ptr(DType::F32, false)),
            ("in_stride", i32s),
            ("out_stride", i32s),
            ("n_cols", i32s),
        ],
    );
    let row = b.scalar("row", DType::I32, Expr::ProgramId(0));
    let cols = b.tile_expr("cols", DType::I32, blk(), Expr::Arange { start: 0 });
    let nc = b.param("t0", 4);
    let mask = b.bin("mask", BinaryOp::Lt, cols, nc);
    let is = b.param("t1", 2);
    let t2 = b.bin("t2", BinaryOp::Mul, row, is);
    let off_in = b.bin("t3", BinaryOp::Add, t2, cols);
    let ninf = b.lit_f("t4", f64::NEG_INFINITY);
    let x = b.load("x", 1, off_in, Some(mask), Some(ninf));
    let mx = b.reduce("t5", ReduceOp::Max, x);
    let x1 = b.bin("x_1", BinaryOp::Sub, x, mx);
    let num = b.un("num", UnaryOp::Exp, x1);
    let den = b.reduce("t6", ReduceOp::Sum, num);
    let y = b.bin("y", BinaryOp::Div, num, den);
    let os = b.param("t7", 3);
    let t8 = b.bin("t8", BinaryOp::Mul, row, os);
    let off_out = b.bin("t9", BinaryOp::Add, t8, cols);
    b.store(0, off_out, y, Some(mask));
    b.finish()
}

pub fn layernorm_f16() -> Kernel {
    let h = DType::F16;
    let mut b = Builder::new(
        "layernorm_f16",
        &["BLOCK"],
        &[
            ("x", ptr(h, false)),
            ("y", ptr(h, true)),
            ("w", ptr(h, false)),
            ("b", ptr(h, false)),
            ("stride", ParamKind::Scalar(DType::I32)),
            ("n_cols", ParamKind::Scalar(DType::I32)),
            ("eps", ParamKind::Scalar(DType::F32)),
        ],
    );
    let row = b.scalar("row", DType::I32, Expr::ProgramId(0));
    let cols = b.tile_expr("cols", DType::I32, blk(), Expr::Arange { start: 0 });
    let nc = b.param("t0", 5);
    let mask = b.bin("mask", BinaryOp::Lt, cols, nc);
    let st = b.param("t1", 4);
    let t2 = b.bin("t2", BinaryOp::Mul, row, st);
    let offx = b.bin("t3", BinaryOp::Add, t2, cols);
    let zf = b.lit_f("t4", 0.0);
    let zh = b.cast("t5", zf, h);
    let xs = b.load("xs", 0, offx, Some(mask), Some(zh));
    let xf = b.cast("t6", xs, DType::F32);
    let s = b.reduce("t7", ReduceOp::Sum, xf);
    let ncf = b.cast("t8", nc, DType::F32);
    let mean = b.bin("mean", BinaryOp::Div, s, ncf);
    let d = b.bin("t9", BinaryOp::Sub, xf, mean);
    let xc = b.like("xc", d, DType::F32, Expr::Where(mask, d, zf));
    let sq = b.bin("t10", BinaryOp::Mul, xc, xc);
    let ss = b.reduce("t11", ReduceOp::Sum, sq);
    let var = b.bin("var", BinaryOp::Div, ss, ncf);
    let eps = b.param("t12", 6);
    let ve = b.bin("t13", BinaryOp::Add, var, eps);
    let rstd = b.un("rstd", UnaryOp::Rsqrt, ve);
    let t14 = b.bin("t14", BinaryOp::Mul, xc, rstd);
    let wl = b.load("t15", 2, cols, Some(mask), None);
    let wf = b.cast("t16", wl, DType::F32);
    let t17 = b.bin("t17", BinaryOp::Mul, t14, wf);
    let bl = b.load("t18", 3, cols, Some(mask), None);
    let bf = b.cast("t19", bl, DType::F32);
    let yv = b.bin("yv", BinaryOp::Add, t17, bf);
    let yh = b.cast("t20", yv, h);
    b.store(1, offx, yh, Some(mask));
    b.finish()
}

pub fn layernorm_wide() -> Kernel {
    let f = DType::F32;
    let mut b = Builder::new(
        "layernorm_wide",
        &["BLOCK"],
        &[
            ("x", ptr(f, false)),
            ("y", ptr(f, true)),
            ("w", ptr(f, false)),
            ("b", ptr(f, false)),
            ("stride", ParamKind::Scalar(DType::I32)),
            ("n_cols", ParamKind::Scalar(DType::I32)),
            ("eps", ParamKind::Scalar(DType::F32)),
        ],
    );
    let row = b.scalar("row", DType::I32, Expr::ProgramId(0));
    let st = b.param("t0", 4);
    let rs = b.bin("t1", BinaryOp::Mul, row, st);
    let nc = b.param("t2", 5);
    let ncf = b.cast("t3", nc, f);
    let zf = b.lit_f("t4", 0.0);
    let zero = b.scalar("t5", DType::I32, Expr::Lit(Literal::Int(0)));
    let step = b.scalar("t6", DType::I32, Expr::ConstGeneric(0));
    let eps = b.param("t7", 6);

    // Loop: `for start in (0..n_cols).step_by(BLOCK) { cols = start + arange; m = cols < n_cols; .. }`
    let looped = |b: &mut Builder, tag: &str, body: &mut dyn FnMut(&mut Builder, VarId, VarId)| {
        let start = b.var(&format!("start{tag}"), Ty::scalar(DType::I32));
        b.begin();
        let ar = b.tile_expr(&format!("ar{tag}"), DType::I32, blk(), Expr::Arange { start: 0 });
        let cols = b.bin(&format!("cols{tag}"), BinaryOp::Add, start, ar);
        let m = b.bin(&format!("m{tag}"), BinaryOp::Lt, cols, nc);
        body(b, cols, m);
        let body = b.end();
        b.push(Stmt::For { var: start, start: zero, end: nc, step, body });
    };

    let acc = b.tile_expr("acc", f, blk(), Expr::Splat(zf));
    looped(&mut b, "", &mut |b, cols, m| {
        let off = b.bin("t8", BinaryOp::Add, rs, cols);
        let l = b.load("t9", 0, off, Some(m), Some(zf));
        b.set(acc, Expr::Binary(BinaryOp::Add, acc, l));
    });
    let s = b.reduce("t10", ReduceOp::Sum, acc);
    let mean = b.bin("mean", BinaryOp::Div, s, ncf);
    let acc2 = b.tile_expr("acc2", f, blk(), Expr::Splat(zf));
    looped(&mut b, "_1", &mut |b, cols, m| {
        let off = b.bin("t11", BinaryOp::Add, rs, cols);
        let l = b.load("t12", 0, off, Some(m), Some(zf));
        let dd = b.bin("t13", BinaryOp::Sub, l, mean);
        let d = b.like("d", dd, f, Expr::Where(m, dd, zf));
        let sq = b.bin("t14", BinaryOp::Mul, d, d);
        b.set(acc2, Expr::Binary(BinaryOp::Add, acc2, sq));
    });
    let s2 = b.reduce("t15", ReduceOp::Sum, acc2);
    let v = b.bin("t16", BinaryOp::Div, s2, ncf);
    let ve = b.bin("t17", BinaryOp::Add, v, eps);
    let sq = b.un("t18", UnaryOp::Sqrt, ve);
    let one = b.lit_f("t19", 1.0);
    let rstd = b.bin("rstd", BinaryOp::Div, one, sq);
    looped(&mut b, "_2", &mut |b, cols, m| {
        let off = b.bin("t20", BinaryOp::Add, rs, cols);
        let xl = b.load("t21", 0, off, Some(m), None);
        let c = b.bin("t22", BinaryOp::Sub, xl, mean);
        let c = b.bin("t23", BinaryOp::Mul, c, rstd);
        let wl = b.load("t24", 2, cols, Some(m), None);
        let c = b.bin("t25", BinaryOp::Mul, c, wl);
        let bl = b.load("t26", 3, cols, Some(m), None);
        let v = b.bin("v", BinaryOp::Add, c, bl);
        b.store(1, off, v, Some(m));
    });
    b.finish()
}

pub fn bias_gelu_dropout(d: DType) -> Kernel {
    let name = if d == DType::F32 { "bias_gelu_dropout" } else { "bias_gelu_dropout_f16" };
    let mut b = Builder::new(
        name,
        &["BLOCK"],
        &[
            ("x", ptr(d, false)),
            ("bias", ptr(d, false)),
            ("out", ptr(d, true)),
            ("seed", ParamKind::Scalar(DType::U64)),
            ("p", ParamKind::Scalar(DType::F32)),
            ("n", ParamKind::Scalar(DType::I32)),
            ("h", ParamKind::Scalar(DType::I32)),
        ],
    );
    let offs = b.block_offsets();
    let n = b.param("t4", 5);
    let m = b.bin("m", BinaryOp::Lt, offs, n);
    let xl = b.load("t5", 0, offs, Some(m), None);
    let xf = if d == DType::F32 { xl } else { b.cast("t5f", xl, DType::F32) };
    let h = b.param("t6", 6);
    let bo = b.bin("t7", BinaryOp::Rem, offs, h);
    let bl = b.load("t8", 1, bo, Some(m), None);
    let bf = if d == DType::F32 { bl } else { b.cast("t8f", bl, DType::F32) };
    let v = b.bin("v", BinaryOp::Add, xf, bf);
    let half = b.lit_f("t9", 0.5);
    let t10 = b.bin("t10", BinaryOp::Mul, half, v);
    let c = b.lit_f("t11", std::f64::consts::FRAC_1_SQRT_2);
    let t12 = b.bin("t12", BinaryOp::Mul, v, c);
    let e = b.un("t13", UnaryOp::Erf, t12);
    let one = b.lit_f("t14", 1.0);
    let t15 = b.bin("t15", BinaryOp::Add, one, e);
    let g = b.bin("g", BinaryOp::Mul, t10, t15);
    let seed = b.param("t16", 3);
    let r = b.like("r", offs, DType::F32, Expr::Rand { seed, offset: offs, width: fuse_ir::RandWidth::W32 });
    let p = b.param("t17", 4);
    let keep = b.bin("t18", BinaryOp::Gt, r, p);
    let omp = b.bin("t19", BinaryOp::Sub, one, p);
    let gs = b.bin("t20", BinaryOp::Div, g, omp);
    let zf = b.lit_f("t21", 0.0);
    let res = b.like("t22", gs, DType::F32, Expr::Where(keep, gs, zf));
    let res = if d == DType::F32 { res } else { b.cast("t23", res, d) };
    b.store(2, offs, res, Some(m));
    b.finish()
}

/// Every Expr, Stmt, op and dtype at least once; several tile lengths (BLOCK, 2*BLOCK, BLOCK/2, 64).
pub fn everything() -> Kernel {
    // Every dtype but bool (never a pointee).
    let ptr_types: Vec<DType> = DType::ALL.into_iter().filter(|&d| d != DType::Bool).collect();
    let mut params: Vec<(String, ParamKind)> =
        ptr_types.iter().map(|d| (format!("p_{}", d.name()), ptr(*d, true))).collect();
    params.push(("src".into(), ptr(DType::F32, false)));
    for d in [DType::I32, DType::I64, DType::U32, DType::U64, DType::F32] {
        params.push((format!("s_{}", d.name()), ParamKind::Scalar(d)));
    }
    let pr: Vec<(&str, ParamKind)> = params.iter().map(|(n, k)| (n.as_str(), *k)).collect();
    let mut b = Builder::new("everything", &["BLOCK", "R"], &pr);
    let np = ptr_types.len() as u32;
    let sidx = |d: DType| {
        np + 1
            + [DType::I32, DType::I64, DType::U32, DType::U64, DType::F32]
                .iter()
                .position(|x| *x == d)
                .unwrap() as u32
    };

    let lens = [
        blk(),
        blk().mul(&Len::literal_log2(1)),
        Len { log2: -1, consts: vec![0] },
        Len::literal_log2(6),
        Len::of_const(1),
    ];
    let pid = b.scalar("pid", DType::I32, Expr::ProgramId(0));
    let _ = b.scalar("pid_y", DType::I32, Expr::ProgramId(1));
    let npz = b.scalar("np_z", DType::I32, Expr::NumPrograms(2));
    let _ = b.scalar("np_x", DType::I32, Expr::NumPrograms(0));
    let _ = b.scalar("np_y", DType::I32, Expr::NumPrograms(1));
    let t = b.scalar("t", DType::Bool, Expr::Lit(Literal::Bool(true)));
    let big = b.scalar("big", DType::U64, Expr::Lit(Literal::UInt(u64::MAX)));
    let imin = b.scalar("imin", DType::I32, Expr::Lit(Literal::Int(i64::from(i32::MIN))));
    let _ = b.scalar("lmin", DType::I64, Expr::Lit(Literal::Int(i64::MIN)));
    let nan = b.lit_f("nan", f64::NAN);
    let inf = b.lit_f("inf", f64::INFINITY);
    let _ = b.bin("nan_or_inf", BinaryOp::Max, nan, inf);
    let _ = b.bin("umix", BinaryOp::Add, big, big);
    let _ = b.bin("wrap", BinaryOp::Sub, imin, pid);

    for (li, len) in lens.iter().enumerate() {
        let tag = |s: &str| format!("{s}_{li}");
        let ar = b.tile_expr(&tag("ar"), DType::I32, len.clone(), Expr::Arange { start: 4 * li as i64 });
        let cst = b.scalar(&tag("c"), DType::I32, Expr::ConstGeneric((li % 2) as u32));
        let base = b.bin(&tag("base"), BinaryOp::Mul, pid, cst);
        let offs = b.bin(&tag("offs"), BinaryOp::Add, base, ar);
        let s_i32 = b.param(&tag("n"), sidx(DType::I32));
        let mask = b.bin(&tag("mask"), BinaryOp::Lt, offs, s_i32);
        let fsrc = b.load(&tag("f"), np, offs, Some(mask), None);
        // Every pointee dtype: a contiguous load and store (vector path) and a gathered one.
        for (pi, d) in ptr_types.iter().enumerate() {
            // Every dtype on two lengths, f32 only on the others (NVRTC time).
            if !(li == 0 || li == 3 || *d == DType::F32) {
                continue;
            }
            let v = b.load(&tag(&format!("v_{}", d.name())), pi as u32, offs, Some(mask), None);
            let w = b.cast(&tag(&format!("w_{}", d.name())), v, d.compute());
            let back = b.cast(&tag(&format!("b_{}", d.name())), w, *d);
            b.store(pi as u32, offs, back, Some(mask));
            let perm = b.bin(&tag(&format!("perm_{}", d.name())), BinaryOp::Xor, offs, cst);
            let g = b.load(&tag(&format!("g_{}", d.name())), pi as u32, perm, None, Some(v));
            let fb = b.cast(&tag(&format!("fb_{}", d.name())), fsrc, *d);
            let sel = b.like(&tag(&format!("sel_{}", d.name())), g, *d, Expr::Where(mask, g, fb));
            b.store(pi as u32, perm, sel, None);
        }
        if li == 3 {
            // The op zoo runs on the short (64) tile to keep NVRTC time low.
            // Every unary op on f32, every binary op on f32 and on each integer compute type.
            let mut acc = fsrc;
            for op in UnaryOp::MATH.iter().chain([UnaryOp::Neg, UnaryOp::Abs].iter()) {
                acc = b.un(&format!("u_{}", op.name()), *op, acc);
            }
            let bops = [
                BinaryOp::Add,
                BinaryOp::Sub,
                BinaryOp::Mul,
                BinaryOp::Div,
                BinaryOp::Rem,
                BinaryOp::Max,
                BinaryOp::Min,
            ];
            for op in bops {
                acc = b.bin(&format!("fb_{op:?}"), op, acc, fsrc);
            }
            for d in [DType::I32, DType::U32, DType::I64, DType::U64] {
                let mut x = b.cast(&format!("i_{}", d.name()), offs, d);
                let sp = b.param(&format!("sp_{}", d.name()), sidx(d));
                for op in bops.iter().chain([BinaryOp::And, BinaryOp::Or, BinaryOp::Xor].iter()) {
                    x = b.bin(&format!("ib_{}_{op:?}", d.name()), *op, x, sp);
                }
                for op in [UnaryOp::Neg, UnaryOp::Not, UnaryOp::Abs] {
                    x = b.un(&format!("iu_{}_{}", d.name(), op.name()), op, x);
                }
                for op in [BinaryOp::Lt, BinaryOp::Le, BinaryOp::Gt, BinaryOp::Ge, BinaryOp::Eq, BinaryOp::Ne]
                {
                    let c = b.bin(&format!("cmp_{}_{op:?}", d.name()), op, x, sp);
                    let _ = b.bin(&format!("bb_{}_{op:?}", d.name()), BinaryOp::And, c, mask);
                }
                for op in [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min] {
                    let _ = b.reduce(&format!("r_{}_{op:?}", d.name()), op, x);
                }
                // Scalar-offset loads/stores (broadcast) with a scalar mask.
                let so = b.cast(&format!("so_{}", d.name()), npz, d);
                let scalar_load = b.load(&format!("sl_{}", d.name()), np, so, Some(t), Some(nan));
                b.store(8, so, scalar_load, Some(t));
                // rand with tile and scalar offsets of this dtype.
                let seed = b.param(&format!("seed_{}", d.name()), sidx(d));
                let _ = b.like(
                    &format!("rt_{}", d.name()),
                    x,
                    DType::F32,
                    Expr::Rand { seed, offset: x, width: fuse_ir::RandWidth::W32 },
                );
                let _ = b.scalar(
                    &format!("rs_{}", d.name()),
                    DType::F32,
                    Expr::Rand { seed, offset: so, width: fuse_ir::RandWidth::W32 },
                );
            }
            let _ = b.un("not_mask", UnaryOp::Not, mask);
            for op in [BinaryOp::Or, BinaryOp::Xor, BinaryOp::Eq, BinaryOp::Ne] {
                let _ = b.bin(&format!("bm_{op:?}"), op, mask, mask);
            }
            for op in [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min] {
                let _ = b.reduce(&format!("rb_{op:?}"), op, mask);
                let _ = b.reduce(&format!("rf_{op:?}"), op, acc);
            }
            // Every cast between all dtypes (tiles), and a few scalar ones.
            for from in DType::ALL {
                let x = b.cast(&format!("from_{}", from.name()), acc, from);
                for to in DType::ALL {
                    let _ = b.cast(&format!("cast_{}_{}", from.name(), to.name()), x, to);
                }
                let s = b.cast(&format!("sfrom_{}", from.name()), nan, from);
                let _ = b.cast(&format!("sto_{}", from.name()), s, DType::F32);
            }
            // Splat, Copy, a where with a scalar condition, a loop-carried tile.
            let z = b.tile_expr("z", DType::F32, len.clone(), Expr::Splat(inf));
            let z2 = b.like("z2", z, DType::F32, Expr::Copy(acc));
            let _ = b.like("wsc", z, DType::F32, Expr::Where(t, z, z2));
            // Control flow: if/else, for over i64 and u32 with a reduction inside.
            b.begin();
            let lo = b.scalar("lo", DType::I64, Expr::Lit(Literal::Int(-3)));
            let hi = b.param("hi", sidx(DType::I64));
            let st = b.scalar("st", DType::I64, Expr::Lit(Literal::Int(2)));
            let k64 = b.var("k64", Ty::scalar(DType::I64));
            b.begin();
            let s = b.reduce("rsum", ReduceOp::Sum, z2);
            b.set(z2, Expr::Binary(BinaryOp::Sub, z2, s));
            let body = b.end();
            b.push(Stmt::For { var: k64, start: lo, end: hi, step: st, body });
            let then_body = b.end();
            b.begin();
            let ulo = b.scalar("ulo", DType::U32, Expr::Lit(Literal::UInt(1)));
            let uhi = b.param("uhi", sidx(DType::U32));
            let ku = b.var("ku", Ty::scalar(DType::U32));
            b.begin();
            let m = b.reduce("rmax", ReduceOp::Max, z2);
            let ms = b.like("ms", z2, DType::F32, Expr::Splat(m));
            b.set(z2, Expr::Binary(BinaryOp::Max, z2, ms));
            let body = b.end();
            b.push(Stmt::For { var: ku, start: ulo, end: uhi, step: ulo, body });
            let else_body = b.end();
            let c = b.bin("cond", BinaryOp::Gt, pid, imin);
            b.push(Stmt::If { cond: c, then_body, else_body });
            b.store(8, offs, z2, Some(mask));
        }
    }
    b.finish()
}

/// Makes every `rand` in `stmts` a `rand16`; how many there were.
fn widen(stmts: &mut [Stmt]) -> usize {
    let mut n = 0;
    for s in stmts {
        match s {
            Stmt::Assign { expr: Expr::Rand { width, .. }, .. } => {
                *width = RandWidth::W16;
                n += 1;
            }
            Stmt::If { then_body, else_body, .. } => n += widen(then_body) + widen(else_body),
            Stmt::For { body, .. } => n += widen(body),
            _ => {}
        }
    }
    n
}

/// `bias_gelu_dropout` of `dtype` with its `rand` made `rand16`.
pub fn bias_gelu_dropout16(dtype: DType) -> Kernel {
    let mut k = bias_gelu_dropout(dtype);
    assert_eq!(widen(&mut k.body), 1);
    k.name = k.name.replacen("bias_gelu_dropout", "bias_gelu_dropout16", 1);
    k
}

pub fn all_kernels() -> Vec<Kernel> {
    vec![
        add_mul(DType::F32),
        add_mul(DType::F16),
        softmax(),
        layernorm_f16(),
        layernorm_wide(),
        bias_gelu_dropout(DType::F32),
        bias_gelu_dropout(DType::F16),
        bias_gelu_dropout16(DType::F32),
        bias_gelu_dropout16(DType::F16),
        everything(),
    ]
}
