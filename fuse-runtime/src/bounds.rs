//! The launch-time proof that accesses stay in bounds (`FUSE_INB_<k>`, see
//! [`fuse_ir::Specialization::InBounds`]).
//!
//! Every load and store is bounds-checked on the GPU. Most kernels index with `program_id`,
//! `arange`, the const generics and integer scalars only, and for those the launch already knows
//! everything that decides the offsets: the grid, the const generics, the scalar arguments and
//! the buffer lengths. [`BoundsPlan`] (built once per kernel from the IR) lists, per access, the
//! integer computations its offset and mask come from; [`BoundsPlan::prove`] evaluates them with
//! interval arithmetic at launch. Where the offset's interval — on the lanes whose mask is true —
//! lies inside the buffer, the access compiles without its check.
//!
//! Soundness rules (a "no" keeps the check, never the reverse):
//! * a value the analysis cannot bound (a loaded value, a float, a reduction, a possible integer
//!   wrap-around, a division by a divisor that may be below 1) is unknown, and an access whose
//!   offset depends on one is unproven;
//! * a var is followed only if it is assigned once and that assignment *dominates* the reading
//!   statement (it ran before it, in its block or an enclosing one, and cannot run again in
//!   between), or if it is the counter of a `for` loop that encloses the reader; so every var
//!   holds the same value at its readers as at the access;
//! * a mask `a < b` (`<=`, `>`, `>=`, `==`, joined by `&`) narrows `a` and `b` to the values they
//!   can have on the lanes where it is true; the offset is then re-evaluated on those lanes, through
//!   element-wise operations only (a reduction is unknown, so it never sees a narrowed lane set).
//!
//! The same intervals prove masks constant (`FUSE_TRUE_<k>`, [`fuse_ir::Specialization::AllTrue`]):
//! a mask of [`Kernel::masks`] (assigned once, by an integer comparison or an `&` of such) whose
//! comparisons hold for every value their operands' intervals allow, evaluated where the mask is
//! assigned, is true on every lane of every program (`offs < n` when the grid covers exactly `n`,
//! `cols < n_cols` when the tile is the row).
//!
//! Bottom layer (a pure analysis of the IR): imports nothing of the crate.

use fuse_ir::{BinaryOp, DType, Expr, Kernel, Literal, Shape, Stmt, UnaryOp, VarId};

/// A closed interval of mathematical integers; empty when `lo > hi` (no value: the code that
/// would produce one never runs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Interval {
    lo: i128,
    hi: i128,
}

impl Interval {
    fn new(lo: i128, hi: i128) -> Interval {
        Interval { lo, hi }
    }
    fn point(v: i128) -> Interval {
        Interval { lo: v, hi: v }
    }
    fn is_empty(self) -> bool {
        self.lo > self.hi
    }
    fn hull(self, o: Interval) -> Interval {
        match (self.is_empty(), o.is_empty()) {
            (true, _) => o,
            (_, true) => self,
            _ => Interval::new(self.lo.min(o.lo), self.hi.max(o.hi)),
        }
    }
    fn meet(self, o: Interval) -> Interval {
        Interval::new(self.lo.max(o.lo), self.hi.min(o.hi))
    }
}

/// The values of an integer (or bool) dtype; `None` for floats.
fn range(d: DType) -> Option<Interval> {
    Some(match d {
        DType::Bool => Interval::new(0, 1),
        DType::I8 => Interval::new(i8::MIN.into(), i8::MAX.into()),
        DType::U8 => Interval::new(0, u8::MAX.into()),
        DType::I32 => Interval::new(i32::MIN.into(), i32::MAX.into()),
        DType::U32 => Interval::new(0, u32::MAX.into()),
        DType::I64 => Interval::new(i64::MIN.into(), i64::MAX.into()),
        DType::U64 => Interval::new(0, u64::MAX.into()),
        DType::F16 | DType::BF16 | DType::F32 => return None,
    })
}

/// `iv` if every value fits `d` (so the machine computed it without wrapping), else unknown.
fn fit(d: DType, iv: Interval) -> Option<Interval> {
    let r = range(d)?;
    (iv.is_empty() || (r.lo <= iv.lo && iv.hi <= r.hi)).then_some(iv)
}

