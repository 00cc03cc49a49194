//! A small affine analysis: which integer scalars are known to be divisible by which powers of
//! two, and which integer tiles are `s + element_index` for a uniform `s` ("contiguous").
//! Contiguous offsets with a suitably divisible `s` make VEC-element chunks contiguous and
//! VEC-aligned, which is what licenses vector memory access and the one-Philox-per-4 path.
//!
//! Divisibility is symbolic: const generics and `FUSE_DIV16_<p>` facts are only known to the C
//! preprocessor, so a divisor is a `min` of products of atoms, printed as a preprocessor
//! expression. Facts are flow-insensitive (the meet over every assignment of a var) and are
//! found by an optimistic fixed point, which is sound because every fact is a property of values.
use super::layout::{broadcast_kind, BroadcastKind as Kind};
use fuse_ir::{BinaryOp, DType, Expr, Kernel, Literal, ParamKind, Shape, Stmt, UnaryOp, VarId};

/// Divisors are only tracked up to 2^CAP: vector widths and the Philox group need at most 16.
const CAP: u8 = 6;
const MAX_CONSTS: usize = 2;
const MAX_TERMS: usize = 4;

/// A product `2^log2 * consts... * (FUSE_DIV16_p ? 2^l : 1)...` (`l` is 4 for the parameter
/// itself, less for a quotient of it); every factor is a power of two ≥ 1.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(in crate::emit_cuda) struct Term {
    pub(in crate::emit_cuda) log2: u8,
    pub(in crate::emit_cuda) consts: Vec<u32>,
    pub(in crate::emit_cuda) div16: Vec<(u32, u8)>,
}

impl Term {
    fn lit(log2: u8) -> Term {
        Term { log2: log2.min(CAP), consts: Vec::new(), div16: Vec::new() }
    }

    fn mul(&self, o: &Term) -> Term {
        let mut consts = [self.consts.clone(), o.consts.clone()].concat();
        consts.sort_unstable();
        // Dropping a factor ≥ 1 only lowers the bound, so truncation is sound.
        consts.truncate(MAX_CONSTS);
        let mut div16 = [self.div16.clone(), o.div16.clone()].concat();
        div16.sort_unstable();
        div16.dedup();
        div16.truncate(MAX_CONSTS);
        Term { log2: (self.log2 + o.log2).min(CAP), consts, div16 }
    }

    /// A bound for `value / 2^k` (an exact quotient when the bound holds; otherwise the bound
    /// claims only what remains): from the literal factor first, then from a lone `FUSE_DIV16_`
    /// factor; anything else bounds the quotient by 1.
    fn shr(&self, k: u8) -> Term {
        if self.log2 >= k {
            return Term { log2: self.log2 - k, ..self.clone() };
        }
        let rest = k - self.log2;
        match (self.consts.as_slice(), self.div16.as_slice()) {
            ([], [(p, l)]) if *l >= rest => {
                let div16 = if *l > rest { vec![(*p, l - rest)] } else { Vec::new() };
                Term { log2: 0, consts: Vec::new(), div16 }
            }
            _ => Term::lit(0),
        }
    }

    /// `self <= o` for every value of the symbols.
    fn le(&self, o: &Term) -> bool {
        self.log2 <= o.log2 && sub_multiset(&self.consts, &o.consts) && sub_multiset(&self.div16, &o.div16)
    }
}

fn sub_multiset<T: PartialEq + Clone>(a: &[T], b: &[T]) -> bool {
    let mut b = b.to_vec();
    a.iter().all(|x| match b.iter().position(|y| y == x) {
        Some(i) => {
            b.remove(i);
            true
        }
        None => false,
    })
}

/// A lower bound on the power of two dividing a value: the minimum of its terms.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Div {
    pub(in crate::emit_cuda) terms: Vec<Term>,
}

impl Div {
    pub fn one() -> Div {
        Div { terms: vec![Term::lit(0)] }
    }

    fn of_int(v: i128) -> Div {
        let log2 = if v == 0 { CAP } else { (v.trailing_zeros() as u8).min(CAP) };
        Div { terms: vec![Term::lit(log2)] }
    }

    /// No bound (blocks of any power-of-two size up to 2^CAP).
    fn any_block() -> Div {
        Div { terms: vec![Term::lit(CAP)] }
    }

    /// A bound for blocks of `len` lanes: every power of two dividing `len` (a length with a
    /// division, `BLOCK / 2`, is taken as 1: never a wider block).
    fn of_len(len: &fuse_ir::Len) -> Div {
        if len.log2 < 0 {
            return Div::one();
        }
        let consts: Vec<u32> = len.consts.iter().copied().take(MAX_CONSTS).collect();
        Div::normalise(vec![Term { log2: (len.log2 as u8).min(CAP), consts, div16: Vec::new() }])
    }

    fn atom_const(c: u32) -> Div {
        Div { terms: vec![Term { log2: 0, consts: vec![c], div16: Vec::new() }] }
    }

