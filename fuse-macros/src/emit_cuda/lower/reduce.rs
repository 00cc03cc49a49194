//! Block-wide reductions to a scalar every thread receives: a thread-local fold over its slots,
//! a warp butterfly (`__shfl_xor_sync`), then one value per warp through shared memory and a
//! second butterfly. The butterfly gives every lane the same bits (each step combines the same
//! two values, in either order, and the ops are commutative), so the result stays uniform.
//! The shared buffer alternates between two halves: the barrier of reduction n+1 cannot be
//! passed before every thread finished reading reduction n, so writing the other half needs no
//! second barrier.
use super::ctype::{self, c_type, unsigned_of};
use super::Emitter;
use fuse_ir::{ArgOp, DType, ReduceOp, VarId};

impl Emitter<'_> {
    pub(in crate::emit_cuda) fn reduce(&mut self, dst: VarId, op: ReduceOp, src: VarId) {
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
        // A row (column) layout holds each row (column) in several threads: only the first
        // holder folds it, the thread at the row's start (the slot of the parent's first row).
        let once = match self.layout.row(k) {
            Some(r) if r.columns => {
                format!(" && FUSE_IDX{}(fuse_i) < ({})", r.parent, r.cols.c_expr(&self.k.consts))
            }
            Some(r) => format!(" && FUSE_CI{}(fuse_i) % FUSE_G{k} == 0", r.parent),
            None => String::new(),
        };
        self.w.unrolled(
            "fuse_i",
            &format!("FUSE_EPT{k}"),
            format!("if (FUSE_OK{k}(fuse_i / FUSE_VEC{k}){once}) fuse_r = {fold};"),
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
pub(in crate::emit_cuda) fn accumulate(d: DType, op: ReduceOp) -> (DType, ReduceOp) {
    match (d.compute(), op) {
        (DType::Bool, ReduceOp::Min) => (DType::I32, ReduceOp::Min),
        (DType::Bool, _) => (DType::I32, ReduceOp::Max),
        (d, op) => (d, op),
    }
}

/// The neutral value of `op` in dtype `d`.
pub(in crate::emit_cuda) fn identity(op: ReduceOp, d: DType) -> String {
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
pub(in crate::emit_cuda) fn combine(op: ReduceOp, d: DType, a: &str, b: &str) -> String {
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

/// What a fold across threads carries ([`super::shape`]'s column and arg-row folds): values
/// combined by `op` in dtype `acc`, or the (value, index) pairs of an arg-reduction over values
/// of dtype `val`. A pair beats another when its value is strictly better, or equal with a
/// smaller index; a NaN value beats every number, and NaNs tie (so the smaller index wins). That
/// is a strict total order on pairs with distinct indices, so any fold order finds the pair the
/// serial search (first index on ties, the first NaN) finds, bit for bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::emit_cuda) enum Fold {
    Plain { op: ReduceOp, acc: DType },
    Arg { op: ArgOp, val: DType },
}

/// The index a pair's neutral element carries: above every lane index (tiles have at most 2^16
/// lanes), so a real lane with the neutral value still beats it.
const NO_INDEX: &str = "0x7fffffff";

impl Fold {
    /// `op` over lanes of dtype `d` (bool as [`accumulate`] says).
    pub(in crate::emit_cuda) fn plain(d: DType, op: ReduceOp) -> Fold {
        let (acc, op) = accumulate(d, op);
        Fold::Plain { op, acc }
    }

    /// The dtype of the values carried.
    pub(in crate::emit_cuda) fn value(self) -> DType {
        match self {
            Fold::Plain { acc, .. } => acc,
            Fold::Arg { val, .. } => val,
        }
    }

    /// Bytes one element takes in shared memory (a pair's index is an `int` after the values).
    pub(in crate::emit_cuda) fn bytes(self) -> usize {
        self.value().size_bytes() + if matches!(self, Fold::Arg { .. }) { 4 } else { 0 }
    }

    /// The neutral value. A float sum starts at -0.0, the neutral element of IEEE addition (a
    /// column of -0.0 sums to -0.0, as the serial fold gives); max/min start at NaN, which
    /// fmaxf/fminf ignore; a pair at the worst value with [`NO_INDEX`].
    fn neutral(self) -> String {
        match self {
            Fold::Plain { op: ReduceOp::Sum, acc: DType::F32 } => ctype::f32_lit(-0.0),
            Fold::Plain { op, acc } => identity(op, acc),
            Fold::Arg { op, val } => match (op, val) {
                (ArgOp::Max, DType::F32) => ctype::f32_lit(f32::NEG_INFINITY),
                (ArgOp::Min, DType::F32) => ctype::f32_lit(f32::INFINITY),
                (ArgOp::Max, d) => identity(ReduceOp::Max, d),
                (ArgOp::Min, d) => identity(ReduceOp::Min, d),
            },
        }
    }

    /// Whether the pair `(x, xi)` beats `(b, bi)` (see [`Fold`]).
    fn beats(op: ArgOp, d: DType, x: &str, xi: &str, b: &str, bi: &str) -> String {
        let cmp = if op == ArgOp::Max { ">" } else { "<" };
        let nan = if d == DType::F32 {
            format!(" || ({x} != {x} && ({b} == {b} || {xi} < {bi}))")
        } else {
            String::new()
        };
        format!("({x} {cmp} {b} || ({x} == {b} && {xi} < {bi}){nan})")
    }
}

/// Accumulators of a [`Fold`] in registers: `{name}v[k]` (values) and, for pairs, `{name}i[k]`
/// (indices); in shared memory, `n` values from `fuse_xs` then, for pairs, `n` indices.
pub(in crate::emit_cuda) struct Acc {
    pub fold: Fold,
    pub name: &'static str,
}

impl Acc {
    pub(in crate::emit_cuda) fn v(&self, k: &str) -> String {
        format!("{}v[{k}]", self.name)
    }

    pub(in crate::emit_cuda) fn i(&self, k: &str) -> String {
        format!("{}i[{k}]", self.name)
    }

    /// The declarations of `n` accumulators.
    pub(in crate::emit_cuda) fn decl(&self, n: &str) -> Vec<String> {
        let mut out = vec![format!("{} {}v[{n}];", c_type(self.fold.value()), self.name)];
        if matches!(self.fold, Fold::Arg { .. }) {
            out.push(format!("int {}i[{n}];", self.name));
        }
        out
    }

    /// `k` set to the neutral element.
    pub(in crate::emit_cuda) fn init(&self, k: &str) -> String {
        match self.fold {
            Fold::Plain { .. } => format!("{} = {};", self.v(k), self.fold.neutral()),
            Fold::Arg { .. } => {
                format!("{{ {} = {}; {} = {NO_INDEX}; }}", self.v(k), self.fold.neutral(), self.i(k))
            }
        }
    }

    /// `(x, xi)` folded into `k` (a plain fold ignores `xi`).
    pub(in crate::emit_cuda) fn fold_in(&self, k: &str, x: &str, xi: &str) -> String {
        let (v, i) = (self.v(k), self.i(k));
        match self.fold {
            Fold::Plain { op, acc } => format!("{v} = {};", combine(op, acc, &v, x)),
            Fold::Arg { op, val } => {
                format!("if ({}) {{ {v} = {x}; {i} = {xi}; }}", Fold::beats(op, val, x, xi, &v, &i))
            }
        }
    }

    /// `k` folded with lane `lane ^ s`'s `k` (every lane of the warp must run it).
    pub(in crate::emit_cuda) fn shfl(&self, k: &str, s: &str) -> String {
        let (v, i) = (self.v(k), self.i(k));
        let t = c_type(self.fold.value());
        match self.fold {
            // Into a temporary first: `combine` may name an operand twice (`a > b ? a : b`), and a
            // shuffle in a conditional arm would run in some lanes only.
            Fold::Plain { op, acc } => format!(
                "{{ const {t} fuse_ov = __shfl_xor_sync(0xffffffffu, {v}, {s}); {v} = {}; }}",
                combine(op, acc, &v, "fuse_ov")
            ),
            Fold::Arg { .. } => format!(
                "{{ const {t} fuse_ov = __shfl_xor_sync(0xffffffffu, {v}, {s}); const int fuse_oi = __shfl_xor_sync(0xffffffffu, {i}, {s}); {} }}",
                self.fold_in(k, "fuse_ov", "fuse_oi")
            ),
        }
    }

    /// Value and index of shared slot `slot` of `n` (C expressions).
    fn shared(&self, slot: &str, n: &str) -> (String, String) {
        let t = c_type(self.fold.value());
        let sz = self.fold.value().size_bytes();
        (format!("(({t}*)fuse_xs)[{slot}]"), format!("((int*)(fuse_xs + ({n}) * {sz}))[{slot}]"))
    }

    /// `k` written to shared slot `slot` of `n`.
    pub(in crate::emit_cuda) fn to_shared(&self, k: &str, slot: &str, n: &str) -> String {
        let (sv, si) = self.shared(slot, n);
        match self.fold {
            Fold::Plain { .. } => format!("{sv} = {};", self.v(k)),
            Fold::Arg { .. } => format!("{{ {sv} = {}; {si} = {}; }}", self.v(k), self.i(k)),
        }
    }

    /// `k` set to shared slot `slot` of `n`.
    pub(in crate::emit_cuda) fn load_shared(&self, k: &str, slot: &str, n: &str) -> String {
        let (sv, si) = self.shared(slot, n);
        match self.fold {
            Fold::Plain { .. } => format!("{} = {sv};", self.v(k)),
            Fold::Arg { .. } => format!("{{ {} = {sv}; {} = {si}; }}", self.v(k), self.i(k)),
        }
    }

    /// Shared slot `slot` of `n` folded into `k`.
    pub(in crate::emit_cuda) fn fold_shared(&self, k: &str, slot: &str, n: &str) -> String {
        let (sv, si) = self.shared(slot, n);
        self.fold_in(k, &sv, &si)
    }
}