/// Where a statement is: the (statement index, body: 0 then/for, 1 else) pairs leading to its
/// block, and its index there.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Pos {
    block: Vec<(u32, u8)>,
    index: u32,
}

impl Pos {
    /// Whenever `p` runs, the statement at `self` ran before it and has not run since: it sits in
    /// `p`'s block or an enclosing one, before the statement that holds `p`.
    fn dominates(&self, p: &Pos) -> bool {
        if !p.block.starts_with(&self.block) {
            return false;
        }
        let holder = if p.block.len() == self.block.len() { p.index } else { p.block[self.block.len()].0 };
        self.index < holder
    }

    /// `p` is in the body of the `for` statement at `self`.
    fn encloses(&self, p: &Pos) -> bool {
        p.block.len() > self.block.len()
            && p.block.starts_with(&self.block)
            && p.block[self.block.len()] == (self.index, 0)
    }
}

/// How a var gets its values.
#[derive(Clone, Debug)]
enum Def {
    Unassigned,
    Once(Pos, Expr),
    /// The counter of the `for` statement at `Pos`: `start <= v < end`, in steps of `step`.
    Counter(Pos, VarId, VarId, VarId),
    Many,
}

/// One integer computation of the plan: `slot = expr` over earlier slots.
#[derive(Clone, Debug)]
struct Step {
    var: VarId,
    op: Op,
}

#[derive(Clone, Debug)]
enum Op {
    Expr(Expr),
    /// `step` where the plan follows it: then the counter's last value is the last multiple of
    /// the step from `start` below `end` (`k0 <= k - BK` for `(0..k).step_by(BK)`, `BK | k`).
    Counter {
        start: VarId,
        end: VarId,
        step: Option<VarId>,
    },
}

/// A narrowing that a true mask lane implies: `var <= bound - slack` (`upper`) or
/// `var >= bound + slack`.
#[derive(Clone, Copy, Debug)]
struct Narrow {
    var: VarId,
    bound: VarId,
    upper: bool,
    slack: i128,
}

/// What decides one access's offsets.
#[derive(Clone, Debug)]
struct AccessPlan {
    param: u32,
    offset: VarId,
    /// The vars the offset and the mask's comparisons read, each after its operands.
    steps: Vec<Step>,
    narrows: Vec<Narrow>,
}

/// A mask's test, over vars whose steps precede it.
#[derive(Clone, Debug)]
enum Test {
    Compare(BinaryOp, VarId, VarId),
    And(Box<Test>, Box<Test>),
}

/// What decides one mask of [`Kernel::masks`].
#[derive(Clone, Debug)]
struct MaskPlan {
    steps: Vec<Step>,
    test: Test,
}

/// What [`BoundsPlan::prove`] found for one launch: bit `k` for access (mask) `k`, the first 64.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Proof {
    /// Accesses whose every lane lies inside the buffer.
    pub(crate) in_bounds: u64,
    /// Masks true on every lane of every program.
    pub(crate) all_true: u64,
}

/// Built once per kernel; see the module docs.
#[derive(Debug)]
pub(crate) struct BoundsPlan {
    /// Per access in [`Kernel::accesses`] order; `None` when the offset depends on something the
    /// analysis cannot follow (it is never proven).
    accesses: Vec<Option<AccessPlan>>,
    /// Per mask in [`Kernel::masks`] order; `None` when its test cannot be followed.
    masks: Vec<Option<MaskPlan>>,
    /// Per var: its dtype and, for tiles, its length in elements (const generics unresolved).
    types: Vec<fuse_ir::Ty>,
    /// Per `for` statement, in program (pre-)order: what decides its start, end and step; `None`
    /// when one of them cannot be followed ([`BoundsPlan::trip_counts`]).
    loops: Vec<Option<LoopPlan>>,
    /// Per `if` statement, in program (pre-)order: what decides its condition
    /// ([`BoundsPlan::branches`]).
    ifs: Vec<Option<(Vec<Step>, VarId)>>,
}

/// What decides one loop's trip count.
#[derive(Clone, Debug)]
struct LoopPlan {
    steps: Vec<Step>,
    start: VarId,
    end: VarId,
    step: VarId,
}

