//! Scalars the runtime computes at launch: a scalar computed from scalar parameters, literals and
//! const generics only, through an f32 division or square root (LayerNorm's `1.0 / n_cols as
//! f32`, dropout's `1.0 / (1.0 - p)`; not `1.0 / sqrt(D as f32)` of a const generic `D`, which
//! the C compiler folds). On the device such a division is a fast path plus an out-of-line
//! slow-path call, and everything live across that call is kept in registers, which can make a
//! kernel near its register limit recompute values rather than keep them (a narrow-row f16
//! LayerNorm would convert its loaded halves twice). The same value computed by the host (the
//! [`HostProgram`] evaluator: correctly rounded f32 division and square root, with the bits of
//! CUDA's `/` and `sqrtf` and of the CPU interpreter) and passed as a hidden parameter costs
//! nothing.
//!
//! The emitter assigns such a var from the kernel parameter `fuse_host<i>` (`i` its index in
//! [`Kernel::host_scalars`]), placed after the buffer lengths; the runtime evaluates the
//! programs with each launch's arguments and passes the values there. The host evaluates the
//! program one IEEE f32 operation at a time, as the CPU interpreter runs the IR, so the GPU and
//! the CPU get the same value (the device, compiled with `--fmad=true`, might have contracted
//! a multiply and an add of the program into one FMA; NaN payloads may differ).
use crate::kernel::{Kernel, Stmt, VarId};
use crate::types::DType;
use crate::uniform::HostProgram;

impl Kernel {
    /// The scalars the host computes at each launch, in program order of their assignments (the
    /// index names the parameter `fuse_host<i>`): each a scalar of a compute dtype (not bool)
    /// assigned once, with a [`HostProgram`] that reads a parameter and divides or takes a square
    /// root in f32, and read somewhere other than in the definition of another such scalar (of
    /// `a = 1 / n` and `b = 2 * a`, only `b` is passed where nothing else reads `a`).
    pub fn host_scalars(&self) -> Vec<HostProgram> {
        let mut candidates = self.host_divisions();
        let is_candidate = |v: VarId| candidates.iter().any(|p| p.var() == v);
        let mut read_elsewhere = vec![false; self.vars.len()];
        let mut mark = |v: VarId| read_elsewhere[v.0 as usize] = true;
        self.visit_stmts(&mut |s| match s {
            Stmt::Assign { dst, .. } if is_candidate(*dst) => {}
            Stmt::Assign { expr, .. } => expr.operands().into_iter().for_each(&mut mark),
            Stmt::Store { offset, value, mask, .. } => {
                [*offset, *value].into_iter().chain(*mask).for_each(&mut mark)
            }
            Stmt::If { cond, .. } => mark(*cond),
            Stmt::For { start, end, step, .. } => [*start, *end, *step].into_iter().for_each(&mut mark),
        });
        candidates.retain(|p| read_elsewhere[p.var().0 as usize]);
        candidates
    }

    /// Every scalar (not bool) assigned once that the host could compute and whose program
    /// reads a parameter and divides or takes a square root in f32, in program order:
    /// [`Kernel::host_scalars`] passes the outermost of them, so none is left to compute on the
    /// device (the emitter's statement order treats them all as free of slow-path calls).
    pub fn host_divisions(&self) -> Vec<HostProgram> {
        let defs = self.host_defs();
        let mut found: Vec<HostProgram> = Vec::new();
        self.visit_stmts(&mut |s| {
            let Stmt::Assign { dst, .. } = s else { return };
            let ty = self.ty(*dst);
            if !ty.shape.is_scalar() || ty.dtype == DType::Bool || !defs.assigned_once(*dst) {
                return;
            }
            if let Some(p) = defs.program(*dst).filter(HostProgram::slow_on_the_device) {
                found.push(p);
            }
        });
        found
    }
}

#[cfg(test)]
mod tests {
    use crate::{
        BinaryOp, DType, Expr, HostScalar, Kernel, Literal, Param, ParamKind, Stmt, Ty, UnaryOp, Var, VarId,
    };

