//! Branches the host can decide before a launch: an `if` whose condition is computed from scalar
//! parameters, literals and const generics only (attention's `if p_drop > 0.0`). The runtime
//! evaluates such a condition with the launch's arguments and compiles the variant in which the
//! branch is known taken or known skipped ([`crate::Specialization::BranchTaken`] /
//! [`crate::Specialization::BranchSkipped`]), so the C compiler drops the dead side: a branch
//! that is not run costs no registers (a rarely used dropout path can double a kernel's
//! register count and make it spill).
//!
//! The evaluator ([`HostProgram`], over the definitions in [`HostDefs`], giving [`HostScalar`]s)
//! follows the IR's semantics exactly for what it accepts (integer wrap-around, f32 rounding, IEEE
//! comparisons, correctly rounded f32 division and square root) and refuses the rest (integer
//! division, transcendental functions, 16-bit floats, anything assigned more than once or read from
//! memory), so a refused condition is simply not specialised. The same programs compute
//! [`Kernel::host_scalars`] (host_scalars.rs).
use crate::kernel::{Expr, Kernel, Literal, ParamKind, Stmt, VarId};
use crate::ops::{BinaryOp, UnaryOp};
use crate::types::DType;

/// A scalar value computed on the host, in its IR dtype (ints held wrapped to their width).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum HostScalar {
    /// A `bool`.
    Bool(bool),
    /// An integer of any compute width.
    Int(i128),
    /// An `f32`, exactly.
    Float(f64),
}

impl HostScalar {
    /// The value as a kernel argument word: little-endian in the low bytes, as many as its C
    /// type takes (an f32's bits, an integer wrapped to 64 bits, a bool as 0 or 1).
    pub fn launch_word(self) -> u64 {
        match self {
            HostScalar::Float(x) => u64::from((x as f32).to_bits()),
            HostScalar::Int(v) => v as u64,
            HostScalar::Bool(b) => u64::from(b),
        }
    }

    /// A representative value of `d` (zero), for asking whether a condition is host-computable.
    fn zero(d: DType) -> Option<HostScalar> {
        fit(
            d,
            match d {
                DType::Bool => HostScalar::Bool(false),
                DType::F32 => HostScalar::Float(0.0),
                _ => HostScalar::Int(0),
            },
        )
    }
}

/// `v` as a value of dtype `d`: ints wrapped to the width, floats rounded to f32; `None` where
/// the kinds differ or `d` is a storage-only type (i8, u8, f16, bf16).
fn fit(d: DType, v: HostScalar) -> Option<HostScalar> {
    use HostScalar::*;
    Some(match (d, v) {
        (DType::Bool, Bool(b)) => Bool(b),
        (DType::I32, Int(i)) => Int(i128::from(i as i32)),
        (DType::U32, Int(i)) => Int(i128::from(i as u32)),
        (DType::I64, Int(i)) => Int(i128::from(i as i64)),
        (DType::U64, Int(i)) => Int(i128::from(i as u64)),
        (DType::F32, Float(x)) => Float(f64::from(x as f32)),
        _ => return None,
    })
}

/// How the host computes one branch condition: the definitions it depends on, in an order where
/// each step's operands come before it (built once per kernel by [`Kernel::uniform_branches`];
/// [`HostProgram::eval`] runs it per launch without walking the kernel).
#[derive(Clone, Debug, PartialEq)]
pub struct HostProgram {
    /// `(var, its dtype, its one assignment)`; the last step assigns the condition.
    steps: Vec<(VarId, DType, Expr)>,
}

impl HostProgram {
    /// The condition var (what the `if` tests), or the var a [`Kernel::host_program`] computes.
    pub fn cond(&self) -> VarId {
        self.steps.last().map(|s| s.0).expect("a program has at least its condition's step")
    }

    /// The var the program computes (for a branch's program, its condition: [`HostProgram::cond`]).
    pub fn var(&self) -> VarId {
        self.cond()
    }

    /// The dtype of the var the program computes ([`HostProgram::var`]).
    pub fn dtype(&self) -> DType {
        self.steps.last().map(|s| s.1).expect("a program has at least its condition's step")
    }

