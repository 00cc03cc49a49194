//! Re-checks the IR against the rules the interpreter relies on, once per launch, so that a
//! malformed kernel is an `InvalidKernel` error and never a panic.
//!
//! Imports only `cpu/error.rs`.

use super::error::CpuError;
use fuse_ir::{
    dot_accumulator, BinaryOp, DType, Expr, Kernel, ParamKind, ReduceOp, Stmt, UnaryOp, VarId, DOT_MIN_DIM,
};

/// Tiles longer than this are refused (the interpreter allocates every var per worker).
pub(crate) const MAX_TILE: u64 = 1 << 26;
/// Refuse kernels whose per-program state (front and back buffers of every var) exceeds this.
const MAX_STATE_BYTES: u64 = 1 << 30;

/// Per-var facts the interpreter needs.
pub(crate) struct Layout {
    /// Element count: 1 for scalars.
    pub lens: Vec<usize>,
    /// Launch-time dims: none for scalars, `[len]` or `[rows, cols]` for tiles.
    pub dims: Vec<Vec<usize>>,
    /// Bytes of var storage one worker holds (two copies of every var; see `interp::Prog`).
    pub state: u64,
    pub dtypes: Vec<DType>,
}

fn bad(kernel: &Kernel, msg: String) -> CpuError {
    CpuError::InvalidKernel(format!("kernel `{}`: {msg}", kernel.name))
}

fn is_offset_int(d: DType) -> bool {
    matches!(d, DType::I32 | DType::U32 | DType::I64 | DType::U64)
}

pub(crate) fn check(kernel: &Kernel, consts: &[u64]) -> Result<Layout, CpuError> {
    if consts.len() != kernel.consts.len() {
        return Err(bad(
            kernel,
            format!("{} const generic values for {} const generics", consts.len(), kernel.consts.len()),
        ));
    }
    let mut lens = Vec::with_capacity(kernel.vars.len());
    let mut dtypes = Vec::with_capacity(kernel.vars.len());
    let mut state: u64 = 0;
    let mut dims_of = Vec::with_capacity(kernel.vars.len());
    for v in &kernel.vars {
        let mut dims = Vec::new();
        for l in v.ty.shape.dims() {
            if l.consts.iter().any(|&c| c as usize >= consts.len()) {
                return Err(bad(
                    kernel,
                    format!("var `{}`: tile length names a missing const generic", v.name),
                ));
            }
            match l.eval(consts) {
                Some(n) if n <= MAX_TILE => dims.push(n),
                Some(n) => {
                    return Err(bad(
                        kernel,
                        format!(
                            "var `{}`: tile length {n} is over the CPU back end's limit {MAX_TILE}",
                            v.name
                        ),
                    ))
                }
                None => {
                    return Err(bad(
                        kernel,
                        format!("var `{}`: tile length is not a power of two in range", v.name),
                    ))
                }
            }
        }
        let len = dims.iter().product::<u64>();
        if len > MAX_TILE {
            return Err(bad(
                kernel,
                format!("var `{}`: tile of {len} lanes is over the CPU back end's limit {MAX_TILE}", v.name),
            ));
        }
        dims_of.push(dims.iter().map(|&d| d as usize).collect::<Vec<usize>>());
        state += 2 * len * v.ty.dtype.size_bytes() as u64;
        lens.push(len as usize);
        dtypes.push(v.ty.dtype);
    }
    if state > MAX_STATE_BYTES {
        return Err(bad(
            kernel,
            format!("per-program state of {state} bytes is too large for the CPU back end"),
        ));
    }
    let checker = Checker { k: kernel, lens: &lens, dims: &dims_of, dtypes: &dtypes };
    checker.stmts(&kernel.body)?;
    Ok(Layout { lens, dims: dims_of, dtypes, state })
}