    fn atom_div16(p: u32) -> Div {
        Div { terms: vec![Term { log2: 0, consts: Vec::new(), div16: vec![(p, 4)] }] }
    }

    fn normalise(mut terms: Vec<Term>) -> Div {
        terms.sort();
        terms.dedup();
        // Drop terms that another term bounds from below (`le` is a partial order on these).
        let keep: Vec<Term> = terms
            .iter()
            .enumerate()
            .filter(|(i, t)| !terms.iter().enumerate().any(|(j, o)| j != *i && o.le(t)))
            .map(|(_, t)| t.clone())
            .collect();
        if keep.len() > MAX_TERMS {
            // Every term is at least its literal part.
            let lo = keep.iter().map(|t| t.log2).min().unwrap_or(0);
            return Div { terms: vec![Term::lit(lo)] };
        }
        Div { terms: keep }
    }

    pub fn min(&self, o: &Div) -> Div {
        Div::normalise([self.terms.clone(), o.terms.clone()].concat())
    }

    /// A bound for the exact quotient by `2^k`.
    fn shr(&self, k: u8) -> Div {
        Div::normalise(self.terms.iter().map(|t| t.shr(k)).collect())
    }

    fn mul(&self, o: &Div) -> Div {
        Div::normalise(self.terms.iter().flat_map(|a| o.terms.iter().map(move |b| a.mul(b))).collect())
    }
}

/// What is known about a var's values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fact {
    /// Not assigned yet (optimistic start of the fixed point).
    Top,
    /// An integer scalar divisible by the bound.
    Int(Div),
    /// An integer tile whose every lane equals one scalar divisible by the bound.
    Uniform(Div),
    /// An integer tile with `t[e] = s + e` (element index e), `s` divisible by the bound.
    Contig(Div),
    /// `a % b` of a [`Fact::Contig`] `a` by a uniform `b`: along the element index every step is
    /// +1 or a jump down (where `a` crosses a multiple of `b`), and every VEC-aligned chunk starts
    /// at a multiple of VEC when VEC divides the bound. So a chunk whose last value is its first
    /// plus VEC - 1 is consecutive: one subtraction licenses a vector access (the bias `offs % h`).
    ContigRem(Div),
    /// An integer tile whose every lane is a multiple of the bound (`rows * n_cols`).
    Mult(Div),
    /// An integer tile constant on every aligned block of V lanes for V dividing the second bound
    /// (a row's `C` columns), every lane a multiple of the first: a `[R, 1]` tile broadcast along
    /// the columns of `[R, C]` (`rows * n_cols`).
    BlockUniform(Div, Div),
    /// An integer tile consecutive within every aligned block of V lanes for V dividing the second
    /// bound, each block starting at a multiple of V when V also divides the first: `row_base +
    /// cols` over a `[R, C]` tile.
    ChunkContig(Div, Div),
    /// `t[e] = u[e ^ x]` for a [`Fact::ChunkContig`] (or contiguous) `u` with these bounds and a
    /// constant `x`: when VEC divides both bounds and `x < VEC`, every VEC-aligned chunk is a
    /// permutation of one aligned run of consecutive offsets (lane `v` holds the run's `v ^ x`),
    /// so a load reads the run as one vector and permutes it in registers (a RoPE partner `c ^ 1`).
    ChunkXor(Div, Div, u32),
    /// `t[e] = u[e] / 2` for a non-negative [`Fact::ChunkContig`] (or contiguous) `u`: when VEC
    /// divides the block bound, every VEC-aligned chunk holds an aligned run of VEC / 2 consecutive
    /// values, each twice (lane `v` the run's `v / 2`), the run starting at a multiple of VEC / 2
    /// when VEC / 2 divides the first bound. A load reads the run as one vector of VEC / 2 elements
    /// and repeats each in registers (GPT-J's RoPE angle `cols / 2` into a cos/sin row).
    ChunkHalf(Div, Div),
    /// A bool tile that is constant on every VEC-aligned chunk when VEC divides every listed
    /// bound (none: always), e.g. `cols < n` for a contiguous `cols` and `n` a multiple of VEC.
    /// Its lanes may then be read at the chunk's first slot, so one predicate serves the chunk.
    ChunkUniform(Vec<Div>),
    Unknown,
}