    /// Whether a step is an f32 division or square root, code that the CUDA compiler emits with
    /// an out-of-line slow path, and a step reads a parameter (without one the C compiler folds
    /// it): what [`Kernel::host_scalars`] takes off the device.
    pub(crate) fn slow_on_the_device(&self) -> bool {
        let slow = |d: &DType, e: &Expr| {
            matches!(e, Expr::Binary(BinaryOp::Div, ..) if d.is_float())
                || matches!(e, Expr::Unary(UnaryOp::Sqrt, _))
        };
        self.steps.iter().any(|(_, d, e)| slow(d, e))
            && self.steps.iter().any(|(_, _, e)| matches!(e, Expr::Param(_)))
    }

    /// The condition's (var's) value given the scalar parameters (`param(i)` for `Kernel::params[i]`,
    /// `None` if unknown) and the const generics; `None` if a parameter is unknown or an
    /// operation leaves the evaluator's domain (see the module doc).
    pub fn eval(&self, param: &dyn Fn(u32) -> Option<HostScalar>, consts: &[u64]) -> Option<HostScalar> {
        // The runtime evaluates host scalars at every launch: the values on the stack for the
        // usual few steps.
        const ON_STACK: usize = 16;
        let mut stack = [(VarId(0), HostScalar::Bool(false)); ON_STACK];
        let mut heap = Vec::new();
        let n = self.steps.len();
        let vals: &mut [(VarId, HostScalar)] = if n <= ON_STACK {
            &mut stack[..n]
        } else {
            heap.resize(n, (VarId(0), HostScalar::Bool(false)));
            &mut heap
        };
        for (i, (var, dtype, expr)) in self.steps.iter().enumerate() {
            let get = |v: VarId| vals[..i].iter().rev().find(|(w, _)| *w == v).map(|&(_, x)| x);
            let x = eval_expr(*dtype, expr, &get, param, consts)?;
            vals[i] = (*var, x);
        }
        vals.last().map(|&(_, x)| x)
    }
}

/// The one assignment of each scalar assigned once (`None` for the others): what host programs
/// read. Built once per kernel and shared by every program made from it
/// ([`Kernel::host_defs`]).
pub struct HostDefs<'k> {
    k: &'k Kernel,
    def: Vec<Option<&'k Expr>>,
    counts: Vec<u32>,
}

impl<'k> HostDefs<'k> {
    /// `v`'s one assignment, if it has exactly one.
    pub(crate) fn def(&self, v: VarId) -> Option<&'k Expr> {
        self.def.get(v.0 as usize).copied().flatten()
    }

    /// Whether `v` is assigned by exactly one statement (a `for` counter counts as one).
    pub(crate) fn assigned_once(&self, v: VarId) -> bool {
        self.counts.get(v.0 as usize) == Some(&1)
    }

    /// How the host computes the scalar `var` from scalar parameters, literals and const
    /// generics (see [`HostProgram::eval`]), if it can: every var it depends on is assigned once.
    pub fn program(&self, var: VarId) -> Option<HostProgram> {
        let mut steps = Vec::new();
        self.k.collect_steps(var, &self.def, &mut steps, 0)?;
        let program = HostProgram { steps };
        program.eval(&|p| self.k.representative(p), &vec![1; self.k.consts.len()]).map(|_| program)
    }
}

impl Kernel {
    /// The `if` conditions the host can compute, each once, in program order, with how to compute
    /// them; the index in this list names the branch in
    /// [`crate::Specialization::BranchTaken`] and [`crate::Specialization::BranchSkipped`].
    pub fn uniform_branches(&self) -> Vec<HostProgram> {
        let mut conds = Vec::new();
        self.visit_stmts(&mut |s| match s {
            Stmt::If { cond, .. } if !conds.contains(cond) => conds.push(*cond),
            _ => {}
        });
        let defs = self.host_defs();
        conds.into_iter().filter_map(|c| defs.program(c)).collect()
    }

