//! What one launch costs, counted from the IR: the compulsory bytes (each buffer's touched range
//! read or written once) and the floating-point work, so the arithmetic intensity, for a roofline
//! ([`crate::KernelSpec::cost`]).
//!
//! **Bytes.** A buffer's touched range is the hull of the offsets of its loads (stores), on the
//! lanes whose mask is true, over every program of the launch: the intervals of the launch-time
//! in-bounds proof (`bounds.rs`), clipped to the buffer. Its bytes are that range times the
//! element size, once if it is only read or only written, twice if both (an in-place update).
//! Where an access's offsets cannot be bounded (they depend on loaded values, a float, a possible
//! wrap-around), the whole buffer counts and the buffer is flagged `proven: false`. A hull counts
//! the gaps of a strided access too (a buffer read at every other row counts every row).
//!
//! **FLOPs**, per lane of the statement's result (a scalar statement runs once per program), times
//! the programs, times each enclosing loop's trip count:
//! * 1 for each float `+ - * / %`, `maximum`, `minimum`, unary `-`, `abs`, `floor`, `ceil`;
//! * a *transcendental* (counted in [`Cost::transcendentals`], not in [`Cost::flops`]) for each
//!   `exp exp2 log log2 sqrt rsqrt erf tanh sigmoid sin cos`;
//! * a float reduction of `L` lanes to `R` results (`sum`, `max`, `min`, `argmax`, `argmin`,
//!   whole or along an axis): `L - R`;
//! * `dot` of `[M, K]` by `[K, N]`: `2 M N K` (also in [`Cost::dot_flops`]), whatever the
//!   operands' type (i8 `dot` counts integer operations the same way: TOP/s);
//! * nothing for integer and bool arithmetic (addressing, masks), comparisons, `where_`, casts,
//!   loads, stores and shape moves;
//! * `rand`: nothing, but [`Cost::philox_calls`] counts one Philox4x32-10 per 4 lanes (`rand16`:
//!   per 8), as the GPU's shared calls do.
//!
//! A loop whose trip count is known at launch (its start, end and step are const generics,
//! scalar arguments, `program_id`s and arithmetic on those) counts exactly; one that varies
//! between programs counts its largest trip count for every program, and one that cannot be
//! bounded counts once; either clears [`Cost::exact`] and says so in [`Cost::notes`]. An `if`
//! whose condition the launch decides (`if gelu != 0` on a scalar argument) counts the branch
//! taken, and the accesses of the other count no bytes; one that varies between programs counts
//! its costlier branch (and clears `exact` when the branches differ).
//!
//! Lanes are a tile's lanes, masked-off ones included (the GPU computes them too): add_mul over
//! `n = 1000` with a 1024-lane tile counts 2 x 1024 FLOPs and 16 x 1000 bytes.
//!
//! Bottom layer (a pure analysis of the IR): imports `bounds`, `config` and `error`; the
//! conversions of buffers into [`CostArg`]s are beside the buffers (`memory.rs`).
use crate::bounds::{BoundsPlan, LaunchFacts};
use crate::config::Grid;
use crate::error::{Error, Result};
use fuse_ir::{BinaryOp, DType, Expr, Kernel, ParamKind, Shape, Stmt, UnaryOp};
use std::cell::RefCell;

/// One launch argument as [`crate::KernelSpec::cost`] needs it: a buffer's length, or a scalar's
/// value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CostArg {
    /// A buffer (for a pointer parameter) of this many elements.
    Len(u64),
    /// An integer scalar (`i32 i64 u32 u64`).
    Int(i128),
    /// An `f32` scalar (its value does not change the cost).
    F32(f32),
}

macro_rules! int_cost_arg {
    ($($t:ty),*) => {$(
        impl From<$t> for CostArg {
            fn from(x: $t) -> CostArg {
                CostArg::Int(x.into())
            }
        }
    )*};
}
int_cost_arg!(i32, i64, u32, u64);
impl From<f32> for CostArg {
    fn from(x: f32) -> CostArg {
        CostArg::F32(x)
    }
}

