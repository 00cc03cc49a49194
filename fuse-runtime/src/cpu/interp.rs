//! The interpreter proper: one [`Prog`] per worker runs programs one after another, reusing its
//! per-var storage. Every expression is one dtype dispatch and one tight loop over the tile.
//!
//! Imports `cpu/elem.rs`, `cpu/dot.rs` and `cpu/error.rs`.

use super::elem::{dispatch, Atomics, Bits, Bitwise, Elem, Mem, Num, ScalarOrTile, Source, VarValue};
use super::error::CpuError;
use fuse_ir::philox::{half_word, philox4x32_10, uniform, uniform16};
use fuse_ir::RandWidth;
use fuse_ir::{ArgOp, BinaryOp, DType, Expr, Kernel, Literal, ParamKind, ReduceOp, Stmt, UnaryOp, VarId};

type Res = Result<(), CpuError>;

fn bad(msg: impl Into<String>) -> CpuError {
    CpuError::InvalidKernel(msg.into())
}

/// A scalar launch argument.
#[derive(Clone, Copy, Debug)]
pub(crate) enum ScalarArg {
    I32(i32),
    I64(i64),
    U32(u32),
    U64(u64),
    F32(f32),
}

/// What every program of one launch shares (read-only; `Sync`).
pub(crate) struct CpuLaunch<'a> {
    pub kernel: &'a Kernel,
    pub consts: &'a [u64],
    pub grid: [u32; 3],
    pub lens: Vec<usize>,
    /// Per var: its launch-time dims (none for a scalar).
    pub dims: Vec<Vec<usize>>,
    pub dtypes: Vec<DType>,
    /// Per parameter: the buffer view (pointer params) or the value (scalar params).
    pub mems: Vec<Option<Mem<'a>>>,
    pub scalars: Vec<Option<ScalarArg>>,
}

impl<'a> CpuLaunch<'a> {
    /// Pointer parameter `param`: its buffer view, element type and name.
    fn buffer(&self, param: u32) -> Result<(&Mem<'a>, DType, &'a str), CpuError> {
        let p = &self.kernel.params[param as usize];
        match (self.mems.get(param as usize), p.kind) {
            (Some(Some(m)), ParamKind::Ptr { elem, .. }) => Ok((m, elem, &p.name)),
            _ => Err(bad(format!("parameter `{}` is not a buffer", p.name))),
        }
    }
}

/// Load/store failure before the parameter name and program are known.
enum Fail {
    Oob(i64),
    Err(CpuError),
}

impl From<CpuError> for Fail {
    fn from(e: CpuError) -> Fail {
        Fail::Err(e)
    }
}

impl Fail {
    /// The error, an out-of-bounds access named by its parameter, buffer and program.
    fn located(self, param: &str, mem: &Mem<'_>, program: [u32; 3]) -> CpuError {
        match self {
            Fail::Oob(index) => {
                CpuError::OutOfBounds { param: param.to_string(), index, len: mem.len(), program }
            }
            Fail::Err(e) => e,
        }
    }
}

#[inline(always)]
fn as_slice<T: Elem>(d: &VarValue) -> Result<&[T], CpuError> {
    T::slice(d).ok_or_else(|| bad(format!("internal: expected {} data, found {}", T::DT, d.dtype())))
}

#[inline(always)]
fn as_vec_mut<T: Elem>(d: &mut VarValue) -> Result<&mut Vec<T>, CpuError> {
    let found = d.dtype();
    T::vec_mut(d).ok_or_else(|| bad(format!("internal: expected {} destination, found {found}", T::DT)))
}

fn shape_err(len: usize, n: usize) -> CpuError {
    bad(format!("internal: operand of {len} lanes where {n} are expected"))
}

fn fill<T: Elem>(out: &mut VarValue, n: usize, x: T) -> Res {
    let o = as_vec_mut::<T>(out)?;
    o.clear();
    o.resize(n, x);
    Ok(())
}

/// `out = f(a)` over `n` lanes; a one-lane `a` broadcasts.
#[inline(always)]
fn map1<A: Copy, R: Copy>(a: &[A], n: usize, out: &mut Vec<R>, f: impl Fn(A) -> R) -> Res {
    out.clear();
    if a.len() == n {
        out.extend(a.iter().map(|&x| f(x)));
    } else if a.len() == 1 {
        out.resize(n, f(a[0]));
    } else {
        return Err(shape_err(a.len(), n));
    }
    Ok(())
}

/// `out = f(a, b)` over `n` lanes; one-lane operands broadcast.
#[inline(always)]
fn map2<A: Copy, B: Copy, R: Copy>(
    a: &[A],
    b: &[B],
    n: usize,
    out: &mut Vec<R>,
    f: impl Fn(A, B) -> R,
) -> Res {
    out.clear();
    match (a.len() == n, b.len() == n) {
        (true, true) => out.extend(a.iter().zip(b).map(|(&x, &y)| f(x, y))),
        (false, true) if a.len() == 1 => {
            let x = a[0];
            out.extend(b.iter().map(|&y| f(x, y)))
        }
        (true, false) if b.len() == 1 => {
            let y = b[0];
            out.extend(a.iter().map(|&x| f(x, y)))
        }
        (false, false) if a.len() == 1 && b.len() == 1 => out.resize(n, f(a[0], b[0])),
        _ => return Err(shape_err(a.len().max(b.len()), n)),
    }
    Ok(())
}