/// The launch's values the proof reads.
pub(crate) struct LaunchFacts<'a> {
    pub(crate) consts: &'a [u64],
    pub(crate) grid: [u32; 3],
    /// Per parameter: an integer scalar's value.
    pub(crate) scalars: &'a [Option<i128>],
    /// Per parameter: a buffer's length in elements.
    pub(crate) lens: &'a [Option<u64>],
}

impl BoundsPlan {
    pub(crate) fn new(k: &Kernel) -> BoundsPlan {
        let mut defs = vec![Def::Unassigned; k.vars.len()];
        let mut access_pos = Vec::new();
        collect(&k.body, &mut Vec::new(), &mut defs, &mut access_pos);
        let accesses = k
            .accesses()
            .iter()
            .zip(&access_pos)
            .map(|(a, at)| {
                let mut b = Builder { defs: &defs, steps: Vec::new(), seen: vec![false; k.vars.len()] };
                if !b.follow(a.offset, at) {
                    return None;
                }
                let mut narrows = Vec::new();
                if let Some(m) = a.mask {
                    b.mask(m, at, &mut narrows);
                }
                Some(AccessPlan { param: a.param, offset: a.offset, steps: b.steps, narrows })
            })
            .collect();
        let masks = k
            .masks()
            .iter()
            .map(|&m| {
                let Def::Once(at, expr) = &defs[m.0 as usize] else { return None };
                let mut b = Builder { defs: &defs, steps: Vec::new(), seen: vec![false; k.vars.len()] };
                let test = b.test(expr, at)?;
                Some(MaskPlan { steps: b.steps, test })
            })
            .collect();
        let (mut loop_pos, mut if_pos) = (Vec::new(), Vec::new());
        collect_control(&k.body, &mut Vec::new(), &mut loop_pos, &mut if_pos);
        let loops = loop_pos
            .into_iter()
            .map(|(at, start, end, step)| {
                let mut b = Builder { defs: &defs, steps: Vec::new(), seen: vec![false; k.vars.len()] };
                (b.follow(start, &at) && b.follow(end, &at) && b.follow(step, &at)).then_some(LoopPlan {
                    steps: b.steps,
                    start,
                    end,
                    step,
                })
            })
            .collect();
        let ifs = if_pos
            .into_iter()
            .map(|(at, cond)| {
                let mut b = Builder { defs: &defs, steps: Vec::new(), seen: vec![false; k.vars.len()] };
                b.follow(cond, &at).then_some((b.steps, cond))
            })
            .collect();
        BoundsPlan { accesses, masks, types: k.vars.iter().map(|v| v.ty.clone()).collect(), loops, ifs }
    }

    /// Per access in [`Kernel::accesses`] order: the interval of its offsets on the lanes whose
    /// mask is true, over every program of the launch (`(lo, hi)`, empty when `lo > hi`), or
    /// `None` where the analysis cannot bound it. For [`crate::cost`].
    pub(crate) fn access_ranges(&self, f: &LaunchFacts<'_>) -> Vec<Option<(i128, i128)>> {
        let mut vals: Vec<Option<Interval>> = vec![None; self.types.len()];
        self.accesses
            .iter()
            .map(|plan| {
                let plan = plan.as_ref()?;
                self.offset_range(plan, f, &mut vals).map(|iv| (iv.lo, iv.hi))
            })
            .collect()
    }

    /// Per `if` statement in program (pre-)order: `Some(true)` where its condition holds in every
    /// program of the launch, `Some(false)` where it holds in none, `None` otherwise or where it
    /// cannot be followed. For [`crate::cost`].
    pub(crate) fn branches(&self, f: &LaunchFacts<'_>) -> Vec<Option<bool>> {
        let mut vals: Vec<Option<Interval>> = vec![None; self.types.len()];
        self.ifs
            .iter()
            .map(|plan| {
                let (steps, cond) = plan.as_ref()?;
                for s in steps {
                    vals[s.var.0 as usize] = self.eval(s, f, &vals);
                }
                match vals[cond.0 as usize]? {
                    Interval { lo: 1, hi: 1 } => Some(true),
                    Interval { lo: 0, hi: 0 } => Some(false),
                    _ => None,
                }
            })
            .collect()
    }