/// One buffer's compulsory traffic in a launch.
#[derive(Clone, Debug, PartialEq)]
pub struct BufferTraffic {
    /// The parameter's name.
    pub name: String,
    /// Its element type.
    pub dtype: DType,
    /// The touched elements `[lo, hi)`: an empty range (`lo == hi`) for a buffer never accessed.
    pub range: (u64, u64),
    /// Whether the kernel loads from it / stores to it.
    pub read: bool,
    /// See `read`.
    pub written: bool,
    /// `false` where some access could not be bounded and the whole buffer was counted.
    pub proven: bool,
    /// `(hi - lo) * element size * (read + written)`.
    pub bytes: u64,
}

/// What one launch costs: see the [module docs](self) for the counting rules.
#[derive(Clone, Debug, PartialEq)]
pub struct Cost {
    /// Programs in the grid.
    pub programs: u64,
    /// Per pointer parameter, in parameter order.
    pub buffers: Vec<BufferTraffic>,
    /// Floating-point operations (element-wise, reductions and `dot`), transcendentals excluded.
    pub flops: u64,
    /// The part of `flops` that is `dot` (2 M N K each).
    pub dot_flops: u64,
    /// Transcendental function evaluations (`exp`, `erf`, `rsqrt`, ...).
    pub transcendentals: u64,
    /// Philox4x32-10 calls of `rand` / `rand16`.
    pub philox_calls: u64,
    /// Whether every range was proven and every loop's trip count was the same in every program.
    pub exact: bool,
    /// What was approximated, and how.
    pub notes: Vec<String>,
}

impl Cost {
    /// Bytes read from memory (each buffer's range once).
    pub fn bytes_read(&self) -> u64 {
        self.buffers.iter().filter(|b| b.read).map(|b| b.bytes / (1 + u64::from(b.written))).sum()
    }
    /// Bytes written to memory (each buffer's range once).
    pub fn bytes_written(&self) -> u64 {
        self.buffers.iter().filter(|b| b.written).map(|b| b.bytes / (1 + u64::from(b.read))).sum()
    }
    /// Compulsory bytes, read plus written.
    pub fn bytes(&self) -> u64 {
        self.buffers.iter().map(|b| b.bytes).sum()
    }
    /// Arithmetic intensity: [`Cost::flops`] per compulsory byte (0 for a launch that moves none).
    pub fn intensity(&self) -> f64 {
        let b = self.bytes();
        if b == 0 {
            0.0
        } else {
            self.flops as f64 / b as f64
        }
    }
}

/// Work per execution of a statement list (per program), before the grid multiplies it.
#[derive(Clone, Copy, Default, Debug, PartialEq)]
struct Work {
    flops: u128,
    dot: u128,
    transcendentals: u128,
    philox: u128,
}

impl Work {
    fn add(&mut self, o: Work, times: u128) {
        self.flops += o.flops * times;
        self.dot += o.dot * times;
        self.transcendentals += o.transcendentals * times;
        self.philox += o.philox * times;
    }
    fn max(self, o: Work) -> Work {
        Work {
            flops: self.flops.max(o.flops),
            dot: self.dot.max(o.dot),
            transcendentals: self.transcendentals.max(o.transcendentals),
            philox: self.philox.max(o.philox),
        }
    }
}

struct Counter<'a> {
    k: &'a Kernel,
    consts: &'a [u64],
    trips: Vec<Option<(u128, u128)>>,
    next_loop: usize,
    branches: Vec<Option<bool>>,
    next_if: usize,
    /// Per access in [`Kernel::accesses`] order: whether it is in code the launch runs.
    live_accesses: Vec<bool>,
    notes: Vec<String>,
    exact: bool,
}