    /// A kernel of scalar statements over scalar params `n: i32` and `p: f32` (vars 0 and 1 are
    /// their copies), each statement's result stored to `out: *mut f32` if `stored`.
    fn kernel(steps: &[(DType, Expr)], stored: &[u32]) -> Kernel {
        let param = |name: &str, kind| Param { name: name.into(), kind };
        let mut vars = vec![
            Var { name: "n".into(), ty: Ty::scalar(DType::I32) },
            Var { name: "p".into(), ty: Ty::scalar(DType::F32) },
        ];
        let mut body = vec![
            Stmt::Assign { dst: VarId(0), expr: Expr::Param(0) },
            Stmt::Assign { dst: VarId(1), expr: Expr::Param(1) },
        ];
        for (i, (d, e)) in steps.iter().enumerate() {
            let v = VarId(vars.len() as u32);
            vars.push(Var { name: format!("t{i}"), ty: Ty::scalar(*d) });
            body.push(Stmt::Assign { dst: v, expr: e.clone() });
        }
        let zero = VarId(vars.len() as u32);
        vars.push(Var { name: "zero".into(), ty: Ty::scalar(DType::I32) });
        body.push(Stmt::Assign { dst: zero, expr: Expr::Lit(Literal::Int(0)) });
        for &v in stored {
            body.push(Stmt::Store { param: 2, offset: zero, value: VarId(v), mask: None });
        }
        Kernel {
            name: "k".into(),
            consts: Vec::new(),
            params: vec![
                param("n", ParamKind::Scalar(DType::I32)),
                param("p", ParamKind::Scalar(DType::F32)),
                param("out", ParamKind::Ptr { elem: DType::F32, mutable: true }),
            ],
            vars,
            body,
        }
    }

    fn eval(k: &Kernel, i: usize, n: i32, p: f32) -> Option<HostScalar> {
        let args = |q: u32| match q {
            0 => Some(HostScalar::Int(n.into())),
            1 => Some(HostScalar::Float(p.into())),
            _ => None,
        };
        k.host_scalars()[i].eval(&args, &[])
    }

    #[test]
    fn a_division_of_parameters_is_computed_on_the_host_with_the_devices_rounding() {
        // t0 = n as f32; t1 = 1.0; t2 = t1 / t0 (stored).
        let k = kernel(
            &[
                (DType::F32, Expr::Cast(VarId(0))),
                (DType::F32, Expr::Lit(Literal::Float(1.0))),
                (DType::F32, Expr::Binary(BinaryOp::Div, VarId(3), VarId(2))),
            ],
            &[4],
        );
        let hs = k.host_scalars();
        assert_eq!(hs.len(), 1);
        assert_eq!((hs[0].var(), hs[0].dtype()), (VarId(4), DType::F32));
        for n in [1, 3, 7, 255, 256, 1000, 50257, 0, -3] {
            let want = 1.0f32 / n as f32; // Rust's f32 division is IEEE's, as CUDA's `/` and the CPU's
            assert_eq!(eval(&k, 0, n, 0.0), Some(HostScalar::Float(want.into())), "n = {n}");
        }
    }

    #[test]
    fn a_square_root_and_large_integers_round_once_and_casts_saturate() {
        // t0 = sqrt(p) (stored).
        let k = kernel(&[(DType::F32, Expr::Unary(UnaryOp::Sqrt, VarId(1)))], &[2]);
        for p in [2.0f32, 1e-30, 3.0e38, -1.0, 0.0] {
            let got = eval(&k, 0, 0, p);
            let want = p.sqrt();
            assert!(
                matches!(got, Some(HostScalar::Float(x)) if x.to_bits() == f64::from(want).to_bits()
                    || (x.is_nan() && want.is_nan())),
                "sqrt({p}): {got:?}"
            );
        }
        // An i64 just above a tie between two f32s: through f64 it would round to the tie, then
        // to even (down); correctly rounded, as CUDA's cvt.rn and Rust's `as`, it goes up.
        let big: i64 = (1 << 60) + (1 << 36) + 1;
        let rounded = big as f32;
        assert_ne!(rounded, (big as f64) as f32, "the case double rounding gets wrong");
        // (big + n as i64) as f32 / p at n = 0, p = 1: the cast's value itself.
        let k = kernel(
            &[
                (DType::I64, Expr::Lit(Literal::Int(big))),
                (DType::I64, Expr::Cast(VarId(0))),
                (DType::I64, Expr::Binary(BinaryOp::Add, VarId(2), VarId(3))),
                (DType::F32, Expr::Cast(VarId(4))),
                (DType::F32, Expr::Binary(BinaryOp::Div, VarId(5), VarId(1))),
            ],
            &[6],
        );
        assert_eq!(eval(&k, 0, 0, 1.0), Some(HostScalar::Float(rounded.into())));
        // The same integer as an f32 literal (`big as f32` written as a literal of an f32 var).
        let k = kernel(
            &[
                (DType::F32, Expr::Lit(Literal::Int(big))),
                (DType::F32, Expr::Binary(BinaryOp::Div, VarId(2), VarId(1))),
            ],
            &[3],
        );
        assert_eq!(eval(&k, 0, 0, 1.0), Some(HostScalar::Float(rounded.into())));
        // f32 to 64-bit integers truncates and saturates at the type's own bounds, NaN gives 0
        // (CUDA's cvt.rzi and Rust's `as`): `i64::MAX as f64` is 2^63, past the range.
        for (d, most, least) in
            [(DType::I64, i128::from(i64::MAX), i128::from(i64::MIN)), (DType::U64, u64::MAX.into(), 0)]
        {
            let k = kernel(&[(d, Expr::Cast(VarId(1)))], &[]);
            let cast = k.host_program(VarId(2)).expect("a cast of a parameter");
            for (p, want) in
                [(1e30f32, most), (-1e30, least), (f32::NAN, 0), (-2.75, least.max(-2)), (7.9, 7)]
            {
                let got = cast.eval(&|q| (q == 1).then_some(HostScalar::Float(p.into())), &[]);
                assert_eq!(got, Some(HostScalar::Int(want)), "{p} as {d}");
            }
        }
    }