    /// Per `for` statement in program (pre-)order: the least and the most iterations it runs in
    /// one execution, over every program of the launch (equal when its start, end and step are
    /// the same everywhere), or `None` where they cannot be bounded. For [`crate::cost`].
    pub(crate) fn trip_counts(&self, f: &LaunchFacts<'_>) -> Vec<Option<(u128, u128)>> {
        let mut vals: Vec<Option<Interval>> = vec![None; self.types.len()];
        self.loops
            .iter()
            .map(|plan| {
                let plan = plan.as_ref()?;
                for s in &plan.steps {
                    vals[s.var.0 as usize] = self.eval(s, f, &vals);
                }
                let get = |v: VarId| vals[v.0 as usize].filter(|iv| !iv.is_empty());
                let (a, b, st) = (get(plan.start)?, get(plan.end)?, get(plan.step)?);
                let trips = |span: i128, step: i128| -> u128 {
                    if step <= 0 || span <= 0 {
                        0
                    } else {
                        (span as u128).div_ceil(step as u128)
                    }
                };
                let most = if st.hi <= 0 { 0 } else { trips(b.hi - a.lo, st.lo.max(1)) };
                let least = if st.lo <= 0 { 0 } else { trips(b.lo - a.hi, st.hi) };
                Some((least.min(most), most))
            })
            .collect()
    }

    /// For a TMA copy of access `access` ([`fuse_ir::TensorBox`]): the least and the greatest
    /// value of each of `vars` (vars its offset reads) over every lane of every program of the
    /// launch, where the analysis bounds them.
    pub(crate) fn launch_ranges(
        &self,
        access: usize,
        vars: &[VarId],
        f: &LaunchFacts<'_>,
    ) -> Option<Vec<(i128, i128)>> {
        let plan = self.accesses.get(access)?.as_ref()?;
        let mut vals: Vec<Option<Interval>> = vec![None; self.types.len()];
        for s in &plan.steps {
            vals[s.var.0 as usize] = self.eval(s, f, &vals);
        }
        vars.iter().map(|v| vals[v.0 as usize].filter(|iv| !iv.is_empty()).map(|iv| (iv.lo, iv.hi))).collect()
    }

    /// What holds for this launch (see [`Proof`]).
    pub(crate) fn prove(&self, f: &LaunchFacts<'_>) -> Proof {
        let mut proof = Proof::default();
        let mut vals: Vec<Option<Interval>> = vec![None; self.types.len()];
        for (i, plan) in self.accesses.iter().enumerate().take(64) {
            let Some(plan) = plan else { continue };
            if self.proves(plan, f, &mut vals) {
                proof.in_bounds |= 1 << i;
            }
        }
        for (i, plan) in self.masks.iter().enumerate().take(64) {
            let Some(plan) = plan else { continue };
            for s in &plan.steps {
                vals[s.var.0 as usize] = self.eval(s, f, &vals);
            }
            if always(&plan.test, &vals) {
                proof.all_true |= 1 << i;
            }
        }
        proof
    }

    fn proves(&self, plan: &AccessPlan, f: &LaunchFacts<'_>, vals: &mut [Option<Interval>]) -> bool {
        let Some(Some(len)) = f.lens.get(plan.param as usize) else { return false };
        match self.offset_range(plan, f, vals) {
            Some(iv) => iv.is_empty() || (iv.lo >= 0 && iv.hi < i128::from(*len)),
            None => false,
        }
    }

    /// The offsets of an access on the lanes where its mask is true, over every program.
    fn offset_range(
        &self,
        plan: &AccessPlan,
        f: &LaunchFacts<'_>,
        vals: &mut [Option<Interval>],
    ) -> Option<Interval> {
        // Every lane first, then again on the lanes where the mask is true.
        for s in &plan.steps {
            vals[s.var.0 as usize] = self.eval(s, f, vals);
        }
        let mut pinned: Vec<(VarId, Interval)> = Vec::new();
        for n in &plan.narrows {
            let (Some(v), Some(b)) = (vals[n.var.0 as usize], vals[n.bound.0 as usize]) else { continue };
            let limit = if n.upper {
                Interval::new(i128::MIN, b.hi - n.slack)
            } else {
                Interval::new(b.lo + n.slack, i128::MAX)
            };
            let narrowed = match pinned.iter_mut().find(|(p, _)| *p == n.var) {
                Some((_, iv)) => {
                    *iv = iv.meet(limit);
                    continue;
                }
                None => v.meet(limit),
            };
            pinned.push((n.var, narrowed));
        }
        if !pinned.is_empty() {
            for &(v, iv) in &pinned {
                vals[v.0 as usize] = Some(iv);
            }
            for s in &plan.steps {
                if !pinned.iter().any(|(p, _)| *p == s.var) {
                    vals[s.var.0 as usize] = self.eval(s, f, vals);
                }
            }
        }
        vals[plan.offset.0 as usize]
    }