impl Counter<'_> {
    fn lanes(&self, shape: &Shape) -> Result<u128> {
        match shape.len() {
            None => Ok(1),
            Some(l) => l.eval(self.consts).map(u128::from).ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "a tile length of `{}` needs a const generic value",
                    self.k.name
                ))
            }),
        }
    }

    fn dims(&self, v: fuse_ir::VarId) -> Result<Vec<u128>> {
        self.k
            .ty(v)
            .shape
            .dims()
            .iter()
            .map(|l| l.eval(self.consts).map(u128::from))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "a tile length of `{}` needs a const generic value",
                    self.k.name
                ))
            })
    }

    /// The work of `body` per execution; `live` false for a branch the launch never takes
    /// (walked only to keep the loop, branch and access indices in step).
    fn stmts(&mut self, body: &[Stmt], live: bool) -> Result<Work> {
        let mut w = Work::default();
        for s in body {
            match s {
                Stmt::Assign { dst, expr } => {
                    if let Expr::Load { .. } = expr {
                        self.live_accesses.push(live);
                    }
                    let ty = self.k.ty(*dst);
                    let lanes = self.lanes(&ty.shape)?;
                    w.add(self.expr(expr, lanes)?, 1);
                }
                Stmt::Store { .. } => self.live_accesses.push(live),
                Stmt::If { then_body, else_body, .. } => {
                    let i = self.next_if;
                    self.next_if += 1;
                    let taken = self.branches.get(i).copied().flatten();
                    let a = self.stmts(then_body, live && taken != Some(false))?;
                    let b = self.stmts(else_body, live && taken != Some(true))?;
                    match taken {
                        Some(true) => w.add(a, 1),
                        Some(false) => w.add(b, 1),
                        None => {
                            if live && a != b {
                                self.exact = false;
                                self.notes
                                    .push("an `if` not decided at launch counts its costlier branch".into());
                            }
                            w.add(a.max(b), 1)
                        }
                    }
                }
                Stmt::For { var, body, .. } => {
                    let i = self.next_loop;
                    self.next_loop += 1;
                    let name = &self.k.vars[var.0 as usize].name;
                    let times = match self.trips.get(i).copied().flatten() {
                        Some((least, most)) => {
                            if least != most && live {
                                self.exact = false;
                                self.notes.push(format!(
                                    "the loop over `{name}` runs {least} to {most} times per program: counted {most}"
                                ));
                            }
                            most
                        }
                        None => {
                            if live {
                                self.exact = false;
                                self.notes.push(format!(
                                    "the trip count of the loop over `{name}` is not known at launch: counted once"
                                ));
                            }
                            1
                        }
                    };
                    let inner = self.stmts(body, live)?;
                    w.add(inner, times);
                }
            }
        }
        if !live {
            return Ok(Work::default());
        }
        Ok(w)
    }

    fn expr(&self, e: &Expr, lanes: u128) -> Result<Work> {
        let mut w = Work::default();
        let is_float = |v: fuse_ir::VarId| self.k.ty(v).dtype.is_float();
        match e {
            Expr::Binary(op, a, _) if is_float(*a) => {
                if matches!(
                    op,
                    BinaryOp::Add
                        | BinaryOp::Sub
                        | BinaryOp::Mul
                        | BinaryOp::Div
                        | BinaryOp::Rem
                        | BinaryOp::Max
                        | BinaryOp::Min
                ) {
                    w.flops = lanes;
                }
            }
            Expr::Unary(op, a) if is_float(*a) => match op {
                UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Floor | UnaryOp::Ceil => w.flops = lanes,
                UnaryOp::Not => {}
                _ => w.transcendentals = lanes,
            },
            Expr::Reduce(_, src) | Expr::ReduceAxis { src, .. } if is_float(*src) => {
                let l = self.lanes(&self.k.ty(*src).shape)?;
                w.flops = l.saturating_sub(lanes);
            }
            Expr::ArgReduce { src, .. } if is_float(*src) => {
                let l = self.lanes(&self.k.ty(*src).shape)?;
                w.flops = l.saturating_sub(lanes);
            }
            Expr::Dot { a, b, .. } => {
                let (ad, bd) = (self.dims(*a)?, self.dims(*b)?);
                if let ([m, kk], [_, n]) = (ad.as_slice(), bd.as_slice()) {
                    w.flops = 2 * m * n * kk;
                    w.dot = w.flops;
                }
            }
            Expr::Rand { width, .. } => w.philox = lanes.div_ceil(u128::from(width.lanes_per_call())),
            _ => {}
        }
        Ok(w)
    }
}