    /// The definitions host programs read ([`HostDefs`]): build them once to make programs for
    /// many vars.
    pub fn host_defs(&self) -> HostDefs<'_> {
        let counts = self.assignment_counts();
        let mut def: Vec<Option<&Expr>> = vec![None; self.vars.len()];
        self.visit_stmts(&mut |s| {
            if let Stmt::Assign { dst, expr } = s {
                if counts[dst.0 as usize] == 1 {
                    def[dst.0 as usize] = Some(expr);
                }
            }
        });
        HostDefs { k: self, def, counts }
    }

    /// How the host computes the scalar `var` (see [`HostDefs::program`]); for many vars, build
    /// [`Kernel::host_defs`] once instead.
    pub fn host_program(&self, var: VarId) -> Option<HostProgram> {
        self.host_defs().program(var)
    }

    /// Scalar parameter `p` at a representative value of its dtype: a program that computes with
    /// those computes with any (the evaluator refuses by operation, not by value).
    fn representative(&self, p: u32) -> Option<HostScalar> {
        match self.params.get(p as usize).map(|p| p.kind) {
            Some(ParamKind::Scalar(d)) => HostScalar::zero(d),
            _ => None,
        }
    }

    /// Appends the steps `var` depends on, then its own (each var once), or `None` if `var` is not
    /// a scalar assigned once from scalars.
    fn collect_steps(
        &self,
        var: VarId,
        def: &[Option<&Expr>],
        steps: &mut Vec<(VarId, DType, Expr)>,
        depth: u32,
    ) -> Option<()> {
        let ty = self.ty(var);
        if !ty.shape.is_scalar() || depth > 64 {
            return None;
        }
        if steps.iter().any(|s| s.0 == var) {
            return Some(());
        }
        let expr = def.get(var.0 as usize).copied().flatten()?;
        for v in expr.operands() {
            self.collect_steps(v, def, steps, depth + 1)?;
        }
        steps.push((var, ty.dtype, expr.clone()));
        Some(())
    }
}