    fn eval(&self, s: &Step, f: &LaunchFacts<'_>, vals: &[Option<Interval>]) -> Option<Interval> {
        let ty = &self.types[s.var.0 as usize];
        let d = ty.dtype;
        let get = |v: VarId| vals[v.0 as usize];
        let iv = match &s.op {
            Op::Counter { start, end, step } => {
                let (a, b) = (get(*start)?, get(*end)?);
                let mut hi = b.hi - 1;
                if let Some(st) = step.and_then(get) {
                    // One start and one step: the values are a + i st < end (monotone in end).
                    if a.lo == a.hi && st.lo == st.hi && st.lo > 0 && b.hi > a.lo {
                        hi = a.lo + (b.hi - 1 - a.lo) / st.lo * st.lo;
                    }
                }
                Interval::new(a.lo, hi)
            }
            Op::Expr(e) => match e {
                Expr::Copy(v) | Expr::Splat(v) => get(*v)?,
                Expr::Lit(Literal::Int(i)) => Interval::point((*i).into()),
                Expr::Lit(Literal::UInt(u)) => Interval::point((*u).into()),
                Expr::Lit(Literal::Bool(b)) => Interval::point((*b).into()),
                Expr::Lit(Literal::Float(_)) => return None,
                Expr::Param(p) => Interval::point((*f.scalars.get(*p as usize)?)?),
                Expr::ConstGeneric(c) => Interval::point((*f.consts.get(*c as usize)?).into()),
                Expr::ProgramId(a) => Interval::new(0, i128::from(*f.grid.get(*a as usize)?) - 1),
                Expr::NumPrograms(a) => Interval::point((*f.grid.get(*a as usize)?).into()),
                Expr::Arange { start } => {
                    let Shape::Tile(l) = &ty.shape else { return None };
                    let n = l.eval(f.consts)?;
                    Interval::new((*start).into(), i128::from(*start) + i128::from(n) - 1)
                }
                Expr::Unary(op, v) => unary(*op, get(*v)?)?,
                Expr::Binary(op, a, b) if !op.is_comparison() => binary(*op, get(*a)?, get(*b)?, d)?,
                // A comparison decided by its operands' intervals is that constant (an `if` on
                // a scalar argument, for the cost); otherwise either.
                Expr::Binary(op, a, b) => match (get(*a), get(*b)) {
                    (Some(x), Some(y)) if !x.is_empty() && !y.is_empty() => {
                        let t = Test::Compare(*op, *a, *b);
                        let mut v = vec![None; self.types.len()];
                        v[a.0 as usize] = Some(x);
                        v[b.0 as usize] = Some(y);
                        if always(&t, &v) {
                            Interval::point(1)
                        } else if always(&negate(&t), &v) {
                            Interval::point(0)
                        } else {
                            range(DType::Bool)?
                        }
                    }
                    _ => range(DType::Bool)?,
                },
                Expr::Cast(v) => {
                    let from = self.types[v.0 as usize].dtype;
                    if from.is_float() {
                        return None;
                    }
                    get(*v)?
                }
                Expr::Where(_, a, b) => get(*a)?.hull(get(*b)?),
                // Broadcast and reshape keep the set of values, and a lane of the result reads
                // the same lane of a narrowed operand (a narrowed var has the access's shape, and
                // no chain of shape operations leads from it back to that shape but a reshape).
                Expr::Broadcast(v) | Expr::Reshape(v) => get(*v)?,
                // A transpose of a square tile would read another lane of a narrowed operand.
                // So would a split or a join (they read other lanes too).
                Expr::Trans(_) | Expr::Split { .. } | Expr::Join(..) => return None,
                Expr::Load { .. }
                | Expr::Reduce(..)
                | Expr::Rand { .. }
                | Expr::ReduceAxis { .. }
                | Expr::ArgReduce { .. }
                | Expr::Dot { .. } => return None,
            },
        };
        fit(d, iv)
    }
}