impl Fact {
    fn meet(&self, o: &Fact) -> Fact {
        match (self, o) {
            (Fact::Top, x) | (x, Fact::Top) => x.clone(),
            (Fact::Int(a), Fact::Int(b)) => Fact::Int(a.min(b)),
            (Fact::Uniform(a), Fact::Uniform(b)) => Fact::Uniform(a.min(b)),
            (Fact::Contig(a), Fact::Contig(b)) => Fact::Contig(a.min(b)),
            (
                x @ (Fact::ChunkContig(..) | Fact::Contig(_)),
                y @ (Fact::ChunkContig(..) | Fact::Contig(_)),
            ) => {
                let ((a, ab), (b, bb)) = (x.chunk_contig().unwrap(), y.chunk_contig().unwrap());
                Fact::ChunkContig(a.min(&b), ab.min(&bb))
            }
            (Fact::ContigRem(a) | Fact::Contig(a), Fact::ContigRem(b) | Fact::Contig(b)) => {
                Fact::ContigRem(a.min(b))
            }
            (
                x @ (Fact::BlockUniform(..) | Fact::Uniform(_)),
                y @ (Fact::BlockUniform(..) | Fact::Uniform(_)),
            ) => {
                let ((a, ab), (b, bb)) = (x.block().unwrap(), y.block().unwrap());
                Fact::BlockUniform(a.min(&b), ab.min(&bb))
            }
            (x, y)
                if x.lane_div().is_some()
                    && y.lane_div().is_some()
                    && !x.is_scalar_fact()
                    && !y.is_scalar_fact() =>
            {
                Fact::Mult(x.lane_div().unwrap().min(&y.lane_div().unwrap()))
            }
            (Fact::ChunkXor(a, ab, x), Fact::ChunkXor(b, bb, y)) if x == y => {
                Fact::ChunkXor(a.min(b), ab.min(bb), *x)
            }
            (Fact::ChunkHalf(a, ab), Fact::ChunkHalf(b, bb)) => Fact::ChunkHalf(a.min(b), ab.min(bb)),
            (Fact::ChunkUniform(a), Fact::ChunkUniform(b)) => match union(a, b) {
                u if u.len() <= MAX_TERMS => Fact::ChunkUniform(u),
                _ => Fact::Unknown,
            },
            _ => Fact::Unknown,
        }
    }

    /// A bound dividing every lane of an integer tile whose lanes are each known to be multiples
    /// (uniform, multiple, block-uniform).
    fn lane_div(&self) -> Option<Div> {
        match self {
            Fact::Int(d) | Fact::Uniform(d) | Fact::Mult(d) | Fact::BlockUniform(d, _) => Some(d.clone()),
            _ => None,
        }
    }

    /// A value constant on aligned blocks (a scalar, uniform or block-uniform): the divisor of
    /// its lanes and the bound of the block sizes (unbounded for a uniform value).
    fn block(&self) -> Option<(Div, Div)> {
        match self {
            Fact::Int(d) | Fact::Uniform(d) => Some((d.clone(), Div::any_block())),
            Fact::BlockUniform(d, b) => Some((d.clone(), b.clone())),
            _ => None,
        }
    }

    /// Consecutive on aligned blocks (contiguous or chunk-contiguous): the start divisor and the
    /// bound of the block sizes.
    fn chunk_contig(&self) -> Option<(Div, Div)> {
        match self {
            Fact::Contig(s) => Some((s.clone(), Div::any_block())),
            Fact::ChunkContig(s, b) => Some((s.clone(), b.clone())),
            _ => None,
        }
    }

    fn is_scalar_fact(&self) -> bool {
        matches!(self, Fact::Int(_))
    }

    /// The divisibility of a uniform value (scalar or splat tile), if it is one.
    pub fn uniform_div(&self) -> Option<Div> {
        match self {
            Fact::Int(d) | Fact::Uniform(d) => Some(d.clone()),
            _ => None,
        }
    }
}

pub struct Facts {
    pub vars: Vec<Fact>,
    /// Per var: its value when it is an integer constant assigned once (`x` of `c ^ x`).
    constants: Vec<Option<i128>>,
    /// Per var: assigned once, as `arange(start, ..)` with `start >= 0` (so never negative).
    naturals: Vec<bool>,
}

impl Facts {
    pub fn analyse(k: &Kernel) -> Facts {
        let mut f =
            Facts { vars: vec![Fact::Top; k.vars.len()], constants: constants(k), naturals: naturals(k) };
        for _ in 0..64 {
            let before = f.vars.clone();
            f.pass(k, &k.body);
            if f.vars == before {
                f.vars.iter_mut().for_each(|v| {
                    if *v == Fact::Top {
                        *v = Fact::Unknown;
                    }
                });
                return f;
            }
        }
        // No fixed point (cannot happen with the caps above): know nothing, which is always sound.
        Facts { vars: vec![Fact::Unknown; k.vars.len()], constants: Vec::new(), naturals: Vec::new() }
    }

    pub fn get(&self, v: VarId) -> &Fact {
        &self.vars[v.0 as usize]
    }

    fn constant(&self, v: VarId) -> Option<i128> {
        self.constants.get(v.0 as usize).copied().flatten()
    }

    fn is_natural(&self, v: VarId) -> bool {
        self.naturals.get(v.0 as usize).copied().unwrap_or(false)
    }

    fn set(&mut self, v: VarId, fact: Fact) {
        let i = v.0 as usize;
        self.vars[i] = self.vars[i].meet(&fact);
    }