/// `where_(c, a, b)`.
#[inline(always)]
fn select<T: Copy>(c: &[bool], a: &[T], b: &[T], n: usize, out: &mut Vec<T>) -> Res {
    out.clear();
    for l in [c.len(), a.len(), b.len()] {
        if l != n && l != 1 {
            return Err(shape_err(l, n));
        }
    }
    if c.len() == n {
        match (a.len() == n, b.len() == n) {
            (true, true) => out.extend(c.iter().zip(a).zip(b).map(|((&c, &x), &y)| if c { x } else { y })),
            (true, false) => {
                let y = b[0];
                out.extend(c.iter().zip(a).map(|(&c, &x)| if c { x } else { y }))
            }
            (false, true) => {
                let x = a[0];
                out.extend(c.iter().zip(b).map(|(&c, &y)| if c { x } else { y }))
            }
            (false, false) => {
                let (x, y) = (a[0], b[0]);
                out.extend(c.iter().map(|&c| if c { x } else { y }))
            }
        }
    } else {
        let src = if c[0] { a } else { b };
        if src.len() == n {
            out.extend_from_slice(src);
        } else {
            out.resize(n, src[0]);
        }
    }
    Ok(())
}

/// A fold with 8 independent accumulators (vectorises; the order of a float sum is unspecified
/// by the IR).
#[inline(always)]
fn fold8<T: Copy>(a: &[T], id: T, f: impl Fn(T, T) -> T) -> T {
    let mut acc = [id; 8];
    let mut chunks = a.chunks_exact(8);
    for c in &mut chunks {
        for j in 0..8 {
            acc[j] = f(acc[j], c[j]);
        }
    }
    for (j, &x) in chunks.remainder().iter().enumerate() {
        acc[j] = f(acc[j], x);
    }
    let a4 = [f(acc[0], acc[4]), f(acc[1], acc[5]), f(acc[2], acc[6]), f(acc[3], acc[7])];
    f(f(a4[0], a4[2]), f(a4[1], a4[3]))
}

fn lit<T: Elem>(l: Literal) -> T {
    match l {
        Literal::Bool(b) => T::from_bool(b),
        Literal::Int(i) => T::from_i64(i),
        Literal::UInt(u) => T::from_u64(u),
        Literal::Float(f) => T::from_f64(f),
    }
}

fn unary(op: UnaryOp, a: &VarValue, out: &mut VarValue, n: usize) -> Res {
    let dt = a.dtype();
    let no = || bad(format!("{} on {dt}", op.name()));
    match op {
        UnaryOp::Neg => {
            dispatch!(num dt, T => map1(as_slice::<T>(a)?, n, as_vec_mut::<T>(out)?, T::vneg), else Err(no()))
        }
        UnaryOp::Abs => {
            dispatch!(num dt, T => map1(as_slice::<T>(a)?, n, as_vec_mut::<T>(out)?, T::vabs), else Err(no()))
        }
        UnaryOp::Not => {
            dispatch!(bits dt, T => map1(as_slice::<T>(a)?, n, as_vec_mut::<T>(out)?, T::vnot), else Err(no()))
        }
        _ => {
            if dt != DType::F32 {
                return Err(no());
            }
            let a = as_slice::<f32>(a)?;
            let o = as_vec_mut::<f32>(out)?;
            match op {
                UnaryOp::Exp => map1(a, n, o, libm::expf),
                UnaryOp::Exp2 => map1(a, n, o, exp2_ftz),
                UnaryOp::Log => map1(a, n, o, libm::logf),
                UnaryOp::Log2 => map1(a, n, o, libm::log2f),
                UnaryOp::Sqrt => map1(a, n, o, f32::sqrt),
                UnaryOp::Rsqrt => map1(a, n, o, |x| 1.0 / x.sqrt()),
                UnaryOp::Erf => map1(a, n, o, libm::erff),
                UnaryOp::Tanh => map1(a, n, o, libm::tanhf),
                UnaryOp::Sigmoid => map1(a, n, o, sigmoid),
                UnaryOp::Floor => map1(a, n, o, libm::floorf),
                UnaryOp::Ceil => map1(a, n, o, libm::ceilf),
                UnaryOp::Sin => map1(a, n, o, libm::sinf),
                UnaryOp::Cos => map1(a, n, o, libm::cosf),
                UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Not => Err(no()),
            }
        }
    }
}

fn compare<T: Elem>(op: BinaryOp, a: &[T], b: &[T], n: usize, out: &mut Vec<bool>) -> Res {
    match op {
        BinaryOp::Lt => map2(a, b, n, out, |x, y| x < y),
        BinaryOp::Le => map2(a, b, n, out, |x, y| x <= y),
        BinaryOp::Gt => map2(a, b, n, out, |x, y| x > y),
        BinaryOp::Ge => map2(a, b, n, out, |x, y| x >= y),
        BinaryOp::Eq => map2(a, b, n, out, |x, y| x == y),
        BinaryOp::Ne => map2(a, b, n, out, |x, y| x != y),
        _ => Err(bad(format!("{op:?} is not a comparison"))),
    }
}