/// Whether `test` holds for every value in the intervals `vals` (vacuously where one is empty:
/// that code never runs).
fn always(test: &Test, vals: &[Option<Interval>]) -> bool {
    match test {
        Test::And(a, b) => always(a, vals) && always(b, vals),
        Test::Compare(op, a, b) => {
            let (Some(a), Some(b)) = (vals[a.0 as usize], vals[b.0 as usize]) else { return false };
            if a.is_empty() || b.is_empty() {
                return true;
            }
            match op {
                BinaryOp::Lt => a.hi < b.lo,
                BinaryOp::Le => a.hi <= b.lo,
                BinaryOp::Gt => a.lo > b.hi,
                BinaryOp::Ge => a.lo >= b.hi,
                BinaryOp::Eq => a.lo == a.hi && b.lo == b.hi && a.lo == b.lo,
                BinaryOp::Ne => a.hi < b.lo || a.lo > b.hi,
                _ => false,
            }
        }
    }
}

/// The comparison that holds exactly where `t` (a single comparison) does not.
fn negate(t: &Test) -> Test {
    match t {
        Test::Compare(op, a, b) => {
            let op = match op {
                BinaryOp::Lt => BinaryOp::Ge,
                BinaryOp::Le => BinaryOp::Gt,
                BinaryOp::Gt => BinaryOp::Le,
                BinaryOp::Ge => BinaryOp::Lt,
                BinaryOp::Eq => BinaryOp::Ne,
                BinaryOp::Ne => BinaryOp::Eq,
                other => *other,
            };
            Test::Compare(op, *a, *b)
        }
        Test::And(..) => t.clone(),
    }
}

fn unary(op: UnaryOp, a: Interval) -> Option<Interval> {
    if a.is_empty() {
        return Some(a);
    }
    Some(match op {
        UnaryOp::Neg => Interval::new(-a.hi, -a.lo),
        UnaryOp::Abs if a.lo >= 0 => a,
        UnaryOp::Abs if a.hi <= 0 => Interval::new(-a.hi, -a.lo),
        UnaryOp::Abs => Interval::new(0, a.hi.max(-a.lo)),
        _ => return None,
    })
}

fn binary(op: BinaryOp, a: Interval, b: Interval, d: DType) -> Option<Interval> {
    if a.is_empty() || b.is_empty() {
        return Some(Interval::new(1, 0));
    }
    let corners = |f: &dyn Fn(i128, i128) -> Option<i128>| -> Option<Interval> {
        let c = [f(a.lo, b.lo)?, f(a.lo, b.hi)?, f(a.hi, b.lo)?, f(a.hi, b.hi)?];
        Some(Interval::new(*c.iter().min()?, *c.iter().max()?))
    };
    Some(match op {
        BinaryOp::Add => Interval::new(a.lo.checked_add(b.lo)?, a.hi.checked_add(b.hi)?),
        BinaryOp::Sub => Interval::new(a.lo.checked_sub(b.hi)?, a.hi.checked_sub(b.lo)?),
        BinaryOp::Mul => corners(&|x, y| x.checked_mul(y))?,
        // Truncating division by a positive divisor is monotone in each operand, so the
        // corners bound it; a divisor that may be 0 (result 0) or negative is not followed.
        BinaryOp::Div if b.lo >= 1 => corners(&|x, y| Some(x / y))?,
        BinaryOp::Rem if b.lo >= 1 => {
            let m = b.hi - 1; // |a % b| <= b - 1, with the dividend's sign, and |a % b| <= |a|
            if a.lo >= 0 {
                Interval::new(0, a.hi.min(m))
            } else if a.hi <= 0 {
                Interval::new(a.lo.max(-m), 0)
            } else {
                Interval::new(a.lo.max(-m), a.hi.min(m))
            }
        }
        BinaryOp::Max => Interval::new(a.lo.max(b.lo), a.hi.max(b.hi)),
        BinaryOp::Min => Interval::new(a.lo.min(b.lo), a.hi.min(b.hi)),
        BinaryOp::And if d == DType::Bool => Interval::new(0, 1),
        BinaryOp::And if a.lo >= 0 && b.lo >= 0 => Interval::new(0, a.hi.min(b.hi)),
        // Non-negative operands: no bit above the wider one's highest (`cols ^ 1`, a RoPE partner).
        BinaryOp::Or | BinaryOp::Xor if d != DType::Bool && a.lo >= 0 && b.lo >= 0 => {
            let hi = a.hi.max(b.hi);
            Interval::new(0, if hi == 0 { 0 } else { (1i128 << (128 - hi.leading_zeros())) - 1 })
        }
        _ => return None,
    })
}