/// One step: the value of `expr` assigned to a scalar of dtype `d`, its operands read by `get`.
fn eval_expr(
    d: DType,
    expr: &Expr,
    get: &dyn Fn(VarId) -> Option<HostScalar>,
    param: &dyn Fn(u32) -> Option<HostScalar>,
    consts: &[u64],
) -> Option<HostScalar> {
    use HostScalar::*;
    match expr {
        Expr::Copy(v) => get(*v),
        Expr::Lit(l) => fit(
            d,
            match (*l, d.is_float()) {
                (Literal::Bool(b), _) => Bool(b),
                (Literal::Int(i), false) => Int(i.into()),
                (Literal::UInt(u), false) => Int(u.into()),
                // Rounded once, as the emitted literal and the CPU interpreter round it.
                (Literal::Int(i), true) => Float(f64::from(i as f32)),
                (Literal::UInt(u), true) => Float(f64::from(u as f32)),
                (Literal::Float(x), true) => Float(x),
                (Literal::Float(_), false) => return None,
            },
        ),
        Expr::Param(p) => fit(d, param(*p)?),
        Expr::ConstGeneric(c) => fit(d, Int((*consts.get(*c as usize)?).into())),
        Expr::Cast(v) => fit(
            d,
            match (get(*v)?, d) {
                (Bool(b), DType::Bool) => Bool(b),
                (Int(i), DType::Bool) => Bool(i != 0),
                (Float(x), DType::Bool) => Bool(x != 0.0),
                (Bool(b), _) if d.is_float() => Float(f64::from(u8::from(b))),
                (Bool(b), _) => Int(i128::from(b)),
                // Rounded once, to nearest even (by way of f64, an i64 past 2^53 would round twice).
                (Int(i), _) if d.is_float() => Float(f64::from(i as f32)),
                (Int(i), _) => Int(i),
                (Float(x), _) if d.is_float() => Float(x),
                // Float to int truncates and saturates, NaN gives 0.
                (Float(x), _) => {
                    let (lo, hi) = int_range(d)?;
                    // Clamped as integers: `i64::MAX as f64` would round up past the range.
                    Int(if x.is_nan() { 0 } else { (x as i128).clamp(lo, hi) })
                }
            },
        ),
        Expr::Unary(op, v) => fit(
            d,
            match (op, get(*v)?) {
                (UnaryOp::Not, Bool(b)) => Bool(!b),
                (UnaryOp::Not, Int(i)) => Int(!i),
                (UnaryOp::Neg, Int(i)) => Int(i.wrapping_neg()),
                (UnaryOp::Neg, Float(x)) => Float(-x),
                // IEEE square root, correctly rounded, as CUDA's `sqrtf` (`-prec-sqrt=true`).
                (UnaryOp::Sqrt, Float(x)) if d == DType::F32 => Float(f64::from((x as f32).sqrt())),
                _ => return None,
            },
        ),
        Expr::Binary(op, a, b) => {
            let (a, b) = (get(*a)?, get(*b)?);
            if op.is_comparison() {
                return Some(Bool(compare(*op, a, b)?));
            }
            fit(
                d,
                match (op, a, b) {
                    (BinaryOp::And, Bool(x), Bool(y)) => Bool(x & y),
                    (BinaryOp::Or, Bool(x), Bool(y)) => Bool(x | y),
                    (BinaryOp::Xor, Bool(x), Bool(y)) => Bool(x ^ y),
                    (BinaryOp::And, Int(x), Int(y)) => Int(x & y),
                    (BinaryOp::Or, Int(x), Int(y)) => Int(x | y),
                    (BinaryOp::Xor, Int(x), Int(y)) => Int(x ^ y),
                    // Exact in i128, then wrapped by `fit`; f32 sums and products taken in f64 and
                    // rounded once are the correctly rounded f32 results.
                    (BinaryOp::Add, Int(x), Int(y)) => Int(x.wrapping_add(y)),
                    (BinaryOp::Sub, Int(x), Int(y)) => Int(x.wrapping_sub(y)),
                    (BinaryOp::Mul, Int(x), Int(y)) => Int(x.wrapping_mul(y)),
                    (BinaryOp::Add, Float(x), Float(y)) => Float(x + y),
                    (BinaryOp::Sub, Float(x), Float(y)) => Float(x - y),
                    (BinaryOp::Mul, Float(x), Float(y)) => Float(x * y),
                    // IEEE division, correctly rounded, as CUDA's `/` on floats (`-prec-div=true`).
                    (BinaryOp::Div, Float(x), Float(y)) if d == DType::F32 => {
                        Float(f64::from(x as f32 / y as f32))
                    }
                    (BinaryOp::Max, Int(x), Int(y)) => Int(x.max(y)),
                    (BinaryOp::Min, Int(x), Int(y)) => Int(x.min(y)),
                    // IEEE maxNum / minNum: a NaN operand is ignored (f64::max and min do so).
                    (BinaryOp::Max, Float(x), Float(y)) => Float(x.max(y)),
                    (BinaryOp::Min, Float(x), Float(y)) => Float(x.min(y)),
                    _ => return None,
                },
            )
        }
        _ => None,
    }
}

/// An IEEE comparison (false on NaN but for `!=`), or an integer one; `None` for mixed kinds.
fn compare(op: BinaryOp, a: HostScalar, b: HostScalar) -> Option<bool> {
    use std::cmp::Ordering::*;
    use HostScalar::*;
    let ord = match (a, b) {
        (Int(x), Int(y)) => Some(x.cmp(&y)),
        (Float(x), Float(y)) => x.partial_cmp(&y),
        (Bool(x), Bool(y)) => Some(x.cmp(&y)),
        _ => return None,
    };
    Some(match (op, ord) {
        (BinaryOp::Ne, None) => true,
        (_, None) => false,
        (BinaryOp::Lt, Some(o)) => o == Less,
        (BinaryOp::Le, Some(o)) => o != Greater,
        (BinaryOp::Gt, Some(o)) => o == Greater,
        (BinaryOp::Ge, Some(o)) => o != Less,
        (BinaryOp::Eq, Some(o)) => o == Equal,
        (BinaryOp::Ne, Some(o)) => o != Equal,
        _ => return None,
    })
}

/// The range of an integer compute dtype.
fn int_range(d: DType) -> Option<(i128, i128)> {
    Some(match d {
        DType::I32 => (i32::MIN.into(), i32::MAX.into()),
        DType::U32 => (0, u32::MAX.into()),
        DType::I64 => (i64::MIN.into(), i64::MAX.into()),
        DType::U64 => (0, u64::MAX.into()),
        _ => return None,
    })
}