/// The IR's rules checked against one launch's layout.
struct Checker<'a> {
    k: &'a Kernel,
    lens: &'a [usize],
    dims: &'a [Vec<usize>],
    dtypes: &'a [DType],
}

impl Checker<'_> {
    fn err(&self, msg: String) -> CpuError {
        bad(self.k, msg)
    }

    fn var(&self, v: VarId) -> Result<(DType, usize), CpuError> {
        let i = v.0 as usize;
        if i >= self.lens.len() {
            return Err(self.err(format!("var index {i} out of range")));
        }
        Ok((self.dtypes[i], self.lens[i]))
    }

    fn name(&self, v: VarId) -> &str {
        &self.k.vars[v.0 as usize].name
    }

    /// `v` broadcasts to `n` lanes: a scalar (or length-1 tile) or exactly `n` long.
    fn fits(&self, v: VarId, n: usize, what: &str) -> Result<DType, CpuError> {
        let (d, l) = self.var(v)?;
        if l != 1 && l != n {
            return Err(self.err(format!("{what} `{}` has {l} lanes where {n} are expected", self.name(v))));
        }
        Ok(d)
    }

    fn scalar(&self, v: VarId, what: &str) -> Result<DType, CpuError> {
        let (d, _) = self.var(v)?;
        if !self.k.vars[v.0 as usize].ty.shape.is_scalar() {
            return Err(self.err(format!("{what} `{}` must be a scalar", self.name(v))));
        }
        Ok(d)
    }

    fn ptr(&self, param: u32, write: bool) -> Result<DType, CpuError> {
        match self.k.params.get(param as usize).map(|p| p.kind) {
            Some(ParamKind::Ptr { elem, mutable }) => {
                if write && !mutable {
                    return Err(self.err(format!(
                        "store to read-only parameter `{}`",
                        self.k.params[param as usize].name
                    )));
                }
                Ok(elem)
            }
            Some(ParamKind::Scalar(_)) => {
                Err(self.err(format!("parameter `{}` is not a pointer", self.k.params[param as usize].name)))
            }
            None => Err(self.err(format!("parameter index {param} out of range"))),
        }
    }

    fn stmts(&self, stmts: &[Stmt]) -> Result<(), CpuError> {
        for s in stmts {
            match s {
                Stmt::Assign { dst, expr } => {
                    let (d, n) = self.var(*dst)?;
                    self.expr(*dst, d, n, expr)?;
                }
                Stmt::Store { param, offset, value, mask } => {
                    let elem = self.ptr(*param, true)?;
                    let mut n = self.var(*offset)?.1.max(self.var(*value)?.1);
                    if let Some(m) = mask {
                        n = n.max(self.var(*m)?.1);
                    }
                    let od = self.fits(*offset, n, "store offset")?;
                    if !is_offset_int(od) {
                        return Err(self
                            .err(format!("store offset `{}` is {od}, not an integer", self.name(*offset))));
                    }
                    let vd = self.fits(*value, n, "store value")?;
                    if vd != elem {
                        return Err(self.err(format!("store of {vd} into a {elem} buffer")));
                    }
                    if let Some(m) = mask {
                        if self.fits(*m, n, "store mask")? != DType::Bool {
                            return Err(self.err("store mask is not bool".into()));
                        }
                    }
                }
                Stmt::If { cond, then_body, else_body } => {
                    if self.scalar(*cond, "if condition")? != DType::Bool {
                        return Err(self.err("if condition is not bool".into()));
                    }
                    self.stmts(then_body)?;
                    self.stmts(else_body)?;
                }
                Stmt::For { var, start, end, step, body } => {
                    let d = self.scalar(*var, "loop variable")?;
                    if !is_offset_int(d) {
                        return Err(self.err(format!("loop variable is {d}, not an integer compute type")));
                    }
                    for (v, what) in [(*start, "loop start"), (*end, "loop end"), (*step, "loop step")] {
                        if self.scalar(v, what)? != d {
                            return Err(self.err(format!("{what} is not {d}")));
                        }
                    }
                    self.stmts(body)?;
                }
            }
        }
        Ok(())
    }

    /// `v` fits `n` lanes (see [`Checker::fits`]) and has `dst`'s dtype `d`.
    fn same(&self, v: VarId, n: usize, (dst, d): (VarId, DType), what: &str) -> Result<(), CpuError> {
        let vd = self.fits(v, n, what)?;
        if vd != d {
            return Err(self.err(format!("{what} `{}` is {vd}, `{}` is {d}", self.name(v), self.name(dst))));
        }
        Ok(())
    }

    /// `dst` (of dtype `d`, `n` lanes) = `e`.
    fn expr(&self, dst: VarId, d: DType, n: usize, e: &Expr) -> Result<(), CpuError> {
        let dname = self.name(dst).to_string();
        let same = |v: VarId, what: &str| self.same(v, n, (dst, d), what);
        match e {
            Expr::Copy(v) | Expr::Splat(v) => same(*v, "operand")?,
            Expr::Lit(_) => {}
            Expr::Param(i) => match self.k.params.get(*i as usize).map(|p| p.kind) {
                Some(ParamKind::Scalar(pd)) if pd == d => {}
                _ => {
                    return Err(self.err(format!("`{dname}` = param {i}: not a scalar parameter of type {d}")))
                }
            },
            Expr::ConstGeneric(i) => {
                if *i as usize >= self.k.consts.len() {
                    return Err(self.err(format!("const generic index {i} out of range")));
                }
            }
            Expr::ProgramId(a) | Expr::NumPrograms(a) => {
                if *a > 2 {
                    return Err(self.err(format!("axis {a} out of range")));
                }
            }
            Expr::Arange { .. } => {
                if !d.is_int() {
                    return Err(self.err(format!("arange into {d}")));
                }
            }
            Expr::Unary(op, v) => {
                same(*v, "operand")?;
                let ok = match op {
                    UnaryOp::Neg | UnaryOp::Abs => d.is_compute() && d != DType::Bool,
                    UnaryOp::Not => d == DType::Bool || d.is_int(),
                    _ => d == DType::F32,
                };
                if !ok {
                    return Err(self.err(format!("{} on {d}", op.name())));
                }
            }
            Expr::Binary(op, a, b) => self.binary(*op, *a, *b, d, n)?,
            Expr::Cast(v) => {
                self.fits(*v, n, "cast operand")?;
            }
            Expr::Where(c, a, b) => {
                if self.fits(*c, n, "where condition")? != DType::Bool {
                    return Err(self.err("where condition is not bool".into()));
                }
                same(*a, "where operand")?;
                same(*b, "where operand")?;
            }
            Expr::Load { param, offset, mask, other } => {
                self.load(dst, d, n, (*param, *offset, *mask, *other))?
            }
            Expr::Reduce(op, v) => {
                let (vd, _) = self.var(*v)?;
                let ok = vd == d
                    && n == 1
                    && matches!(d, DType::I32 | DType::U32 | DType::I64 | DType::U64 | DType::F32)
                    && matches!(op, ReduceOp::Sum | ReduceOp::Max | ReduceOp::Min);
                if !ok {
                    return Err(self.err(format!("{op:?} of {vd} into {d} with {n} lanes")));
                }
            }
            Expr::Broadcast(_) | Expr::Reshape(_) | Expr::Trans(_) | Expr::Split { .. } | Expr::Join(..) => {
                self.shape_move(dst, d, n, e)?
            }
            Expr::ReduceAxis { .. } | Expr::ArgReduce { .. } => self.axis_or_arg_reduction(dst, d, n, e)?,
            Expr::Dot { a, b, acc } => self.dot(dst, d, (*a, *b, *acc))?,
            Expr::Rand { seed, offset, .. } => {
                if !is_offset_int(self.scalar(*seed, "rand seed")?) {
                    return Err(self.err("rand seed is not an integer".into()));
                }
                if !is_offset_int(self.fits(*offset, n, "rand offset")?) {
                    return Err(self.err("rand offset is not an integer".into()));
                }
                if d != DType::F32 {
                    return Err(self.err(format!("rand into {d}")));
                }
            }
        }
        Ok(())
    }

    /// `a op b` into `n` lanes of `d`.
    fn binary(&self, op: BinaryOp, a: VarId, b: VarId, d: DType, n: usize) -> Result<(), CpuError> {
        let ad = self.fits(a, n, "operand")?;
        let bd = self.fits(b, n, "operand")?;
        if ad != bd {
            return Err(self.err(format!("binary operands of {ad} and {bd}")));
        }
        let ok = if op.is_comparison() {
            d == DType::Bool && ad.is_compute()
        } else if op.is_bitwise() {
            d == ad && (ad == DType::Bool || ad.is_int())
        } else {
            d == ad && ad.is_compute() && ad != DType::Bool
        };
        if !ok {
            return Err(self.err(format!("{op:?} on {ad} into {d}")));
        }
        Ok(())
    }

    /// A load of `param[offset]` (under `mask`, else `other`) into `dst`.
    fn load(
        &self,
        dst: VarId,
        d: DType,
        n: usize,
        (param, offset, mask, other): (u32, VarId, Option<VarId>, Option<VarId>),
    ) -> Result<(), CpuError> {
        let elem = self.ptr(param, false)?;
        if elem != d {
            return Err(self.err(format!("load of {elem} into {d}")));
        }
        let od = self.fits(offset, n, "load offset")?;
        if !is_offset_int(od) {
            return Err(self.err(format!("load offset `{}` is {od}, not an integer", self.name(offset))));
        }
        if let Some(m) = mask {
            if self.fits(m, n, "load mask")? != DType::Bool {
                return Err(self.err("load mask is not bool".into()));
            }
        }
        if let Some(o) = other {
            self.same(o, n, (dst, d), "load other")?;
        }
        Ok(())
    }

    /// A broadcast, reshape, transpose, split or join into `dst`: the same dtype, and shapes that
    /// fit the move.
    fn shape_move(&self, dst: VarId, d: DType, n: usize, e: &Expr) -> Result<(), CpuError> {
        let dname = self.name(dst);
        let dd = &self.dims[dst.0 as usize];
        match e {
            Expr::Broadcast(v) | Expr::Reshape(v) | Expr::Trans(v) => {
                let (vd, vl) = self.var(*v)?;
                let sd = &self.dims[v.0 as usize];
                let ok = vd == d
                    && !sd.is_empty()
                    && match e {
                        Expr::Broadcast(_) => broadcasts(sd, dd),
                        Expr::Reshape(_) => vl == n && !dd.is_empty(),
                        _ => sd.len() == 2 && dd.len() == 2 && sd[0] == dd[1] && sd[1] == dd[0],
                    };
                if !ok {
                    return Err(
                        self.err(format!("`{dname}`: bad shape operation {e:?} from {sd:?} to {dd:?}"))
                    );
                }
            }
            Expr::Split { src, half } => {
                let (vd, _) = self.var(*src)?;
                let sd = &self.dims[src.0 as usize];
                if vd != d || *half > 1 || !halves(dd, sd) {
                    return Err(self.err(format!("`{dname}`: bad split {e:?} from {sd:?} to {dd:?}")));
                }
            }
            Expr::Join(a, b) => {
                let ((ad, _), (bd, _)) = (self.var(*a)?, self.var(*b)?);
                let (sa, sb) = (&self.dims[a.0 as usize], &self.dims[b.0 as usize]);
                if ad != d || bd != d || sa != sb || !halves(sa, dd) {
                    return Err(self.err(format!("`{dname}`: bad join {e:?} of {sa:?} and {sb:?} to {dd:?}")));
                }
            }
            _ => unreachable!("`expr` passes only shape moves"),
        }
        Ok(())
    }

    /// A reduction along an axis, or an argmax/argmin (along an axis or of the whole tile), into
    /// `dst`.
    fn axis_or_arg_reduction(&self, dst: VarId, d: DType, n: usize, e: &Expr) -> Result<(), CpuError> {
        let dname = self.name(dst);
        match e {
            Expr::ReduceAxis { axis, src, .. } | Expr::ArgReduce { axis: Some(axis), src, .. } => {
                let (vd, _) = self.var(*src)?;
                let (sd, dd) = (&self.dims[src.0 as usize], &self.dims[dst.0 as usize]);
                let kept = match (sd.as_slice(), axis) {
                    ([_, c], 0) => Some(*c),
                    ([r, _], 1) => Some(*r),
                    _ => None,
                };
                let arg = matches!(e, Expr::ArgReduce { .. });
                let dtype_ok = if arg { d == DType::I32 } else { vd == d };
                let ok = dtype_ok
                    && matches!(vd, DType::I32 | DType::U32 | DType::I64 | DType::U64 | DType::F32)
                    && kept.is_some_and(|k| dd.as_slice() == [k]);
                if !ok {
                    return Err(
                        self.err(format!("`{dname}`: bad axis reduction {e:?} from {sd:?} to {dd:?}"))
                    );
                }
            }
            Expr::ArgReduce { axis: None, src, .. } => {
                let (vd, vl) = self.var(*src)?;
                let ok = d == DType::I32
                    && n == 1
                    && vl >= 1
                    && !self.dims[src.0 as usize].is_empty()
                    && matches!(vd, DType::I32 | DType::U32 | DType::I64 | DType::U64 | DType::F32);
                if !ok {
                    return Err(self.err(format!("`{dname}`: bad argmax/argmin {e:?}")));
                }
            }
            _ => unreachable!("`expr` passes only axis and arg reductions"),
        }
        Ok(())
    }

    /// `dst = a @ b (+ acc)`: `[M, K]` by `[K, N]` into `[M, N]` of the operands' accumulator type.
    fn dot(&self, dst: VarId, d: DType, (a, b, acc): (VarId, VarId, Option<VarId>)) -> Result<(), CpuError> {
        let ((ad, _), (bd, _)) = (self.var(a)?, self.var(b)?);
        let dims = |v: VarId| self.dims[v.0 as usize].as_slice();
        let shapes_ok = match (dims(a), dims(b), dims(dst)) {
            (&[m, k], &[k2, n], &[m2, n2]) => {
                k == k2 && m == m2 && n == n2 && [m, n, k].iter().all(|&x| x as u64 >= DOT_MIN_DIM)
            }
            _ => false,
        };
        let acc_ok = match acc {
            None => true,
            Some(c) => self.var(c)?.0 == d && dims(c) == dims(dst),
        };
        if !(ad == bd && dot_accumulator(ad) == Some(d) && shapes_ok && acc_ok) {
            return Err(self.err(format!(
                "`{}`: bad dot of {ad} {:?} and {bd} {:?} into {d} {:?}",
                self.name(dst),
                dims(a),
                dims(b),
                dims(dst)
            )));
        }
        Ok(())
    }
}

/// NumPy's rule: `src` (dims aligned at the right) broadcasts to exactly `dst`.
fn broadcasts(src: &[usize], dst: &[usize]) -> bool {
    src.len() <= dst.len() && src.iter().rev().zip(dst.iter().rev()).all(|(&s, &d)| s == d || s == 1)
}

/// `half` is `whole` with its last dim halved (both tiles of one rank).
fn halves(half: &[usize], whole: &[usize]) -> bool {
    match (half.split_last(), whole.split_last()) {
        (Some((h, hs)), Some((w, ws))) => hs == ws && 2 * h == *w,
        _ => false,
    }
}