fn bitop<T: Bitwise>(op: BinaryOp, a: &[T], b: &[T], n: usize, out: &mut Vec<T>) -> Res {
    match op {
        BinaryOp::And => map2(a, b, n, out, T::vand),
        BinaryOp::Or => map2(a, b, n, out, T::vor),
        BinaryOp::Xor => map2(a, b, n, out, T::vxor),
        _ => Err(bad(format!("{op:?} is not bitwise"))),
    }
}

fn arith<T: Num>(op: BinaryOp, a: &[T], b: &[T], n: usize, out: &mut Vec<T>) -> Res {
    match op {
        BinaryOp::Add => map2(a, b, n, out, T::vadd),
        BinaryOp::Sub => map2(a, b, n, out, T::vsub),
        BinaryOp::Mul => map2(a, b, n, out, T::vmul),
        BinaryOp::Div => map2(a, b, n, out, T::vdiv),
        BinaryOp::Rem => map2(a, b, n, out, T::vrem),
        BinaryOp::Max => map2(a, b, n, out, T::vmax),
        BinaryOp::Min => map2(a, b, n, out, T::vmin),
        _ => Err(bad(format!("{op:?} is not arithmetic"))),
    }
}

fn binary(op: BinaryOp, a: &VarValue, b: &VarValue, out: &mut VarValue, n: usize) -> Res {
    let dt = a.dtype();
    let no = || bad(format!("{op:?} on {dt} and {}", b.dtype()));
    if b.dtype() != dt {
        return Err(no());
    }
    if op.is_comparison() {
        dispatch!(cmp dt, T => compare::<T>(op, as_slice::<T>(a)?, as_slice::<T>(b)?, n, as_vec_mut::<bool>(out)?), else Err(no()))
    } else if op.is_bitwise() {
        dispatch!(bits dt, T => bitop::<T>(op, as_slice::<T>(a)?, as_slice::<T>(b)?, n, as_vec_mut::<T>(out)?), else Err(no()))
    } else {
        dispatch!(num dt, T => arith::<T>(op, as_slice::<T>(a)?, as_slice::<T>(b)?, n, as_vec_mut::<T>(out)?), else Err(no()))
    }
}

fn reduce_t<T: Num>(op: ReduceOp, a: &[T]) -> T {
    match op {
        ReduceOp::Sum => fold8(a, T::default(), T::vadd),
        ReduceOp::Max => fold8(a, T::MAX_ID, T::vmax),
        ReduceOp::Min => fold8(a, T::MIN_ID, T::vmin),
    }
}

fn reduce(op: ReduceOp, a: &VarValue, out: &mut VarValue) -> Res {
    let dt = a.dtype();
    dispatch!(num dt, T => fill(out, 1, reduce_t::<T>(op, as_slice::<T>(a)?)), else Err(bad(format!("{op:?} of {dt}"))))
}

/// Which source lane each destination lane reads: a reshape (the same lane), a transpose
/// (`[R, C]` -> `[C, R]`), every other lane (`split`), or a NumPy broadcast.
enum SourceLane {
    Same,
    /// Destination `[C, R]`.
    Trans {
        c: usize,
        r: usize,
    },
    /// Lane `2 f + half`: the last dim's even (0) or odd (1) columns.
    Split {
        half: usize,
    },
    Broadcast {
        src: Vec<u64>,
        dst: Vec<u64>,
    },
}

impl SourceLane {
    fn new(e: &Expr, src: &[usize], dst: &[usize]) -> SourceLane {
        match (e, dst) {
            (Expr::Reshape(_), _) => SourceLane::Same,
            (Expr::Trans(_), [c, r]) => SourceLane::Trans { c: *c, r: *r },
            (Expr::Split { half, .. }, _) => SourceLane::Split { half: usize::from(*half) },
            _ => SourceLane::Broadcast {
                src: src.iter().map(|&x| x as u64).collect(),
                dst: dst.iter().map(|&x| x as u64).collect(),
            },
        }
    }

    fn of(&self, f: usize) -> usize {
        match self {
            SourceLane::Same => f,
            // Lane f = c * R + r of the destination reads lane r * C + c.
            SourceLane::Trans { c, r } => (f % r) * c + f / r,
            SourceLane::Split { half } => 2 * f + half,
            SourceLane::Broadcast { src, dst } => fuse_ir::broadcast_source_lane(src, dst, f as u64) as usize,
        }
    }
}

/// `join(even, odd)`: lane `2 f` from `even`, `2 f + 1` from `odd`.
fn interleave<T: Copy>(even: &[T], odd: &[T], n: usize, out: &mut Vec<T>) -> Res {
    out.clear();
    for f in 0..n {
        let from = if f % 2 == 0 { even } else { odd };
        out.push(*from.get(f / 2).ok_or_else(|| shape_err(from.len(), f / 2 + 1))?);
    }
    Ok(())
}