pub(crate) fn cost(
    k: &Kernel,
    bounds: &BoundsPlan,
    consts: &[u64],
    grid: Grid,
    args: &[CostArg],
) -> Result<Cost> {
    if consts.len() != k.consts.len() {
        return Err(Error::InvalidArgument(format!(
            "`{}` has {} const generics, {} given",
            k.name,
            k.consts.len(),
            consts.len()
        )));
    }
    if args.len() != k.params.len() {
        return Err(Error::InvalidArgument(format!(
            "`{}` takes {} arguments, {} given",
            k.name,
            k.params.len(),
            args.len()
        )));
    }
    let LaunchValues { scalars, lens } = launch_values(k, args)?;
    let g = [grid.x, grid.y, grid.z];
    let facts = LaunchFacts { consts, grid: g, scalars: &scalars, lens: &lens };
    let programs = u64::from(grid.x) * u64::from(grid.y) * u64::from(grid.z);
    let mut c = Counter {
        k,
        consts,
        trips: bounds.trip_counts(&facts),
        next_loop: 0,
        branches: bounds.branches(&facts),
        next_if: 0,
        live_accesses: Vec::new(),
        notes: Vec::new(),
        exact: true,
    };
    let per_program = c.stmts(&k.body, true)?;

    // Buffers: the hull of each one's access ranges.
    let ranges = bounds.access_ranges(&facts);
    let (accesses, stores) = (k.accesses(), store_flags(k));
    let mut buffers = Vec::new();
    let mut exact = c.exact;
    let mut notes = std::mem::take(&mut c.notes);
    notes.dedup();
    for (i, p) in k.params.iter().enumerate() {
        let ParamKind::Ptr { elem, .. } = p.kind else { continue };
        // This buffer's accesses on the paths the launch runs: whether each is a store, and its
        // offsets' range.
        let all = accesses.iter().zip(&ranges).zip(&stores).zip(&c.live_accesses);
        let this_buffer = all
            .filter(|&(((a, _), _), &live)| live && a.param as usize == i)
            .map(|(((_, range), &store), _)| (store, *range));
        let traffic = buffer_traffic(&p.name, elem, lens[i].unwrap_or(0), this_buffer);
        if !traffic.proven {
            exact = false;
            notes.push(format!(
                "`{}`: an access's offsets cannot be bounded at launch: the whole buffer counted",
                p.name
            ));
        }
        buffers.push(traffic);
    }
    let total = |x: u128| u64::try_from(x * u128::from(programs)).unwrap_or(u64::MAX);
    Ok(Cost {
        programs,
        buffers,
        flops: total(per_program.flops),
        dot_flops: total(per_program.dot),
        transcendentals: total(per_program.transcendentals),
        philox_calls: total(per_program.philox),
        exact,
        notes,
    })
}

/// Per parameter, a launch's integer scalar or buffer length (`None` for the other kinds), as
/// [`LaunchFacts`] takes them.
struct LaunchValues {
    scalars: Vec<Option<i128>>,
    lens: Vec<Option<u64>>,
}