/// Records where each var is assigned and where each access is.
fn collect(stmts: &[Stmt], block: &mut Vec<(u32, u8)>, defs: &mut [Def], accesses: &mut Vec<Pos>) {
    for (i, s) in stmts.iter().enumerate() {
        let pos = Pos { block: block.clone(), index: i as u32 };
        let mut assign = |v: VarId, def: Def| {
            let slot = &mut defs[v.0 as usize];
            *slot = if matches!(slot, Def::Unassigned) { def } else { Def::Many };
        };
        match s {
            Stmt::Assign { dst, expr } => {
                if let Expr::Load { .. } = expr {
                    accesses.push(pos.clone());
                }
                assign(*dst, Def::Once(pos, expr.clone()));
            }
            Stmt::Store { .. } => accesses.push(pos),
            Stmt::If { then_body, else_body, .. } => {
                block.push((i as u32, 0));
                collect(then_body, block, defs, accesses);
                block.pop();
                block.push((i as u32, 1));
                collect(else_body, block, defs, accesses);
                block.pop();
            }
            Stmt::For { var, start, end, step, body } => {
                assign(*var, Def::Counter(pos, *start, *end, *step));
                block.push((i as u32, 0));
                collect(body, block, defs, accesses);
                block.pop();
            }
        }
    }
}

/// Where each `for` statement is, in program (pre-)order, with its start, end and step; and
/// each `if` statement with its condition.
type LoopAt = (Pos, VarId, VarId, VarId);
fn collect_control(
    stmts: &[Stmt],
    block: &mut Vec<(u32, u8)>,
    loops: &mut Vec<LoopAt>,
    ifs: &mut Vec<(Pos, VarId)>,
) {
    for (i, s) in stmts.iter().enumerate() {
        match s {
            Stmt::If { cond, then_body, else_body } => {
                ifs.push((Pos { block: block.clone(), index: i as u32 }, *cond));
                block.push((i as u32, 0));
                collect_control(then_body, block, loops, ifs);
                block.pop();
                block.push((i as u32, 1));
                collect_control(else_body, block, loops, ifs);
                block.pop();
            }
            Stmt::For { start, end, step, body, .. } => {
                loops.push((Pos { block: block.clone(), index: i as u32 }, *start, *end, *step));
                block.push((i as u32, 0));
                collect_control(body, block, loops, ifs);
                block.pop();
            }
            Stmt::Assign { .. } | Stmt::Store { .. } => {}
        }
    }
}

/// Collects the steps of one access.
struct Builder<'d> {
    defs: &'d [Def],
    steps: Vec<Step>,
    seen: Vec<bool>,
}