fn gather<T: Copy>(a: &[T], n: usize, lane: &SourceLane, out: &mut Vec<T>) -> Res {
    out.clear();
    for f in 0..n {
        let l = lane.of(f);
        out.push(*a.get(l).ok_or_else(|| shape_err(a.len(), l + 1))?);
    }
    Ok(())
}

/// How an axis reduction walks a row-major 2-D tile: output `o` folds `count` lanes
/// `o * out_stride + e * step`.
struct AxisWalk {
    outputs: usize,
    count: usize,
    out_stride: usize,
    step: usize,
}

impl AxisWalk {
    fn new(dims: &[usize], axis: u8) -> Result<AxisWalk, CpuError> {
        match (dims, axis) {
            ([r, c], 0) => Ok(AxisWalk { outputs: *c, count: *r, out_stride: 1, step: *c }),
            ([r, c], 1) => Ok(AxisWalk { outputs: *r, count: *c, out_stride: *c, step: 1 }),
            _ => Err(bad(format!("axis {axis} reduction of a tile of dims {dims:?}"))),
        }
    }

    fn lanes(&self, o: usize) -> impl Iterator<Item = usize> + '_ {
        (0..self.count).map(move |e| o * self.out_stride + e * self.step)
    }
}

/// Each output lane folds its row or column in lane order (the GPU folds in the same order, so
/// float sums agree bit for bit).
fn reduce_axis<T: Num>(op: ReduceOp, a: &[T], walk: &AxisWalk, out: &mut Vec<T>) -> Res {
    out.clear();
    for o in 0..walk.outputs {
        let mut lanes = walk.lanes(o).map(|l| a[l]);
        let first = lanes.next().ok_or_else(|| bad("axis reduction over no lanes"))?;
        out.push(lanes.fold(first, |acc, x| match op {
            ReduceOp::Sum => acc.vadd(x),
            ReduceOp::Max => acc.vmax(x),
            ReduceOp::Min => acc.vmin(x),
        }));
    }
    Ok(())
}

/// The first index of the largest (smallest) lane of each output's row or column; a NaN beats
/// every number and the first NaN wins.
fn arg_reduce<T: Num>(op: ArgOp, a: &[T], walk: &AxisWalk, out: &mut Vec<i32>) -> Res {
    out.clear();
    #[allow(clippy::eq_op)]
    let is_nan = |x: T| x != x;
    for o in 0..walk.outputs {
        let (mut best, mut best_i) = (None::<T>, 0usize);
        for (e, l) in walk.lanes(o).enumerate() {
            let x = a[l];
            let wins = match best {
                None => true,
                Some(b) => {
                    let strictly = if op == ArgOp::Max { x > b } else { x < b };
                    strictly || (is_nan(x) && !is_nan(b))
                }
            };
            if wins {
                best = Some(x);
                best_i = e;
            }
        }
        out.push(i32::try_from(best_i).map_err(|_| bad("argmax index past i32"))?);
    }
    Ok(())
}