/// The [`LaunchValues`] of `args`, each checked against its parameter's kind.
fn launch_values(k: &Kernel, args: &[CostArg]) -> Result<LaunchValues> {
    let mut scalars = Vec::with_capacity(args.len());
    let mut lens = Vec::with_capacity(args.len());
    for (p, a) in k.params.iter().zip(args) {
        let (s, l) = match (p.kind, a) {
            (ParamKind::Ptr { .. }, CostArg::Len(n)) => (None, Some(*n)),
            (ParamKind::Scalar(d), CostArg::Int(v)) if d.is_int() => (Some(*v), None),
            (ParamKind::Scalar(DType::F32), CostArg::F32(_)) => (None, None),
            (kind, a) => {
                let want = match kind {
                    ParamKind::Ptr { .. } => "a buffer length (`CostArg::Len`, `(&buf).into()`)".to_string(),
                    ParamKind::Scalar(d) => format!("a {d} value"),
                };
                return Err(Error::InvalidArgument(format!(
                    "`{}`: parameter `{}` needs {want}, found {a:?}",
                    k.name, p.name
                )));
            }
        };
        scalars.push(s);
        lens.push(l);
    }
    Ok(LaunchValues { scalars, lens })
}

/// The traffic of buffer `name` (`len` elements of `elem`) from its live accesses, each given
/// as whether it is a store and its offsets' range (`None`: unbounded, so the whole buffer).
fn buffer_traffic(
    name: &str,
    elem: DType,
    len: u64,
    accesses: impl Iterator<Item = (bool, Option<(i128, i128)>)>,
) -> BufferTraffic {
    let (mut read, mut written, mut proven) = (false, false, true);
    let mut hull: Option<(i128, i128)> = None;
    for (store, r) in accesses {
        if store {
            written = true;
        } else {
            read = true;
        }
        let (lo, hi) = match r {
            Some((lo, hi)) if lo > hi => continue, // never runs
            Some((lo, hi)) => (lo.max(0), hi.min(i128::from(len) - 1)),
            None => {
                proven = false;
                (0, i128::from(len) - 1)
            }
        };
        if lo > hi {
            continue;
        }
        hull = Some(match hull {
            None => (lo, hi),
            Some((a, b)) => (a.min(lo), b.max(hi)),
        });
    }
    let range = hull.map_or((0, 0), |(lo, hi)| (lo as u64, hi as u64 + 1));
    let bytes = (range.1 - range.0) * elem.size_bytes() as u64 * (u64::from(read) + u64::from(written));
    BufferTraffic { name: name.to_string(), dtype: elem, range, read, written, proven, bytes }
}

/// Per access of [`Kernel::accesses`] (the same walk, so the same order): whether it is a store.
fn store_flags(k: &Kernel) -> Vec<bool> {
    let mut out = Vec::new();
    k.visit_stmts(&mut |s| match s {
        Stmt::Assign { expr: Expr::Load { .. }, .. } => out.push(false),
        Stmt::Store { .. } => out.push(true),
        _ => {}
    });
    out
}

/// A recorded launch: the kernel's name and its cost.
pub type Recorded = (&'static str, Result<Cost>);

thread_local! {
    /// The launches of this thread since [`record_costs`], while recording.
    static RECORDED: RefCell<Option<Vec<Recorded>>> = const { RefCell::new(None) };
}

/// Starts recording the [`Cost`] of every launch this thread makes (through
/// [`crate::launch`], so every generated launcher), dropping any recorded before; for benches
/// that plot a roofline of whatever a closure launches. [`take_recorded_costs`] stops.
pub fn record_costs() {
    RECORDED.with(|r| *r.borrow_mut() = Some(Vec::new()));
}

/// Stops recording and returns each launch's kernel name and cost since [`record_costs`] (a
/// cost that could not be computed: its error).
pub fn take_recorded_costs() -> Vec<Recorded> {
    RECORDED.with(|r| r.borrow_mut().take()).unwrap_or_default()
}

/// Whether this thread records the costs of its launches ([`record_costs`]).
pub(crate) fn recording() -> bool {
    RECORDED.with(|r| r.borrow().is_some())
}

/// Records one launch of kernel `name` and its cost (while [`recording`]).
pub(crate) fn record(name: &'static str, cost: Result<Cost>) {
    RECORDED.with(|r| {
        if let Some(v) = r.borrow_mut().as_mut() {
            v.push((name, cost));
        }
    });
}