    fn pass(&mut self, k: &Kernel, stmts: &[Stmt]) {
        for s in stmts {
            match s {
                Stmt::Assign { dst, expr } => {
                    let fact = self.transfer(k, *dst, expr);
                    self.set(*dst, fact);
                }
                Stmt::Store { .. } => {}
                Stmt::If { then_body, else_body, .. } => {
                    self.pass(k, then_body);
                    self.pass(k, else_body);
                }
                Stmt::For { var, start, step, body, .. } => {
                    // Values are start + i * step.
                    let fact = match (self.get(*start), self.get(*step)) {
                        (Fact::Top, _) | (_, Fact::Top) => Fact::Top,
                        (Fact::Int(a), Fact::Int(b)) => Fact::Int(a.min(b)),
                        _ => Fact::Unknown,
                    };
                    let fact = if is_int(k.ty(*var).dtype) { fact } else { Fact::Unknown };
                    self.set(*var, fact);
                    self.pass(k, body);
                }
            }
        }
    }

    fn transfer(&self, k: &Kernel, dst: VarId, e: &Expr) -> Fact {
        let fact = self.transfer_expr(k, dst, e);
        // Scalars broadcast into tiles: a uniform tile, never a scalar fact on a tile var.
        match (k.ty(dst).shape.is_scalar(), fact) {
            (false, Fact::Int(d)) => Fact::Uniform(d),
            (true, Fact::Uniform(_) | Fact::Contig(_)) => Fact::Unknown,
            (_, f) => f,
        }
    }

    fn transfer_expr(&self, k: &Kernel, dst: VarId, e: &Expr) -> Fact {
        let ty = k.ty(dst);
        if ty.dtype == DType::Bool && !ty.shape.is_scalar() {
            return self.transfer_mask(k, dst, e);
        }
        if !is_int(ty.dtype) {
            return Fact::Unknown;
        }
        let scalar = matches!(ty.shape, Shape::Scalar);
        let lift = |d: Div| if scalar { Fact::Int(d) } else { Fact::Uniform(d) };
        match e {
            // Lane indices are kept: `t[e]` is the source's `e`-th lane.
            Expr::Copy(v) | Expr::Reshape(v) => self.get(*v).clone(),
            Expr::Broadcast(v) => match (broadcast_kind(k, *v, dst), self.get(*v)) {
                (_, Fact::Top) => Fact::Top,
                (Kind::Identity, f) => f.clone(),
                (_, Fact::Uniform(d)) => Fact::Uniform(d.clone()),
                (Kind::Single, f) => {
                    Fact::BlockUniform(f.lane_div().unwrap_or_else(Div::one), Div::any_block())
                }
                (Kind::Rows(c), f) => {
                    Fact::BlockUniform(f.lane_div().unwrap_or_else(Div::one), Div::of_len(&c))
                }
                // Lane e reads column e % C: an aligned block of V | C lanes is one of the source.
                (Kind::Columns(c), f @ (Fact::Contig(_) | Fact::ChunkContig(..))) => {
                    let (s, b) = f.chunk_contig().unwrap();
                    Fact::ChunkContig(s, b.min(&Div::of_len(&c)))
                }
                (Kind::Columns(c), Fact::BlockUniform(d, b)) => {
                    Fact::BlockUniform(d.clone(), b.min(&Div::of_len(&c)))
                }
                (Kind::Columns(c), Fact::ChunkXor(s, b, x)) => {
                    Fact::ChunkXor(s.clone(), b.min(&Div::of_len(&c)), *x)
                }
                (Kind::Columns(c), Fact::ChunkHalf(s, b)) => {
                    Fact::ChunkHalf(s.clone(), b.min(&Div::of_len(&c)))
                }
                (Kind::Columns(_), f @ (Fact::ContigRem(_) | Fact::Mult(_))) => f.clone(),
                _ => Fact::Unknown,
            },
            Expr::Lit(Literal::Int(v)) => lift(Div::of_int(i128::from(*v))),
            Expr::Lit(Literal::UInt(v)) => lift(Div::of_int(i128::from(*v))),
            Expr::Param(p) => match k.params[*p as usize].kind {
                ParamKind::Scalar(d) if is_int(d) => lift(Div::atom_div16(*p)),
                _ => Fact::Unknown,
            },
            Expr::ConstGeneric(c) => lift(Div::atom_const(*c)),
            Expr::ProgramId(_) | Expr::NumPrograms(_) => lift(Div::one()),
            Expr::Arange { start } if !scalar => Fact::Contig(Div::of_int(i128::from(*start))),
            Expr::Splat(v) => match self.get(*v) {
                Fact::Top => Fact::Top,
                Fact::Int(d) => Fact::Uniform(d.clone()),
                _ => Fact::Unknown,
            },
            Expr::Unary(UnaryOp::Neg, v) => match self.get(*v) {
                Fact::Top => Fact::Top,
                Fact::Int(d) => Fact::Int(d.clone()),
                Fact::Uniform(d) => Fact::Uniform(d.clone()),
                _ => Fact::Unknown,
            },
            // Int→int casts wrap at a multiple of 2^8, which no VEC-aligned chunk straddles.
            Expr::Cast(v) if is_int(k.ty(*v).dtype) => self.get(*v).clone(),
            Expr::Binary(BinaryOp::Xor, a, b) if !scalar => match (self.get(*a), self.constant(*b)) {
                (Fact::Top, _) => Fact::Top,
                (f, Some(0)) => f.clone(),
                (f, Some(x @ 1..=63)) if f.chunk_contig().is_some() => {
                    let (s, b) = f.chunk_contig().unwrap();
                    Fact::ChunkXor(s, b, x as u32)
                }
                _ => Fact::Unknown,
            },
            // A uniform value over a power of two (`head_dim / 2`); a non-negative index over 2.
            Expr::Binary(BinaryOp::Div, a, b) => match (self.get(*a), self.constant(*b)) {
                (Fact::Top, _) => Fact::Top,
                (f, Some(c)) if c > 0 && c.count_ones() == 1 && f.uniform_div().is_some() => {
                    lift(f.uniform_div().unwrap().shr(c.trailing_zeros() as u8))
                }
                (f, Some(2)) if !scalar && self.is_natural(*a) && f.chunk_contig().is_some() => {
                    let (s, b) = f.chunk_contig().unwrap();
                    Fact::ChunkHalf(s.shr(1), b)
                }
                _ => Fact::Unknown,
            },
            Expr::Binary(op, a, b) => self.binary(*op, self.get(*a), self.get(*b), scalar),
            // A scalar condition picks one whole operand.
            Expr::Where(c, a, b) if k.ty(*c).shape.is_scalar() => self.get(*a).meet(self.get(*b)),
            _ => Fact::Unknown,
        }
    }