/// Offsets of a load/store/rand: a tile of an integer compute type.
#[derive(Clone, Copy)]
enum Offsets<'a> {
    I32(&'a [i32]),
    U32(&'a [u32]),
    I64(&'a [i64]),
    U64(&'a [u64]),
}

/// The offsets as `n` lanes; a scalar offset under a tile mask/value is spread into `scratch`.
fn offsets<'s>(d: &'s VarValue, n: usize, scratch: &'s mut Vec<i64>) -> Result<Offsets<'s>, CpuError> {
    if d.len() == n {
        return Ok(match d {
            VarValue::I32(v) => Offsets::I32(v),
            VarValue::U32(v) => Offsets::U32(v),
            VarValue::I64(v) => Offsets::I64(v),
            VarValue::U64(v) => Offsets::U64(v),
            _ => return Err(bad(format!("offsets of {}", d.dtype()))),
        });
    }
    if d.len() != 1 {
        return Err(shape_err(d.len(), n));
    }
    let x = match d {
        VarValue::I32(v) => v[0].as_i64(),
        VarValue::U32(v) => v[0].as_i64(),
        VarValue::I64(v) => v[0],
        VarValue::U64(v) => v[0].as_i64(),
        _ => return Err(bad(format!("offsets of {}", d.dtype()))),
    };
    scratch.clear();
    scratch.resize(n, x);
    Ok(Offsets::I64(scratch))
}

/// Which lanes of a load or store a mask lets through.
enum MaskLanes<'a> {
    /// Every lane (no mask, or a scalar `true`).
    All,
    /// None (a scalar `false`).
    None,
    /// Those whose lane of the tile is true.
    Tile(&'a [bool]),
}

fn mask_of(m: Option<&VarValue>, n: usize) -> Result<MaskLanes<'_>, CpuError> {
    let Some(d) = m else { return Ok(MaskLanes::All) };
    let s = as_slice::<bool>(d)?;
    if s.len() == n {
        Ok(MaskLanes::Tile(s))
    } else if s.len() == 1 {
        Ok(if s[0] { MaskLanes::All } else { MaskLanes::None })
    } else {
        Err(shape_err(s.len(), n))
    }
}

/// `Some(o0)` if `offs[i] == o0 + i` for every lane (the common full-tile case).
#[inline(always)]
fn contiguous<O: Elem>(offs: &[O]) -> Option<i64> {
    let o0 = offs.first()?.as_i64();
    let ok = offs.iter().zip(0i64..).fold(true, |acc, (&x, i)| acc & (x.as_i64() == o0 + i));
    ok.then_some(o0)
}

fn scalar_or_tile<T: Elem>(d: &VarValue, n: usize) -> Result<ScalarOrTile<'_, T>, CpuError> {
    let s = as_slice::<T>(d)?;
    if s.len() == n {
        Ok(ScalarOrTile::Tile(s))
    } else if s.len() == 1 {
        Ok(ScalarOrTile::Scalar(s[0]))
    } else {
        Err(shape_err(s.len(), n))
    }
}

#[inline(always)]
fn load_loop<T: Elem, O: Elem, S: Source<T::Bits> + ?Sized>(
    src: &S,
    offs: &[O],
    mask: Option<&[bool]>,
    other: ScalarOrTile<'_, T>,
    out: &mut Vec<T>,
) -> Result<(), Fail> {
    let len = src.slen() as u64;
    out.clear();
    out.resize(offs.len(), T::default());
    if let Some(o0) = contiguous(offs) {
        if o0 >= 0 && o0 as u64 + offs.len() as u64 <= len {
            src.window(o0 as usize, mask, other, out);
            return Ok(());
        }
    }
    // A lane whose mask is false is never read, so it needs no bounds check.
    macro_rules! read {
        ($x:expr) => {{
            let i = $x.as_i64();
            if i as u64 >= len {
                return Err(Fail::Oob(i));
            }
            T::from_bits(src.get(i as usize))
        }};
    }
    match (mask, other) {
        (None, _) => {
            for (o, &x) in out.iter_mut().zip(offs) {
                *o = read!(x);
            }
        }
        (Some(m), ScalarOrTile::Scalar(v)) => {
            for ((o, &x), &k) in out.iter_mut().zip(offs).zip(m) {
                *o = if k { read!(x) } else { v };
            }
        }
        (Some(m), ScalarOrTile::Tile(t)) => {
            for (((o, &x), &k), &v) in out.iter_mut().zip(offs).zip(m).zip(t) {
                *o = if k { read!(x) } else { v };
            }
        }
    }
    Ok(())
}

fn load_src<T: Elem, S: Source<T::Bits> + ?Sized>(
    src: &S,
    off: Offsets<'_>,
    mask: Option<&[bool]>,
    other: ScalarOrTile<'_, T>,
    out: &mut Vec<T>,
) -> Result<(), Fail> {
    match off {
        Offsets::I32(o) => load_loop(src, o, mask, other, out),
        Offsets::U32(o) => load_loop(src, o, mask, other, out),
        Offsets::I64(o) => load_loop(src, o, mask, other, out),
        Offsets::U64(o) => load_loop(src, o, mask, other, out),
    }
}

fn load_t<T: Elem>(
    mem: &Mem<'_>,
    off: Offsets<'_>,
    mask: MaskLanes<'_>,
    other: Option<&VarValue>,
    out: &mut VarValue,
    n: usize,
) -> Result<(), Fail> {
    let other = match other {
        None => ScalarOrTile::Scalar(T::default()),
        Some(d) => scalar_or_tile::<T>(d, n)?,
    };
    let out = as_vec_mut::<T>(out)?;
    let mask = match mask {
        MaskLanes::All => None,
        MaskLanes::Tile(m) => Some(m),
        MaskLanes::None => {
            out.clear();
            match other {
                ScalarOrTile::Scalar(v) => out.resize(n, v),
                ScalarOrTile::Tile(s) => out.extend_from_slice(s),
            }
            return Ok(());
        }
    };
    if let Some(s) = <T::Bits as Bits>::ro(mem) {
        load_src::<T, _>(s, off, mask, other, out)
    } else if let Some(s) = <T::Bits as Bits>::rw(mem) {
        load_src::<T, _>(&Atomics::<T::Bits>(s), off, mask, other, out)
    } else {
        Err(Fail::Err(bad(format!("buffer width does not match {}", T::DT))))
    }
}

#[inline(always)]
fn store_loop<T: Elem, O: Elem>(
    dst: &[<T::Bits as Bits>::Atomic],
    offs: &[O],
    mask: Option<&[bool]>,
    val: ScalarOrTile<'_, T>,
) -> Result<(), Fail> {
    let len = dst.len() as u64;
    macro_rules! write {
        ($x:expr, $v:expr) => {{
            let i = $x.as_i64();
            if i as u64 >= len {
                return Err(Fail::Oob(i));
            }
            <T::Bits as Bits>::store(&dst[i as usize], $v.to_bits());
        }};
    }
    if let Some(o0) = contiguous(offs) {
        if o0 >= 0 && o0 as u64 + offs.len() as u64 <= len {
            let win = &dst[o0 as usize..o0 as usize + offs.len()];
            let put = |a: &<T::Bits as Bits>::Atomic, v: T| <T::Bits as Bits>::store(a, v.to_bits());
            match (mask, val) {
                (None, ScalarOrTile::Scalar(v)) => win.iter().for_each(|a| put(a, v)),
                (None, ScalarOrTile::Tile(vs)) => win.iter().zip(vs).for_each(|(a, &v)| put(a, v)),
                (Some(m), ScalarOrTile::Scalar(v)) => {
                    win.iter().zip(m).filter(|(_, &k)| k).for_each(|(a, _)| put(a, v))
                }
                (Some(m), ScalarOrTile::Tile(vs)) => {
                    win.iter().zip(m).zip(vs).filter(|((_, &k), _)| k).for_each(|((a, _), &v)| put(a, v))
                }
            }
            return Ok(());
        }
    }
    match (mask, val) {
        (None, ScalarOrTile::Scalar(v)) => {
            for &x in offs {
                write!(x, v);
            }
        }
        (None, ScalarOrTile::Tile(vs)) => {
            for (&x, &v) in offs.iter().zip(vs) {
                write!(x, v);
            }
        }
        (Some(m), ScalarOrTile::Scalar(v)) => {
            for (&x, &k) in offs.iter().zip(m) {
                if k {
                    write!(x, v);
                }
            }
        }
        (Some(m), ScalarOrTile::Tile(vs)) => {
            for ((&x, &k), &v) in offs.iter().zip(m).zip(vs) {
                if k {
                    write!(x, v);
                }
            }
        }
    }
    Ok(())
}

fn store_t<T: Elem>(
    mem: &Mem<'_>,
    off: Offsets<'_>,
    mask: Option<&[bool]>,
    val: &VarValue,
    n: usize,
) -> Result<(), Fail> {
    let dst = <T::Bits as Bits>::rw(mem).ok_or_else(|| bad("store to a read-only buffer"))?;
    let v = scalar_or_tile::<T>(val, n)?;
    match off {
        Offsets::I32(o) => store_loop::<T, _>(dst, o, mask, v),
        Offsets::U32(o) => store_loop::<T, _>(dst, o, mask, v),
        Offsets::I64(o) => store_loop::<T, _>(dst, o, mask, v),
        Offsets::U64(o) => store_loop::<T, _>(dst, o, mask, v),
    }
}

/// `rand(seed, offs)` / `rand16(seed, offs)`, one Philox call per run of lanes sharing
/// `offset >> 2` (`offset >> 3`).
fn rand_loop<O: Elem>(width: RandWidth, seed: u64, offs: &[O], out: &mut Vec<f32>) {
    let key = [seed as u32, (seed >> 32) as u32];
    let shift = width.lanes_per_call().trailing_zeros();
    let mut block = u64::MAX; // never a real block: offsets >> 2 < 2^62
    let mut r = [0u32; 4];
    out.clear();
    out.extend(offs.iter().map(|&x| {
        let o = x.as_i64() as u64;
        let b = o >> shift;
        if b != block {
            r = philox4x32_10([b as u32, (b >> 32) as u32, 0, 0], key);
            block = b;
        }
        match width {
            RandWidth::W32 => uniform(r[(o & 3) as usize]),
            RandWidth::W16 => uniform16(half_word(r, o)),
        }
    }));
}

/// `out = rand(seed, offset)` over `n` lanes (a scalar offset's one value spread over them).
fn rand(width: RandWidth, seed: &VarValue, offset: &VarValue, out: &mut VarValue, n: usize) -> Res {
    let seed = match seed {
        VarValue::I32(s) => s[0] as i64 as u64,
        VarValue::U32(s) => u64::from(s[0]),
        VarValue::I64(s) => s[0] as u64,
        VarValue::U64(s) => s[0],
        _ => return Err(bad("rand seed is not an integer")),
    };
    let o = as_vec_mut::<f32>(out)?;
    match offset {
        VarValue::I32(x) => rand_loop(width, seed, x, o),
        VarValue::U32(x) => rand_loop(width, seed, x, o),
        VarValue::I64(x) => rand_loop(width, seed, x, o),
        VarValue::U64(x) => rand_loop(width, seed, x, o),
        _ => return Err(bad("rand offset is not an integer")),
    }
    if o.len() != n {
        if o.len() != 1 {
            return Err(shape_err(o.len(), n));
        }
        let x = o[0];
        o.resize(n, x);
    }
    Ok(())
}

/// One worker's state: the current value of every var (`front`) and a spare buffer per var
/// (`back`) that an assignment writes before the two are swapped, so `acc = acc + x` reads the
/// old value while writing the new one without allocating.
pub(crate) struct Prog<'c, 'a> {
    launch: &'c CpuLaunch<'a>,
    front: Vec<VarValue>,
    back: Vec<VarValue>,
    scratch: Vec<i64>,
    pid: [u32; 3],
}

impl<'c, 'a> Prog<'c, 'a> {
    pub(crate) fn new(launch: &'c CpuLaunch<'a>) -> Self {
        let mk =
            || launch.dtypes.iter().zip(&launch.lens).map(|(&d, &n)| VarValue::new(d, n)).collect::<Vec<_>>();
        Prog { launch, front: mk(), back: mk(), scratch: Vec::new(), pid: [0; 3] }
    }

    /// Runs program `pid`.
    pub(crate) fn run(&mut self, pid: [u32; 3]) -> Res {
        self.pid = pid;
        let launch = self.launch;
        self.exec(&launch.kernel.body)
    }

    fn exec(&mut self, stmts: &[Stmt]) -> Res {
        for s in stmts {
            match s {
                Stmt::Assign { dst, expr } => self.assign(*dst, expr)?,
                Stmt::Store { param, offset, value, mask } => self.store(*param, *offset, *value, *mask)?,
                Stmt::If { cond, then_body, else_body } => {
                    let c = match &self.front[cond.0 as usize] {
                        VarValue::Bool(v) if !v.is_empty() => v[0],
                        _ => return Err(bad("if condition is not a bool scalar")),
                    };
                    if c {
                        self.exec(then_body)?
                    } else {
                        self.exec(else_body)?
                    }
                }
                Stmt::For { var, start, end, step, body } => {
                    let get = |v: &VarId| {
                        self.front[v.0 as usize]
                            .first_int()
                            .ok_or_else(|| bad("loop bound is not an integer"))
                    };
                    let (mut i, end, step) = (get(start)?, get(end)?, get(step)?);
                    if step <= 0 {
                        continue;
                    }
                    // i128: `i + step` cannot overflow, and the loop stops at the first value
                    // not below `end` (which is in the var's range), so it never wraps.
                    while i < end {
                        self.front[var.0 as usize]
                            .set_first_int(i)
                            .ok_or_else(|| bad("loop variable is not an integer"))?;
                        self.exec(body)?;
                        i += step;
                    }
                }
            }
        }
        Ok(())
    }

    fn store(&mut self, param: u32, offset: VarId, value: VarId, mask: Option<VarId>) -> Res {
        let (mem, elem, name) = self.launch.buffer(param)?;
        let mem = *mem;
        let front = &self.front;
        let od = &front[offset.0 as usize];
        let vd = &front[value.0 as usize];
        let md = mask.map(|m| &front[m.0 as usize]);
        let n = od.len().max(vd.len()).max(md.map_or(1, VarValue::len));
        let mask = match mask_of(md, n)? {
            MaskLanes::None => return Ok(()),
            MaskLanes::All => None,
            MaskLanes::Tile(m) => Some(m),
        };
        let off = offsets(od, n, &mut self.scratch)?;
        let r = dispatch!(all elem, T => store_t::<T>(&mem, off, mask, vd, n), else Err(Fail::Err(bad("bad element type"))));
        r.map_err(|f| f.located(name, &mem, self.pid))
    }

    fn assign(&mut self, dst: VarId, expr: &Expr) -> Res {
        let launch = self.launch;
        let di = dst.0 as usize;
        let n = launch.lens[di];
        let dt = launch.dtypes[di];
        let no = || bad(format!("cannot assign to {dt} var `{}`", launch.kernel.vars[di].name));
        {
            let front = &self.front;
            let out = &mut self.back[di];
            let v = |id: &VarId| &front[id.0 as usize];
            match expr {
                Expr::Copy(a) | Expr::Splat(a) => {
                    let a = v(a);
                    dispatch!(all dt, T => map1(as_slice::<T>(a)?, n, as_vec_mut::<T>(out)?, |x| x), else Err(no()))?
                }
                Expr::Lit(l) => dispatch!(all dt, T => fill(out, n, lit::<T>(*l)), else Err(no()))?,
                Expr::Param(i) => match launch.scalars.get(*i as usize).copied().flatten() {
                    Some(ScalarArg::I32(x)) => fill(out, n, x)?,
                    Some(ScalarArg::I64(x)) => fill(out, n, x)?,
                    Some(ScalarArg::U32(x)) => fill(out, n, x)?,
                    Some(ScalarArg::U64(x)) => fill(out, n, x)?,
                    Some(ScalarArg::F32(x)) => fill(out, n, x)?,
                    None => return Err(bad(format!("parameter {i} is not a scalar"))),
                },
                Expr::ConstGeneric(i) => {
                    let c = *launch
                        .consts
                        .get(*i as usize)
                        .ok_or_else(|| bad("const generic index out of range"))?;
                    dispatch!(all dt, T => fill(out, n, T::from_u64(c)), else Err(no()))?
                }
                Expr::ProgramId(a) | Expr::NumPrograms(a) => {
                    let src = if matches!(expr, Expr::ProgramId(_)) { self.pid } else { launch.grid };
                    let x = *src.get(*a as usize).ok_or_else(|| bad("axis out of range"))? as i32;
                    dispatch!(all dt, T => fill(out, n, T::from_i64(i64::from(x))), else Err(no()))?
                }
                Expr::Arange { start } => {
                    let start = *start;
                    dispatch!(int dt, T => {
                        let o = as_vec_mut::<T>(out)?;
                        o.clear();
                        o.extend((0..n as i64).map(|k| T::from_i64(start.wrapping_add(k))));
                    }, else return Err(no()))
                }
                Expr::Unary(op, a) => unary(*op, v(a), out, n)?,
                Expr::Binary(op, a, b) => binary(*op, v(a), v(b), out, n)?,
                Expr::Cast(a) => {
                    let a = v(a);
                    let sd = a.dtype();
                    if sd == dt {
                        // No conversion at all (keeps NaN payloads, as the GPU does).
                        dispatch!(all dt, T => map1(as_slice::<T>(a)?, n, as_vec_mut::<T>(out)?, |x| x), else Err(no()))?
                    } else {
                        dispatch!(all sd, S => dispatch!(all dt, D => {
                            map1(as_slice::<S>(a)?, n, as_vec_mut::<D>(out)?, |x| x.cast::<D>())
                        }, else Err(no())), else Err(no()))?
                    }
                }
                Expr::Where(c, a, b) => {
                    dispatch!(all dt, T => select(as_slice::<bool>(v(c))?, as_slice::<T>(v(a))?, as_slice::<T>(v(b))?, n, as_vec_mut::<T>(out)?), else Err(no()))?
                }
                Expr::Load { param, offset, mask, other } => {
                    let (mem, elem, name) = launch.buffer(*param)?;
                    let mask = mask_of(mask.map(|m| v(&m)), n)?;
                    let off = offsets(v(offset), n, &mut self.scratch)?;
                    let other = other.map(|o| v(&o));
                    let r = dispatch!(all elem, T => load_t::<T>(mem, off, mask, other, out, n), else Err(Fail::Err(no())));
                    r.map_err(|f| f.located(name, mem, self.pid))?
                }
                Expr::Reduce(op, a) => reduce(*op, v(a), out)?,
                Expr::Join(a, b) => {
                    let (a, b) = (v(a), v(b));
                    dispatch!(all dt, T => interleave(as_slice::<T>(a)?, as_slice::<T>(b)?, n, as_vec_mut::<T>(out)?), else Err(no()))?
                }
                Expr::Broadcast(a) | Expr::Reshape(a) | Expr::Trans(a) | Expr::Split { src: a, .. } => {
                    let lane = SourceLane::new(expr, &launch.dims[a.0 as usize], &launch.dims[di]);
                    dispatch!(all dt, T => gather(as_slice::<T>(v(a))?, n, &lane, as_vec_mut::<T>(out)?), else Err(no()))?
                }
                Expr::ReduceAxis { op, axis, src } => {
                    let walk = AxisWalk::new(&launch.dims[src.0 as usize], *axis)?;
                    let a = v(src);
                    dispatch!(num dt, T => reduce_axis::<T>(*op, as_slice::<T>(a)?, &walk, as_vec_mut::<T>(out)?), else Err(no()))?
                }
                Expr::ArgReduce { op, axis, src } => {
                    let a = v(src);
                    let sd = a.dtype();
                    let walk = match axis {
                        Some(axis) => AxisWalk::new(&launch.dims[src.0 as usize], *axis)?,
                        None => AxisWalk { outputs: 1, count: a.len(), out_stride: 0, step: 1 },
                    };
                    dispatch!(num sd, T => arg_reduce::<T>(*op, as_slice::<T>(a)?, &walk, as_vec_mut::<i32>(out)?), else Err(no()))?
                }
                Expr::Dot { a, b, acc } => {
                    let (ad, bd) = (&launch.dims[a.0 as usize], &launch.dims[b.0 as usize]);
                    super::dot::dot(v(a), v(b), acc.map(|c| v(&c)), ad, bd, out)?
                }
                Expr::Rand { seed, offset, width } => rand(*width, v(seed), v(offset), out, n)?,
            }
        }
        std::mem::swap(&mut self.front[di], &mut self.back[di]);
        Ok(())
    }
}

/// `1 / (1 + e^-x)` as the GPU's `fuse_sigmoid` takes it: `e^x` where `1 + e^-x` reaches 2^126 (x
/// below -87.3), where the two agree to far below an ulp. The GPU switches there to keep its fast
/// reciprocal in range; a plain quotient would lose the tiny result to 0 once `e^-x` overflows (x
/// below -88.7).
fn sigmoid(x: f32) -> f32 {
    const SWITCH: f32 = f32::from_bits((127 + 126) << 23); // 2^126, as in the prelude's fuse_sigmoid
    let y = 1.0 + libm::expf(-x);
    if y < SWITCH {
        1.0 / y
    } else {
        libm::expf(x)
    }
}

/// `exp2` as the GPU computes it (`ex2.approx.ftz`): subnormal results flush to +0.
fn exp2_ftz(x: f32) -> f32 {
    let y = libm::exp2f(x);
    if y < f32::MIN_POSITIVE {
        0.0
    } else {
        y
    }
}