impl Builder<'_> {
    /// Adds `v` and what it reads as steps if `v` holds, at `at`, the value its one assignment
    /// gave it (see the module docs); false otherwise.
    fn follow(&mut self, v: VarId, at: &Pos) -> bool {
        let (def_pos, op, reads): (&Pos, Op, Vec<VarId>) = match &self.defs[v.0 as usize] {
            Def::Once(p, e) if p.dominates(at) => (p, Op::Expr(e.clone()), e.operands()),
            Def::Counter(p, start, end, step) if p.encloses(at) => {
                // The step is optional: where it cannot be followed the bound is `end - 1`.
                let step = if self.seen[step.0 as usize] || self.follow(*step, &p.clone()) {
                    Some(*step)
                } else {
                    None
                };
                (p, Op::Counter { start: *start, end: *end, step }, vec![*start, *end])
            }
            _ => return false,
        };
        if self.seen[v.0 as usize] {
            return true;
        }
        // Loaded values are never followed, so a load's offset and mask are not read.
        let reads = match &op {
            Op::Expr(Expr::Load { .. } | Expr::Reduce(..) | Expr::Rand { .. }) => Vec::new(),
            _ => reads,
        };
        let def_pos = def_pos.clone();
        for r in reads {
            if !self.follow(r, &def_pos) {
                return false;
            }
        }
        self.seen[v.0 as usize] = true;
        self.steps.push(Step { var: v, op });
        true
    }

    /// The test of a mask assigned `expr` at `at`: integer comparisons joined by `&`, every
    /// operand followed where the comparison reads it; `None` if it has another form.
    fn test(&mut self, expr: &Expr, at: &Pos) -> Option<Test> {
        let operand = |b: &mut Self, v: VarId| -> Option<Test> {
            let Def::Once(p, e) = &b.defs[v.0 as usize] else { return None };
            if !p.dominates(at) {
                return None;
            }
            let p = p.clone();
            b.test(&e.clone(), &p)
        };
        match *expr {
            // A broadcast or reshape of a tile true on every lane is true on every lane (this is
            // the all-true proof only: narrowings come from `mask`, which does not look through
            // them).
            Expr::Copy(v) | Expr::Splat(v) | Expr::Broadcast(v) | Expr::Reshape(v) => operand(self, v),
            Expr::Binary(BinaryOp::And, a, b) => {
                Some(Test::And(Box::new(operand(self, a)?), Box::new(operand(self, b)?)))
            }
            Expr::Binary(op, a, b) if op.is_comparison() => {
                (self.follow(a, at) && self.follow(b, at)).then_some(Test::Compare(op, a, b))
            }
            _ => None,
        }
    }

    /// The narrowings that mask `m` (read at `at`) implies on its true lanes.
    fn mask(&mut self, m: VarId, at: &Pos, out: &mut Vec<Narrow>) {
        let Def::Once(p, e) = &self.defs[m.0 as usize] else { return };
        if !p.dominates(at) {
            return;
        }
        let p = p.clone();
        match *e {
            Expr::Copy(v) | Expr::Splat(v) => self.mask(v, &p, out),
            Expr::Binary(BinaryOp::And, a, b) => {
                self.mask(a, &p, out);
                self.mask(b, &p, out);
            }
            Expr::Binary(op, a, b) if op.is_comparison() => {
                // Both sides must be followed where the comparison read them.
                if !(self.follow(a, &p) && self.follow(b, &p)) {
                    return;
                }
                let narrow = |var, bound, upper, slack| Narrow { var, bound, upper, slack };
                match op {
                    BinaryOp::Lt => out.extend([narrow(a, b, true, 1), narrow(b, a, false, 1)]),
                    BinaryOp::Le => out.extend([narrow(a, b, true, 0), narrow(b, a, false, 0)]),
                    BinaryOp::Gt => out.extend([narrow(a, b, false, 1), narrow(b, a, true, 1)]),
                    BinaryOp::Ge => out.extend([narrow(a, b, false, 0), narrow(b, a, true, 0)]),
                    BinaryOp::Eq => out.extend([
                        narrow(a, b, true, 0),
                        narrow(a, b, false, 0),
                        narrow(b, a, true, 0),
                        narrow(b, a, false, 0),
                    ]),
                    _ => {}
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{binary, Interval};
    use fuse_ir::{BinaryOp, DType};

    #[test]
    fn or_and_xor_of_non_negative_values_stay_below_the_next_power_of_two() {
        for op in [BinaryOp::Or, BinaryOp::Xor] {
            for (a, b) in [((0, 127), (1, 1)), ((3, 100), (0, 5)), ((0, 0), (0, 0)), ((0, 128), (0, 1))] {
                let got = binary(op, Interval::new(a.0, a.1), Interval::new(b.0, b.1), DType::I32).unwrap();
                for x in a.0..=a.1 {
                    for y in b.0..=b.1 {
                        let v = if op == BinaryOp::Or { x | y } else { x ^ y };
                        assert!(got.lo <= v && v <= got.hi, "{op:?} {a:?} {b:?}: {v} outside {got:?}");
                    }
                }
            }
        }
        // Negative operands are not followed.
        assert!(binary(BinaryOp::Xor, Interval::new(-1, 3), Interval::new(1, 1), DType::I32).is_none());
    }
}