    /// Chunk-uniformity of a bool tile.
    fn transfer_mask(&self, k: &Kernel, dst: VarId, e: &Expr) -> Fact {
        let always = Fact::ChunkUniform(Vec::new());
        // A scalar operand is the same in every lane.
        let of = |v: &VarId| if k.ty(*v).shape.is_scalar() { always.clone() } else { self.get(*v).clone() };
        let all = |vs: &[&VarId]| vs.iter().fold(Fact::Top, |acc, v| acc.meet(&of(v)));
        match e {
            Expr::Lit(_) | Expr::Splat(_) => always,
            Expr::Copy(v) | Expr::Unary(UnaryOp::Not, v) if k.ty(*v).dtype == DType::Bool => of(v),
            Expr::Binary(BinaryOp::And | BinaryOp::Or | BinaryOp::Xor, a, b)
                if k.ty(*a).dtype == DType::Bool =>
            {
                all(&[a, b])
            }
            Expr::Where(c, a, b) => all(&[c, a, b]),
            Expr::Copy(v) | Expr::Reshape(v) => of(v),
            Expr::Broadcast(v) => match (broadcast_kind(k, *v, dst), of(v)) {
                (_, Fact::Top) => Fact::Top,
                (Kind::Identity, f) => f,
                (Kind::Single, _) => always,
                // Constant along each row: on aligned blocks of V | C lanes.
                (Kind::Rows(c), _) => Fact::ChunkUniform(vec![Div::of_len(&c)]),
                (Kind::Columns(c), Fact::ChunkUniform(b)) => {
                    Fact::ChunkUniform(union(&b, &[Div::of_len(&c)]))
                }
                _ => Fact::Unknown,
            },
            Expr::Binary(op, a, b) if op.is_comparison() && is_int(k.ty(*a).dtype) => {
                let (fa, fb) = (self.get(*a), self.get(*b));
                if matches!(fa, Fact::Top) || matches!(fb, Fact::Top) {
                    return Fact::Top;
                }
                match (fa, fb, op) {
                    (x, y, _) if x.uniform_div().is_some() && y.uniform_div().is_some() => always,
                    (x, y, _) if x.block().is_some() && y.block().is_some() => {
                        let (bx, by) = (x.block().unwrap().1, y.block().unwrap().1);
                        Fact::ChunkUniform(union(&[bx], &[by]))
                    }
                    // An aligned block of consecutive values [cV, cV + V) lies wholly below or
                    // wholly at-or-above a multiple of V; `<=` and `>` split at `u + 1`.
                    (Fact::Contig(s), u, BinaryOp::Lt | BinaryOp::Ge)
                    | (u, Fact::Contig(s), BinaryOp::Gt | BinaryOp::Le) => match u.uniform_div() {
                        Some(d) => Fact::ChunkUniform(union(std::slice::from_ref(s), &[d])),
                        None => Fact::Unknown,
                    },
                    (Fact::ChunkContig(st, b), u, BinaryOp::Lt | BinaryOp::Ge)
                    | (u, Fact::ChunkContig(st, b), BinaryOp::Gt | BinaryOp::Le) => match u.uniform_div() {
                        Some(d) => Fact::ChunkUniform(union(&[st.clone(), b.clone()], &[d])),
                        None => Fact::Unknown,
                    },
                    _ => Fact::Unknown,
                }
            }
            _ => Fact::Unknown,
        }
    }