    #[test]
    fn a_long_program_evaluates_past_the_stack_buffer() {
        // t0 = p; t(i) = t(i-1) + p for 24 steps; then t / n as f32: (25 p) / n, summed in f32.
        let mut steps = vec![(DType::F32, Expr::Copy(VarId(1)))];
        for i in 0..24 {
            steps.push((DType::F32, Expr::Binary(BinaryOp::Add, VarId(2 + i), VarId(1))));
        }
        let sum = VarId(2 + 24);
        steps.push((DType::F32, Expr::Cast(VarId(0))));
        steps.push((DType::F32, Expr::Binary(BinaryOp::Div, sum, VarId(sum.0 + 1))));
        let k = kernel(&steps, &[sum.0 + 2]);
        let p = 0.1f32;
        let want = (0..24).fold(p, |t, _| t + p) / 3.0;
        assert_eq!(eval(&k, 0, 3, p), Some(HostScalar::Float(want.into())));
    }

    #[test]
    fn only_the_outermost_of_a_chain_and_nothing_per_program_or_without_a_division() {
        let k = kernel(
            &[
                (DType::F32, Expr::Cast(VarId(0))), // t0 = n as f32  (2)
                (DType::F32, Expr::Binary(BinaryOp::Div, VarId(1), VarId(2))), // t1 = p / t0 (3)
                (DType::F32, Expr::Binary(BinaryOp::Mul, VarId(3), VarId(3))), // t2 = t1 * t1 (4)
                (DType::F32, Expr::Binary(BinaryOp::Mul, VarId(1), VarId(2))), // t3 = p * t0 (5)
                (DType::I32, Expr::ProgramId(0)),   // t4 = pid (6)
                (DType::F32, Expr::Cast(VarId(6))), // t5 (7)
                (DType::F32, Expr::Binary(BinaryOp::Div, VarId(1), VarId(7))), // t6 = p / pid (8)
                (DType::Bool, Expr::Binary(BinaryOp::Gt, VarId(3), VarId(1))), // t7 = t1 > p (9)
            ],
            &[4, 5, 8],
        );
        let hs: Vec<VarId> = k.host_scalars().iter().map(|p| p.var()).collect();
        // t1 is read by t2 (passed itself) and by the bool t7, which is not passed: both go.
        assert_eq!(hs, vec![VarId(3), VarId(4)]);
        // Without t7, only t2 remains.
        let mut k2 = k.clone();
        k2.body.retain(|s| !matches!(s, Stmt::Assign { dst: VarId(9), .. }));
        let hs: Vec<VarId> = k2.host_scalars().iter().map(|p| p.var()).collect();
        assert_eq!(hs, vec![VarId(4)]);
        let v = k2.host_scalars()[0]
            .eval(&|q| [Some(HostScalar::Int(3)), Some(HostScalar::Float(1.0))][q as usize], &[]);
        let t1 = 1.0f32 / 3.0;
        assert_eq!(v, Some(HostScalar::Float((t1 * t1).into())));
        // Of literals (or const generics) only: left to the C compiler, which folds it.
        let k = kernel(
            &[
                (DType::F32, Expr::Lit(Literal::Float(2.0))),
                (DType::F32, Expr::Unary(UnaryOp::Sqrt, VarId(2))),
            ],
            &[3],
        );
        assert!(k.host_scalars().is_empty());
    }
}
