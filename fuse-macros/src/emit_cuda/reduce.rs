//! Block-wide reductions to a scalar every thread receives: a thread-local fold over its slots,
//! a warp butterfly (`__shfl_xor_sync`), then one value per warp through shared memory and a
//! second butterfly. The butterfly gives every lane the same bits (each step combines the same
//! two values, in either order, and the ops are commutative), so the result stays uniform.
//! The shared buffer alternates between two halves: the barrier of reduction n+1 cannot be
//! passed before every thread finished reading reduction n, so writing the other half needs no
//! second barrier.
use super::ctype::{self, c_type, unsigned_of};
use super::Ctx;
use fuse_ir::{DType, ReduceOp, VarId};

impl Ctx<'_> {
    pub(super) fn reduce(&mut self, dst: VarId, op: ReduceOp, src: VarId) {
        let k = self.tile(src).expect("reductions take tiles");
        let (acc, op) = accumulate(self.dtype(src), op);
        if !self.reduce_types.contains(&acc) {
            self.reduce_types.push(acc);
        }
        let t = c_type(acc);
        let id = identity(op, acc);
        let opname = match op {
            ReduceOp::Sum => "sum",
            ReduceOp::Max => "max",
            ReduceOp::Min => "min",
        };
        let d = self.name(dst).to_string();
        self.w.line(format!("// {d} = {opname}({})", self.name(src)));
        self.w.open("");
        self.w.line(format!("{t} fuse_r = {id};"));
        let x = self.at_as(src, "fuse_i", acc);
        let fold = combine(op, acc, "fuse_r", &x);
        self.w.unrolled(
            "fuse_i",
            &format!("FUSE_EPT{k}"),
            format!("if (FUSE_OK{k}(fuse_i / FUSE_VEC{k})) fuse_r = {fold};"),
        );
        let shfl = format!(
            "{{ const {t} fuse_t = __shfl_xor_sync(0xffffffffu, fuse_r, fuse_s); fuse_r = {}; }}",
            combine(op, acc, "fuse_r", "fuse_t")
        );
        self.w.unrolled_step("fuse_s", "16", &shfl);
        self.w.pp("#if FUSE_NUM_WARPS > 1");
        let buf = format!("fuse_red_{}[fuse_phase]", acc.name());
        self.w.line(format!("if ((fuse_tid & 31) == 0) {buf}[fuse_tid >> 5] = fuse_r;"));
        self.w.line("__syncthreads();");
        // Lanes l and l + P read the same slot, so each group of P lanes reduces all warps.
        self.w.line(format!(
            "fuse_r = ((fuse_tid & 31) & (FUSE_RED_P - 1)) < FUSE_NUM_WARPS ? {buf}[(fuse_tid & 31) & (FUSE_RED_P - 1)] : {id};"
        ));
        self.w.line("fuse_phase ^= 1;");
        self.w.unrolled_step("fuse_s", "FUSE_RED_P / 2", &shfl);
        self.w.pp("#endif");
        let r = ctype::convert("fuse_r", acc, self.dtype(dst), &mut self.needs);
        self.w.line(format!("{d} = {r};"));
        self.w.close();
    }
}

/// The accumulator dtype and operation of reducing `d` with `op`: bool reduces as 0/1 ints (sum
/// and max are "any", min is "all"), f16/bf16 in f32.
pub(super) fn accumulate(d: DType, op: ReduceOp) -> (DType, ReduceOp) {
    match (d.compute(), op) {
        (DType::Bool, ReduceOp::Min) => (DType::I32, ReduceOp::Min),
        (DType::Bool, _) => (DType::I32, ReduceOp::Max),
        (d, op) => (d, op),
    }
}

/// The neutral value of `op` in dtype `d`.
pub(super) fn identity(op: ReduceOp, d: DType) -> String {
    match (op, d) {
        (ReduceOp::Sum, DType::F32) => "0.0f".into(),
        (ReduceOp::Sum, d) => ctype::int_lit(0, d),
        // NaN: fmaxf/fminf return the other operand, so an all-NaN tile alone gives NaN (maxNum).
        (_, DType::F32) => ctype::f32_lit(f32::NAN),
        (ReduceOp::Max, DType::I32) => ctype::int_lit(i128::from(i32::MIN), d),
        (ReduceOp::Max, DType::I64) => ctype::int_lit(i128::from(i64::MIN), d),
        (ReduceOp::Max, _) => ctype::int_lit(0, d),
        (ReduceOp::Min, DType::I32) => ctype::int_lit(i128::from(i32::MAX), d),
        (ReduceOp::Min, DType::I64) => ctype::int_lit(i128::from(i64::MAX), d),
        (ReduceOp::Min, _) => ctype::int_lit(-1, d),
    }
}

/// `a op b` in dtype `d` (ints wrap; float max/min ignore NaN, IEEE maxNum/minNum).
pub(super) fn combine(op: ReduceOp, d: DType, a: &str, b: &str) -> String {
    match (op, d) {
        (ReduceOp::Sum, DType::F32) => format!("{a} + {b}"),
        (ReduceOp::Sum, d) if d.is_signed_int() => {
            let u = unsigned_of(d);
            format!("({})(({u}){a} + ({u}){b})", c_type(d))
        }
        (ReduceOp::Sum, _) => format!("{a} + {b}"),
        (ReduceOp::Max, DType::F32) => format!("fmaxf({a}, {b})"),
        (ReduceOp::Min, DType::F32) => format!("fminf({a}, {b})"),
        (ReduceOp::Max, _) => format!("({a} > {b} ? {a} : {b})"),
        (ReduceOp::Min, _) => format!("({a} < {b} ? {a} : {b})"),
    }
}