    fn binary(&self, op: BinaryOp, a: &Fact, b: &Fact, scalar: bool) -> Fact {
        if matches!(a, Fact::Top) || matches!(b, Fact::Top) {
            return Fact::Top;
        }
        let lift = |d: Div| if scalar { Fact::Int(d) } else { Fact::Uniform(d) };
        match op {
            BinaryOp::Add | BinaryOp::Sub => match (a, b) {
                (Fact::Contig(s), u) if u.uniform_div().is_some() => {
                    Fact::Contig(s.min(&u.uniform_div().unwrap()))
                }
                (u, Fact::Contig(s)) if op == BinaryOp::Add && u.uniform_div().is_some() => {
                    Fact::Contig(s.min(&u.uniform_div().unwrap()))
                }
                // A block-constant term keeps every block consecutive.
                (c, u) if c.chunk_contig().is_some() && u.block().is_some() => {
                    let ((s, b), (d, bb)) = (c.chunk_contig().unwrap(), u.block().unwrap());
                    Fact::ChunkContig(s.min(&d), b.min(&bb))
                }
                (u, c) if op == BinaryOp::Add && c.chunk_contig().is_some() && u.block().is_some() => {
                    let ((s, b), (d, bb)) = (c.chunk_contig().unwrap(), u.block().unwrap());
                    Fact::ChunkContig(s.min(&d), b.min(&bb))
                }
                // A block-constant term moves each run as a whole: the permutation stays.
                (Fact::ChunkXor(s, b, x), u) | (u, Fact::ChunkXor(s, b, x))
                    if u.block().is_some() && (op == BinaryOp::Add || matches!(a, Fact::ChunkXor(..))) =>
                {
                    let (d, bb) = u.block().unwrap();
                    Fact::ChunkXor(s.min(&d), b.min(&bb), *x)
                }
                // And the repeated run: its start moves by the block's value.
                (Fact::ChunkHalf(s, b), u) | (u, Fact::ChunkHalf(s, b))
                    if u.block().is_some() && (op == BinaryOp::Add || matches!(a, Fact::ChunkHalf(..))) =>
                {
                    let (d, bb) = u.block().unwrap();
                    Fact::ChunkHalf(s.min(&d), b.min(&bb))
                }
                (x, y) => match (x.uniform_div(), y.uniform_div()) {
                    (Some(p), Some(q)) => lift(p.min(&q)),
                    _ => match (x.block(), y.block(), x.lane_div(), y.lane_div()) {
                        (Some((p, pb)), Some((q, qb)), _, _) => Fact::BlockUniform(p.min(&q), pb.min(&qb)),
                        (_, _, Some(p), Some(q)) if !scalar => Fact::Mult(p.min(&q)),
                        _ => Fact::Unknown,
                    },
                },
            },
            BinaryOp::Rem if !scalar => match (a, b.uniform_div()) {
                (Fact::Contig(s), Some(d)) => Fact::ContigRem(s.min(&d)),
                (x, Some(d)) => match x.uniform_div() {
                    Some(p) => Fact::Uniform(p.min(&d)),
                    None => Fact::Unknown,
                },
                _ => Fact::Unknown,
            },
            BinaryOp::Mul => match (a.uniform_div(), b.uniform_div()) {
                (Some(p), Some(q)) => lift(p.mul(&q)),
                // Any integer times a multiple of d is a multiple of d (`pos * head_dim`).
                _ if scalar => Fact::Int(
                    a.lane_div().unwrap_or_else(Div::one).mul(&b.lane_div().unwrap_or_else(Div::one)),
                ),
                _ => match (a.block(), b.block()) {
                    (Some((p, pb)), Some((q, qb))) => Fact::BlockUniform(p.mul(&q), pb.min(&qb)),
                    // Any integer times a multiple of d is a multiple of d.
                    _ => Fact::Mult(
                        a.lane_div().unwrap_or_else(Div::one).mul(&b.lane_div().unwrap_or_else(Div::one)),
                    ),
                },
            },
            // The result is one of the operands.
            BinaryOp::Max | BinaryOp::Min => match (a.uniform_div(), b.uniform_div()) {
                (Some(p), Some(q)) if scalar => Fact::Int(p.min(&q)),
                _ => Fact::Unknown,
            },
            _ => Fact::Unknown,
        }
    }
}

/// The integer constants assigned once (a literal operand is such a var in the IR).
fn constants(k: &Kernel) -> Vec<Option<i128>> {
    let counts = k.assignment_counts();
    let mut out = vec![None; k.vars.len()];
    k.visit_stmts(&mut |s| {
        if let Stmt::Assign { dst, expr } = s {
            let v = match expr {
                Expr::Lit(Literal::Int(v)) => Some(i128::from(*v)),
                Expr::Lit(Literal::UInt(v)) => Some(i128::from(*v)),
                _ => None,
            };
            if counts[dst.0 as usize] == 1 {
                out[dst.0 as usize] = v;
            }
        }
    });
    out
}

/// Per var: assigned once, as an `arange` from a non-negative start.
fn naturals(k: &Kernel) -> Vec<bool> {
    let counts = k.assignment_counts();
    let mut out = vec![false; k.vars.len()];
    k.visit_stmts(&mut |s| {
        if let Stmt::Assign { dst, expr: Expr::Arange { start } } = s {
            out[dst.0 as usize] = *start >= 0 && counts[dst.0 as usize] == 1;
        }
    });
    out
}

fn union(a: &[Div], b: &[Div]) -> Vec<Div> {
    let mut v = a.to_vec();
    v.extend(b.iter().filter(|d| !a.contains(d)).cloned());
    v
}

fn is_int(d: DType) -> bool {
    d.is_int()
}

#[cfg(test)]
mod tests {
    use super::{Fact, Facts};
    use crate::tests::{ok, var_id};

    fn facts(src: &str) -> (fuse_ir::Kernel, Facts) {
        let k = ok(src);
        let f = Facts::analyse(&k);
        (k, f)
    }

    #[test]
    fn masks_split_at_a_multiple_of_vec_are_chunk_uniform() {
        let (k, f) = facts(
            "fn k<const B: usize>(x: *const f32, y: *mut f32, n: i32, lo: i32) {
                let offs = program_id(0) * B + arange(0, B);
                let lt = offs < n;
                let ge = offs >= lo;
                let rev = n > offs;
                let both = lt & ge;
                let le = offs <= n;
                let gt = offs > lo;
                let eq = offs == n;
                store(y + offs, load(x + offs, both), both & le & gt & eq & rev);
            }",
        );
        for name in ["lt", "ge", "rev", "both"] {
            assert!(
                matches!(f.get(var_id(&k, name)), Fact::ChunkUniform(_)),
                "{name}: {:?}",
                f.get(var_id(&k, name))
            );
        }
        // `<=` and `>` split a chunk at n + 1; `==` picks one lane.
        for name in ["le", "gt", "eq"] {
            assert_eq!(f.get(var_id(&k, name)), &Fact::Unknown, "{name}");
        }
    }

    #[test]
    fn remainders_of_contiguous_offsets_are_chunk_consecutive_only_from_contig() {
        let (k, f) = facts(
            "fn k<const B: usize>(x: *const f32, y: *mut f32, h: i32, s: i32) {
                let offs = program_id(0) * B + arange(0, B);
                let r = (offs - s) % h;
                let twice = (offs * 2) % h;
                store(y + offs, load(x + r) + load(x + twice));
            }",
        );
        assert!(matches!(f.get(var_id(&k, "r")), Fact::ContigRem(_)), "{:?}", f.get(var_id(&k, "r")));
        assert_eq!(f.get(var_id(&k, "twice")), &Fact::Unknown);
    }

    #[test]
    fn divisibility_macros_use_the_names_the_runtime_defines() {
        // `max` is renamed in C (`max_`); the runtime #defines FUSE_DIV16_max from the IR's name.
        let k = ok("fn k<const B: usize>(x: *const f32, y: *mut f32, max: i32) {
            let offs = program_id(0) * B + arange(0, B);
            let m = offs < max;
            store(y + offs, load(x + offs, m), m);
        }");
        let out = crate::emit_cuda::emit_cuda(&k);
        assert!(
            out.specializations.contains(&fuse_ir::Specialization::Div16(2)),
            "{:?}",
            out.specializations
        );
        let name = fuse_ir::Specialization::Div16(2).macro_name(&k.params);
        assert!(out.source.contains(&format!("({name} ? 16 : 1)")), "{}", out.source);
        assert!(out.source.contains(&format!("#ifndef {name}\n")), "{}", out.source);
        assert!(!out.source.contains(&format!("({name}_ ? 16")), "{}", out.source);
    }

    #[test]
    fn a_broadcast_that_keeps_the_lanes_keeps_the_fact() {
        // `[N]` meeting `[1, N]` is broadcast to `[1, N]`: the same lanes, not one lane repeated.
        let (k, f) = facts(
            "fn k<const BLOCK: usize>(x: *const f32, y: *mut f32, n: i32) {
                let cols = arange(0, BLOCK);
                let offs = cols.expand_dims(0);
                let m = cols < n;
                store(y + offs, load(x + offs, m), m);
            }",
        );
        for (i, v) in k.vars.iter().enumerate() {
            if let fuse_ir::Shape::Tile2(..) = v.ty.shape {
                if v.ty.dtype == fuse_ir::DType::Bool {
                    let fact = &f.vars[i];
                    assert!(
                        !matches!(fact, Fact::ChunkUniform(b) if b.is_empty()),
                        "a [1, N] mask from an [N] one is not constant everywhere: {fact:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn column_broadcasts_bound_their_blocks_by_the_columns() {
        // A chunk-contiguous [8] tile (blocks of 2) broadcast to [R, 8]: blocks stay at most 2.
        let (k, f) = facts(
            "fn k<const R: usize>(x: *const f32, y: *mut f32) {
                let a = arange(0, 4).expand_dims(1) * 64 + arange(0, 2).expand_dims(0);
                let offs = (arange(0, R) * 512).expand_dims(1) + reshape(a, [8]).expand_dims(0);
                store(y + offs, load(x + offs));
            }",
        );
        match f.get(var_id(&k, "offs")) {
            Fact::ChunkContig(_, b) => assert_eq!(b, &super::Div::of_int(2), "{b:?}"),
            other => assert!(!matches!(other, Fact::Contig(_)), "{other:?}"),
        }
    }

    #[test]
    fn halving_a_natural_index_repeats_runs_within_chunks() {
        let (k, f) = facts(
            "fn k<const B: usize>(x: *const f16, y: *mut f16, h: i32, s: i32) {
                let cols = arange(0, B);
                let angle = cols / 2;
                let at = program_id(0) * h + angle;
                let shifted = arange(-4, 12) / 2;
                let third = cols / 4;
                let moved = (cols + s) / 2;
                store(y + cols, load(x + at) + load(x + third) + load(x + moved));
                store(y + arange(0, 16), load(x + shifted));
            }",
        );
        assert!(
            matches!(f.get(var_id(&k, "angle")), Fact::ChunkHalf(..)),
            "{:?}",
            f.get(var_id(&k, "angle"))
        );
        assert!(matches!(f.get(var_id(&k, "at")), Fact::ChunkHalf(..)), "{:?}", f.get(var_id(&k, "at")));
        // A start that may be negative (truncating division pairs lanes differently there), a
        // quotient by 4 and a sum that is not an `arange` itself: nothing.
        for v in ["shifted", "third", "moved"] {
            assert_eq!(f.get(var_id(&k, v)), &Fact::Unknown, "{v}");
        }
        // The load reads half a chunk and repeats it.
        let out = crate::emit_cuda::emit_cuda(&k);
        assert!(out.source.contains("fuse_ldg_words<FUSE_VEC0 * 2 / 8>(fuse_h"), "{}", out.source);
        assert!(out.source.contains("(FUSE_VEC0 >= 2 ? FUSE_VEC0 / 2 : 1)"), "{}", out.source);
    }

    #[test]
    fn xor_by_a_small_constant_permutes_within_chunks() {
        let (k, f) = facts(
            "fn k<const B: usize>(x: *const f32, y: *mut f32, h: i32) {
                let cols = arange(0, B);
                let rows = (arange(0, 4) * h).expand_dims(1);
                let partner = cols ^ 1;
                let offs = rows + partner.expand_dims(0);
                let wide = cols ^ 64;
                let odd = (cols * 3) ^ 1;
                store(y + rows + cols.expand_dims(0), load(x + offs) + load(x + wide).expand_dims(0) + load(x + odd).expand_dims(0));
            }",
        );
        assert!(
            matches!(f.get(var_id(&k, "partner")), Fact::ChunkXor(_, _, 1)),
            "{:?}",
            f.get(var_id(&k, "partner"))
        );
        assert!(
            matches!(f.get(var_id(&k, "offs")), Fact::ChunkXor(_, _, 1)),
            "{:?}",
            f.get(var_id(&k, "offs"))
        );
        // Beyond any VEC, or of offsets that are not consecutive: nothing.
        assert_eq!(f.get(var_id(&k, "wide")), &Fact::Unknown);
        assert_eq!(f.get(var_id(&k, "odd")), &Fact::Unknown);
        // The load takes the vector path only where the permutation stays inside a chunk.
        let out = crate::emit_cuda::emit_cuda(&k);
        assert!(out.source.contains("1 < FUSE_VEC"), "{}", out.source);
        assert!(out.source.contains("(fuse_i ^ 1)"), "{}", out.source);
    }

    #[test]
    fn a_quotient_by_a_power_of_two_keeps_what_divides_it() {
        let (k, f) = facts(
            "fn k<const B: usize>(x: *const f32, y: *mut f32, h: i32, p: i32) {
                let hh = h / 2;
                let quarter = (h * 8) / 4;
                let third = h / 3;
                let row = p * h;
                let offs = row + hh + arange(0, B);
                store(y + offs, load(x + offs) + load(x + third) + load(x + quarter));
            }",
        );
        let cond = |v: &str| match f.get(var_id(&k, v)) {
            Fact::Int(d) => {
                d.multiple_of(
                    "8",
                    6,
                    &["B".into()],
                    &["D16h".into(), "D16h".into(), "D16h".into(), "D16p".into()],
                )
                .0
            }
            other => panic!("{v}: {other:?}"),
        };
        // h / 2 is a multiple of 8 when h is one of 16.
        assert_eq!(cond("hh"), "((D16h ? 8 : 1) % 8 == 0)");
        // (8h) / 4 = 2h: a multiple of 2 times h's factor.
        assert_eq!(cond("quarter"), "((2 * (D16h ? 16 : 1)) % 8 == 0)");
        assert_eq!(f.get(var_id(&k, "third")), &Fact::Unknown);
        // A product of scalars is a multiple of both factors.
        assert_eq!(cond("row"), "(((D16h ? 16 : 1) * (D16p ? 16 : 1)) % 8 == 0)");
    }
}
