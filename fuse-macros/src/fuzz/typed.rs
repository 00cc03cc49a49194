//! (c) Typed 2-D kernels, built from a model of the types and shapes.

use super::*;

// The grammar of `grammar.rs` mostly makes wrong kernels; this one builds kernels that are right by
// construction, from a model of the tile language's types (compute dtype and shape, with NumPy
// broadcasting over dims that are products of a power-of-two literal and the const generics `R`
// and `C`), so that they reach the emitter: 2-D tiles from `expand_dims` of aranges and loads,
// broadcasting in element-wise ops, comparisons, `where_`, pointer offsets, masks and `other`;
// `broadcast_to`, `reshape`, `trans`, `zeros`/`full` of 2-D shapes, axis reductions, `argmax`/
// `argmin` with and without an axis, each in function and method form. Such a kernel must check
// and expand without errors (`TypedKind::Valid`). Half of them then get one statement that is
// wrong in a known way (an axis out of range or not a literal, an axis on a scalar, a reshape that
// changes the lane count, `trans` of a 1-D tile, shapes that do not broadcast, ...), and must give
// a spanned error: an acceptance is a checker bug (`TypedKind::Broken`).

/// A compute type of the model (storage types are loaded and widen, see [`TExpr::storage`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Dt {
    F32,
    I32,
    Bool,
}

impl Dt {
    fn name(self) -> &'static str {
        match self {
            Dt::F32 => "f32",
            Dt::I32 => "i32",
            Dt::Bool => "bool",
        }
    }
}

/// A tile dim: `2^lit * R^r * C^c` (`lit` negative only next to a const generic: `C / 2`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Dim {
    lit: i8,
    r: u8,
    c: u8,
}

const ONE: Dim = Dim { lit: 0, r: 0, c: 0 };
const DIM_R: Dim = Dim { lit: 0, r: 1, c: 0 };
const DIM_C: Dim = Dim { lit: 0, r: 0, c: 1 };
/// The dims tiles are built from (`1` only in 2-D shapes).
const DIMS: &[Dim] = &[
    DIM_R,
    DIM_C,
    DIM_C,
    DIM_R,
    Dim { lit: 1, r: 0, c: 1 },
    Dim { lit: 2, r: 0, c: 0 },
    Dim { lit: 3, r: 0, c: 0 },
    Dim { lit: 0, r: 1, c: 1 },
    Dim { lit: -1, r: 0, c: 1 },
];

/// `dot`'s inner dims: at least 16 (literal) or written with a const generic (asserted at the
/// launch).
const DOT_DIMS: &[Dim] = &[
    DIM_R,
    DIM_C,
    Dim { lit: 1, r: 0, c: 1 },
    Dim { lit: 0, r: 1, c: 1 },
    Dim { lit: -1, r: 0, c: 1 },
    Dim { lit: 4, r: 0, c: 0 },
    Dim { lit: 5, r: 0, c: 0 },
];

/// Literal dims below `dot`'s 16.
const SMALL_DIMS: &[Dim] =
    &[ONE, Dim { lit: 1, r: 0, c: 0 }, Dim { lit: 2, r: 0, c: 0 }, Dim { lit: 3, r: 0, c: 0 }];

impl Dim {
    fn mul(self, o: Dim) -> Dim {
        Dim { lit: self.lit + o.lit, r: self.r + o.r, c: self.c + o.c }
    }

    /// Whether it can be written (a fraction needs a const generic to divide).
    fn ok(self) -> bool {
        self.lit >= 0 || self.r + self.c > 0
    }

    /// Whether `dot` takes it as M, N or K: at least 16, or symbolic (asserted at the launch).
    fn dot_ok(self) -> bool {
        self.r + self.c > 0 || self.lit >= 4
    }

    /// As written in a kernel, several ways (`2 * C`, `C * 2`, `(2 * C)`, `4`, `C / 2`,
    /// `(2 * C) / 2` for `C`, `C * 1`).
    fn text(self, rng: &mut Rng) -> String {
        let mut factors = Vec::new();
        if self.lit > 0 {
            factors.push((1u64 << self.lit).to_string());
        }
        factors.extend(std::iter::repeat_n("R".to_string(), self.r as usize));
        factors.extend(std::iter::repeat_n("C".to_string(), self.c as usize));
        if factors.is_empty() {
            return if rng.chance(90) { "1".into() } else { "(2 / 2)".into() };
        }
        if rng.chance(30) {
            factors.reverse();
        }
        let mut t = factors.join(" * ");
        if self.lit < 0 {
            t = format!("{t} / {}", 1u64 << -self.lit);
        } else if self.lit == 0 && rng.chance(5) {
            t = if rng.chance(50) { format!("(2 * {t}) / 2") } else { format!("{t} * 1") };
        }
        if (factors.len() > 1 || self.lit < 0) && rng.chance(20) {
            format!("({t})")
        } else {
            t
        }
    }
}

/// A shape: `[]` a scalar, `[N]`, `[M, N]`.
type Shp = Vec<Dim>;

fn lanes(s: &[Dim]) -> Dim {
    s.iter().fold(ONE, |a, d| a.mul(*d))
}

/// The checker's broadcasting rule: dims aligned at the right, equal or one of them 1.
fn bcast(a: &[Dim], b: &[Dim]) -> Option<Shp> {
    let rank = a.len().max(b.len());
    let mut out = Vec::with_capacity(rank);
    for i in 0..rank {
        let x = (i + a.len()).checked_sub(rank).map(|j| a[j]);
        let y = (i + b.len()).checked_sub(rank).map(|j| b[j]);
        out.push(match (x, y) {
            (Some(x), Some(y)) if x == y => x,
            (Some(x), Some(y)) if x == ONE => y,
            (Some(x), Some(y)) if y == ONE => x,
            (Some(_), Some(_)) => return None,
            (Some(d), None) | (None, Some(d)) => d,
            (None, None) => unreachable!(),
        });
    }
    Some(out)
}

/// Whether a mask, stored value or `other` of shape `v` goes with offsets of shape `o` (the
/// checker asks a tile for tile offsets, else broadcasting).
fn fits_offsets(v: &[Dim], o: &[Dim]) -> bool {
    match (v.len(), o.len()) {
        (0, _) => true,
        (_, 0) => false,
        _ => bcast(v, o).is_some(),
    }
}

/// A generated expression: its text, and whether it may hold a storage type (an f16/bf16/u8/T
/// load, kept so by shape moves), which a compound assignment could not write back.
struct TExpr {
    text: String,
    storage: bool,
}

impl TExpr {
    fn of(text: String) -> TExpr {
        TExpr { text, storage: false }
    }
}

#[derive(Clone)]
struct TVar {
    name: String,
    dt: Dt,
    shape: Shp,
    storage: bool,
    mutable: bool,
}

#[derive(Clone)]
struct PVar {
    name: String,
    /// The parameter it points into.
    param: &'static str,
    dt: Dt,
    off: Shp,
    mutable: bool,
}

/// The kernel's pointer parameters: (name, compute dtype, readable, element type).
const TYPED_PTRS: &[(&str, Dt, bool, &str)] = &[
    ("x", Dt::F32, true, "f32"),
    ("h", Dt::F32, true, "f16"),
    ("hb", Dt::F32, true, "bf16"),
    ("idx", Dt::I32, true, "i32"),
    ("q", Dt::I32, true, "u8"),
    ("out", Dt::F32, false, "f32"),
    ("oh", Dt::F32, false, "bf16"),
    ("oi", Dt::I32, false, "i32"),
    ("oq", Dt::I32, false, "i8"),
];

struct Typed<'r> {
    rng: &'r mut Rng,
    vars: Vec<TVar>,
    ptrs: Vec<PVar>,
    /// Immutable `let`s of constants (`let w = 2 * C;`), which stay weak and can be dims.
    aliases: Vec<(String, Dim)>,
    next: usize,
    depth: u32,
    /// `x` and `out` are `*const T` / `*mut T` for `T: Float`.
    generic: bool,
}

impl Typed<'_> {
    /// A dim as written: through a `let` of it sometimes.
    fn dim_text(&mut self, d: Dim) -> String {
        let named: Vec<String> = self.aliases.iter().filter(|a| a.1 == d).map(|a| a.0.clone()).collect();
        if !named.is_empty() && self.rng.chance(30) {
            return self.rng.pick(&named).clone();
        }
        d.text(self.rng)
    }

    fn fresh_name(&mut self, base: &str) -> String {
        self.next += 1;
        format!("{base}{}", self.next)
    }

    fn dim(&mut self) -> Dim {
        *self.rng.pick(DIMS)
    }

    fn dim_or_one(&mut self) -> Dim {
        if self.rng.chance(20) {
            ONE
        } else {
            self.dim()
        }
    }

    /// A random tile shape, 2-D two times in three.
    fn tile_shape(&mut self) -> Shp {
        if self.rng.chance(33) {
            vec![self.dim()]
        } else {
            let (a, b) = (self.dim_or_one(), self.dim_or_one());
            vec![a, b]
        }
    }

    fn any_shape(&mut self) -> Shp {
        if self.rng.chance(15) {
            Vec::new()
        } else {
            self.tile_shape()
        }
    }

    fn shape_text(&mut self, s: &[Dim]) -> String {
        match s {
            [d] if self.rng.chance(40) => self.dim_text(*d),
            _ => {
                let dims: Vec<String> = s.iter().map(|d| self.dim_text(*d)).collect();
                format!("[{}]", dims.join(", "))
            }
        }
    }

    /// A shape that broadcasts to `s` (each dim kept or 1, leading dims maybe dropped), the scalar
    /// included when `scalar`.
    fn sub_shape(&mut self, s: &[Dim], scalar: bool) -> Shp {
        let mut options: Vec<Shp> = vec![s.to_vec()];
        if scalar {
            options.push(Vec::new());
        }
        if let [d] = s {
            // A 1-D `[1]` broadcasts like any unit dim (offsets, masks and `other` included).
            if *d != ONE && self.rng.chance(15) {
                options.push(vec![ONE]);
            }
        }
        if let [a, b] = s {
            if *b != ONE {
                options.push(vec![*b]);
                options.push(vec![ONE, *b]);
            }
            if *a != ONE {
                options.push(vec![*a, ONE]);
            }
            if self.rng.chance(15) {
                options.push(vec![ONE, ONE]);
            }
        }
        let k = if self.rng.chance(40) { 0 } else { self.rng.below(options.len()) };
        options.swap_remove(k)
    }

    /// Two shapes that broadcast together to `s` exactly.
    fn split(&mut self, s: &[Dim]) -> (Shp, Shp) {
        if s.len() == 1 && self.rng.chance(4) {
            // A 1-D `[1]` tile broadcasts like a unit dim.
            return if self.rng.chance(50) { (s.to_vec(), vec![ONE]) } else { (vec![ONE], s.to_vec()) };
        }
        let a = self.sub_shape(s, true);
        let b = self.sub_shape(s, true);
        if bcast(&a, &b).as_deref() == Some(s) {
            (a, b)
        } else if self.rng.chance(50) {
            (s.to_vec(), b)
        } else {
            (a, s.to_vec())
        }
    }

    fn var_of(&mut self, dt: Dt, shape: &[Dim]) -> Option<String> {
        let found: Vec<&TVar> = self.vars.iter().filter(|v| v.dt == dt && v.shape == shape).collect();
        if found.is_empty() {
            None
        } else {
            Some(self.rng.pick(&found).name.clone())
        }
    }

    /// A weak literal of `dt` (an operand next to a typed value).
    fn literal(&mut self, dt: Dt) -> String {
        match dt {
            Dt::F32 if self.generic && self.rng.chance(20) => {
                self.rng.word(&["T::MAX", "T::EPSILON", "T::MIN"]).to_string()
            }
            Dt::F32 => self.rng.word(&["2.0", "0.5", "1.0", "3", "f32::EPSILON", "1e-6", "0.0"]).to_string(),
            _ => self.rng.word(&["1", "2", "3", "7", "C", "R", "(2 * C)", "0"]).to_string(),
        }
    }

    /// A typed expression of exactly `dt` and `shape`.
    fn ex(&mut self, dt: Dt, shape: &[Dim]) -> TExpr {
        if self.rng.chance(30) {
            if let Some(v) = self.var_of(dt, shape) {
                let storage = self.vars.iter().any(|x| x.name == v && x.storage);
                return TExpr { text: v, storage };
            }
        }
        self.depth += 1;
        let e =
            if self.depth > 3 || self.rng.chance(20) { self.leaf(dt, shape) } else { self.node(dt, shape) };
        self.depth -= 1;
        e
    }

    fn leaf(&mut self, dt: Dt, shape: &[Dim]) -> TExpr {
        if self.rng.chance(70) {
            if let Some(v) = self.var_of(dt, shape) {
                let storage = self.vars.iter().any(|x| x.name == v && x.storage);
                return TExpr { text: v, storage };
            }
        }
        if shape.is_empty() {
            let t = match dt {
                Dt::F32 => self.rng.word(&["s", "(n_rows as f32)", "1.5f32", "s.exp()"]),
                Dt::I32 => self.rng.word(&["n_rows", "n_cols", "program_id(0)", "program_id(1)", "7i32"]),
                Dt::Bool => self.rng.word(&["(n_rows > 2)", "true", "false", "(s < 1.0)"]),
            };
            return TExpr::of(t.to_string());
        }
        let sh = self.shape_text(shape);
        let t = match (dt, shape) {
            (Dt::I32, [d]) if self.rng.chance(60) => format!("arange(0, {})", self.dim_text(*d)),
            (Dt::I32, [a, b]) if (*a == ONE) != (*b == ONE) && self.rng.chance(60) => {
                let (d, axis) = if *a == ONE { (*b, 0) } else { (*a, 1) };
                format!("arange(0, {}).expand_dims({axis})", self.dim_text(d))
            }
            (Dt::F32, _) if self.rng.chance(50) => format!("zeros({sh})"),
            (Dt::F32, _) => {
                format!("full({sh}, {})", self.rng.word(&["0.5", "s", "-1.0", "f32::INFINITY", "f32::NAN"]))
            }
            (Dt::I32, _) => format!("full({sh}, {})", self.rng.word(&["3", "n_cols", "-1", "program_id(0)"])),
            (Dt::Bool, _) => match self.rng.below(3) {
                0 => format!("full({sh}, true)"),
                1 => format!("(zeros({sh}) < s)"),
                _ => format!("full({sh}, n_rows > 0)"),
            },
        };
        TExpr::of(t)
    }

    fn node(&mut self, dt: Dt, shape: &[Dim]) -> TExpr {
        let two_d = shape.len() == 2;
        loop {
            let e = match self.rng.below(21) {
                0..=3 => self.binary(dt, shape),
                4 => self.unary(dt, shape),
                5 => {
                    let from = *self.rng.pick(&[Dt::F32, Dt::I32, Dt::Bool]);
                    let a = self.ex(from, shape);
                    // To the type parameter: f32, or a storage type in the other instantiations.
                    let to_t = self.generic && dt == Dt::F32 && self.rng.chance(20);
                    let t = if to_t { "T" } else { dt.name() };
                    TExpr {
                        text: match self.rng.below(3) {
                            0 => format!("({}).to({t})", a.text),
                            1 => format!("({} as {t})", paren(&a.text)),
                            _ => format!("{}.to({t})", paren(&a.text)),
                        },
                        storage: to_t,
                    }
                }
                6 => {
                    let (sa, sb) = self.split(shape);
                    let sc = self.sub_shape(shape, true);
                    let c = self.ex(Dt::Bool, &sc);
                    let a = self.ex(dt, &sa);
                    let b = if dt != Dt::Bool && sb.is_empty() && self.rng.chance(50) {
                        self.literal(dt)
                    } else {
                        self.ex(dt, &sb).text
                    };
                    let joined = bcast(&sa, &sb).and_then(|s| bcast(&s, &sc));
                    if joined.as_deref() != Some(shape) {
                        continue;
                    }
                    TExpr::of(format!("where_({}, {}, {b})", c.text, a.text))
                }
                7 if dt != Dt::Bool => {
                    let (sa, sb) = self.split(shape);
                    let a = self.ex(dt, &sa);
                    let b = if sb.is_empty() && self.rng.chance(40) {
                        self.literal(dt)
                    } else {
                        self.ex(dt, &sb).text
                    };
                    let f = self.rng.word(&["maximum", "minimum"]);
                    TExpr::of(self.spell(f, &a.text, &b))
                }
                8 if two_d && (shape[0] == ONE) != (shape[1] == ONE) => {
                    let axis = if shape[0] == ONE { 0 } else { 1 };
                    let src = vec![shape[1 - axis]];
                    let a = self.ex(dt, &src);
                    TExpr { text: self.spell("expand_dims", &a.text, &axis.to_string()), storage: a.storage }
                }
                9 if !shape.is_empty() => {
                    let src = self.sub_shape(shape, true);
                    let a = self.ex(dt, &src);
                    let sh = self.shape_text(shape);
                    TExpr { text: self.spell("broadcast_to", &a.text, &sh), storage: a.storage }
                }
                10 if !shape.is_empty() => {
                    let src = self.same_lanes(shape);
                    let a = self.ex(dt, &src);
                    let sh = self.shape_text(shape);
                    TExpr { text: self.spell("reshape", &a.text, &sh), storage: a.storage }
                }
                11 if two_d => {
                    let a = self.ex(dt, &[shape[1], shape[0]]);
                    TExpr { text: self.spell("trans", &a.text, ""), storage: a.storage }
                }
                12 | 13 | 19 if dt != Dt::Bool && shape.len() < 2 => self.reduction(dt, shape),
                14 | 15 if dt != Dt::Bool => self.load(dt, shape),
                16 if dt == Dt::F32 && !shape.is_empty() => {
                    let o = self.ex(Dt::I32, shape);
                    let seed = self.rng.word(&["seed", "42", "n_rows", "program_id(0)"]);
                    let f = self.rng.word(&["rand", "rand16"]);
                    TExpr::of(format!("{f}({seed}, {})", o.text))
                }
                17 if dt == Dt::I32 => {
                    let (sa, sb) = self.split(shape);
                    let a = self.ex(dt, &sa);
                    let b =
                        if sb.is_empty() && self.rng.chance(50) { "4".into() } else { self.ex(dt, &sb).text };
                    TExpr::of(format!("cdiv({}, {b})", a.text))
                }
                18 if !shape.is_empty() => {
                    let sh = self.shape_text(shape);
                    if dt == Dt::F32 && self.rng.chance(40) {
                        TExpr::of(format!("zeros({sh})"))
                    } else {
                        let v = self.ex(dt, &[]);
                        TExpr::of(format!("full({sh}, {})", v.text))
                    }
                }
                19 => self.leaf(dt, shape),
                20 if dt != Dt::Bool && two_d && shape.iter().all(|d| d.dot_ok()) => self.dot(dt, shape),
                _ => continue,
            };
            return e;
        }
    }

    /// The operands of a `dot` giving `dt` (f32: f16, bf16, TF32 or, in a generic kernel, `T`
    /// inputs; i32: i8 inputs): `a` of `[m, k]` and `b` of `[k, n]` in their storage type.
    fn dot_operands(&mut self, dt: Dt, m: Dim, k: Dim, n: Dim) -> (String, String) {
        let input = match dt {
            Dt::I32 => "i8",
            _ if self.generic && self.rng.chance(30) => "T",
            _ => self.rng.word(&["f16", "bf16", "f32"]),
        };
        let from = if dt == Dt::I32 { Dt::I32 } else { Dt::F32 };
        let operand = |t: &mut Self, shape: [Dim; 2]| {
            let e = t.ex(from, &shape);
            // A storage-typed value (an f16 load) is converted to the input type, always where
            // that is not f32 (whose arithmetic results are f32 already).
            if input != "f32" || e.storage || t.rng.chance(20) {
                format!("{}.to({input})", paren(&e.text))
            } else {
                e.text
            }
        };
        (operand(self, [m, k]), operand(self, [k, n]))
    }

    /// `dot(a, b[, acc])` of `dt` and 2-D `shape` (both dims `dot_ok`).
    fn dot(&mut self, dt: Dt, shape: &[Dim]) -> TExpr {
        let (m, n) = (shape[0], shape[1]);
        let k = *self.rng.pick(DOT_DIMS);
        let (a, b) = self.dot_operands(dt, m, k, n);
        let acc = if self.rng.chance(50) { format!(", {}", self.ex(dt, shape).text) } else { String::new() };
        TExpr::of(self.spell("dot", &a, &format!("{b}{acc}")))
    }

    /// One `dot` wrong in a known way.
    fn broken_dot(&mut self, name: &str) -> (String, &'static str) {
        let dt = *self.rng.pick(&[Dt::F32, Dt::F32, Dt::I32]);
        let (m, k, n) = (*self.rng.pick(DOT_DIMS), *self.rng.pick(DOT_DIMS), *self.rng.pick(DOT_DIMS));
        let (s, what) = match self.rng.below(7) {
            0 => {
                let k2 = loop {
                    let d = *self.rng.pick(DOT_DIMS);
                    if d != k {
                        break d;
                    }
                };
                let (a, _) = self.dot_operands(dt, m, k, n);
                let (_, b) = self.dot_operands(dt, m, k2, n);
                (format!("dot({a}, {b})"), "dot: inner dimensions differ")
            }
            1 => {
                let (a, b) = self.dot_operands(dt, m, k, n);
                let bad = loop {
                    let s = self.tile_shape();
                    if s != [m, n] {
                        break s;
                    }
                };
                let acc = self.ex(dt, &bad).text;
                (format!("dot({a}, {b}, {acc})"), "dot: accumulator shape")
            }
            2 => {
                let (a, b) = self.dot_operands(dt, m, k, n);
                let other = if dt == Dt::I32 { Dt::F32 } else { Dt::I32 };
                let acc = self.ex(other, &[m, n]).text;
                (format!("{}.dot({b}, {acc})", paren(&a)), "dot: accumulator dtype")
            }
            3 => {
                // Two input types: f16 and bf16, f16 and f32, or i8 and a float.
                let (x, y) =
                    *self.rng.pick(&[("f16", "bf16"), ("bf16", "f16"), ("f16", "f32"), ("i8", "bf16")]);
                let a = self.ex(Dt::F32, &[m, k]).text;
                let b = self.ex(Dt::F32, &[k, n]).text;
                (format!("dot({}.to({x}), {}.to({y}))", paren(&a), paren(&b)), "dot: mixed element types")
            }
            4 => {
                let (mut dims, i) = ([m, k, n], self.rng.below(3));
                dims[i] = *self.rng.pick(SMALL_DIMS);
                let (a, b) = self.dot_operands(dt, dims[0], dims[1], dims[2]);
                (format!("dot({a}, {b})"), "dot: a dim below 16")
            }
            5 => {
                let (a, b) = self.dot_operands(dt, m, k, n);
                let flat = self.ex(Dt::F32, &[m]).text;
                let e = if self.rng.chance(50) {
                    format!("dot({}.to(f16), {b})", paren(&flat))
                } else {
                    format!("dot({a}, 1.0)")
                };
                (e, "dot: an operand that is not a 2-D tile")
            }
            _ => {
                let t = self.rng.word(&["u8", "i32", "u32", "bool"]);
                let a = self.ex(Dt::I32, &[m, k]).text;
                let b = self.ex(Dt::I32, &[k, n]).text;
                (
                    format!("dot({}.to({t}), {}.to({t}))", paren(&a), paren(&b)),
                    "dot: unsupported element type",
                )
            }
        };
        (format!("let {name} = {s};\n"), what)
    }

    /// A shape with as many lanes as `s` (not `s` itself, mostly).
    fn same_lanes(&mut self, s: &[Dim]) -> Shp {
        let total = lanes(s);
        let mut options: Vec<Shp> = Vec::new();
        if total != ONE {
            options.push(vec![total]);
        }
        // Every split of the factors into two dims.
        for lit in total.lit.min(0)..=total.lit.max(0) {
            for r in 0..=total.r {
                for c in 0..=total.c {
                    let a = Dim { lit, r, c };
                    let b = Dim { lit: total.lit - lit, r: total.r - r, c: total.c - c };
                    if a.ok() && b.ok() {
                        options.push(vec![a, b]);
                    }
                }
            }
        }
        let differ: Vec<Shp> = options.iter().filter(|o| o.as_slice() != s).cloned().collect();
        if !differ.is_empty() && self.rng.chance(90) {
            self.rng.pick(&differ).clone()
        } else {
            self.rng.pick(&options).clone()
        }
    }

    fn binary(&mut self, dt: Dt, shape: &[Dim]) -> TExpr {
        let (sa, sb) = self.split(shape);
        // The operands' type: the result's, or any for a comparison.
        let (odt, op) = match dt {
            Dt::Bool if self.rng.chance(70) => {
                let odt = *self.rng.pick(&[Dt::F32, Dt::I32, Dt::I32]);
                (odt, self.rng.word(&["<", "<=", ">", ">=", "==", "!="]))
            }
            Dt::Bool => (Dt::Bool, self.rng.word(&["&", "|", "^", "&&", "||", "==", "!="])),
            Dt::F32 => (Dt::F32, self.rng.word(&["+", "-", "*", "/", "+", "*", "%"])),
            Dt::I32 => (Dt::I32, self.rng.word(&["+", "-", "*", "/", "%", "&", "|", "^", "+", "*"])),
        };
        let a = self.ex(odt, &sa);
        let b = if odt != Dt::Bool && sb.is_empty() && self.rng.chance(50) {
            self.literal(odt)
        } else {
            self.ex(odt, &sb).text
        };
        TExpr::of(if self.rng.chance(50) {
            format!("({} {op} {b})", a.text)
        } else {
            format!("({b} {op} {})", a.text)
        })
    }

    fn unary(&mut self, dt: Dt, shape: &[Dim]) -> TExpr {
        let a = self.ex(dt, shape);
        let f = match dt {
            Dt::F32 => self.rng.word(&[
                "-", "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "erf", "tanh", "sigmoid", "floor",
                "ceil", "sin", "cos", "abs",
            ]),
            Dt::I32 => self.rng.word(&["-", "abs", "!"]),
            Dt::Bool => "!",
        };
        TExpr::of(match f {
            "-" | "!" => format!("({f}{})", paren(&a.text)),
            _ if self.rng.chance(50) => format!("{f}({})", a.text),
            _ => format!("{}.{f}()", paren(&a.text)),
        })
    }

    /// `sum/max/min` (or `argmax/argmin` for i32) to a scalar or along an axis.
    fn reduction(&mut self, dt: Dt, shape: &[Dim]) -> TExpr {
        let arg = dt == Dt::I32 && self.rng.chance(50);
        let f =
            if arg { self.rng.word(&["argmax", "argmin"]) } else { self.rng.word(&["sum", "max", "min"]) };
        let src_dt = if arg { *self.rng.pick(&[Dt::F32, Dt::I32]) } else { dt };
        let (src, axis) = match shape {
            [d] => {
                let x = self.dim_or_one();
                if self.rng.chance(50) {
                    (vec![*d, x], Some(1))
                } else {
                    (vec![x, *d], Some(0))
                }
            }
            _ => {
                let s = self.tile_shape();
                let axis = if s.len() == 1 && self.rng.chance(30) { Some(0) } else { None };
                (s, axis)
            }
        };
        let a = self.ex(src_dt, &src);
        TExpr::of(match (axis, self.rng.chance(50)) {
            (Some(ax), true) => format!("{f}({}, {ax})", a.text),
            (Some(ax), false) => format!("{}.{f}({ax})", paren(&a.text)),
            (None, true) => format!("{f}({})", a.text),
            (None, false) => format!("{}.{f}()", paren(&a.text)),
        })
    }

    /// A pointer into a readable (`read`) or writable parameter of compute type `dt`, with
    /// offsets of shape `off`: `p + offs`, through a pointer variable sometimes.
    fn pointer(&mut self, dt: Dt, read: bool, off: &[Dim]) -> (String, &'static str) {
        let own: Vec<PVar> = self
            .ptrs
            .iter()
            .filter(|p| p.dt == dt && TYPED_PTRS.iter().any(|t| t.0 == p.param && t.2 == read))
            .filter(|p| bcast(&p.off, off).as_deref() == Some(off))
            .cloned()
            .collect();
        if !own.is_empty() && self.rng.chance(50) {
            let p = self.rng.pick(&own).clone();
            let d = self.sub_shape(off, true);
            if bcast(&p.off, &d).as_deref() == Some(off) {
                if d.is_empty() && self.rng.chance(50) {
                    return (p.name, p.param);
                }
                let o = self.ex(Dt::I32, &d);
                return (format!("{} + {}", p.name, paren(&o.text)), p.param);
            }
        }
        let params: Vec<&str> = TYPED_PTRS.iter().filter(|t| t.1 == dt && t.2 == read).map(|t| t.0).collect();
        let param = *self.rng.pick(&params);
        let o = self.offsets(off);
        if self.rng.chance(10) {
            // 64-bit offsets.
            return (format!("{param} + {}.to(i64)", paren(&o.text)), param);
        }
        (format!("{param} + {}", paren(&o.text)), param)
    }

    /// Offsets of shape `off`: the 2-D pattern `rows[:, None] * n + cols[None, :]` often.
    fn offsets(&mut self, off: &[Dim]) -> TExpr {
        TExpr::of(match off {
            [a, b] if *a != ONE && *b != ONE && self.rng.chance(50) => format!(
                "{} * {} + {}",
                self.row_index(*a, 1),
                self.rng.word(&["n_cols", "C", "4", "(2 * C)"]),
                self.row_index(*b, 0)
            ),
            [d] if self.rng.chance(40) => self.row_index(*d, 2),
            _ => return self.ex(Dt::I32, off),
        })
    }

    /// An i32 index tile of length `d`, expanded on `axis` (2: not expanded).
    fn row_index(&mut self, d: Dim, axis: u8) -> String {
        let base = match self.rng.below(3) {
            0 => format!("arange(0, {})", self.dim_text(d)),
            1 => format!("(program_id(0) * {} + arange(0, {}))", self.dim_text(d), self.dim_text(d)),
            _ => match self.var_of(Dt::I32, &[d]) {
                Some(v) => v,
                None => format!("arange(0, {})", self.dim_text(d)),
            },
        };
        match axis {
            0 | 1 if self.rng.chance(50) => format!("{base}.expand_dims({axis})"),
            0 | 1 => format!("expand_dims({base}, {axis})"),
            _ => base,
        }
    }

    fn load(&mut self, dt: Dt, shape: &[Dim]) -> TExpr {
        // Offsets (a tile unless the load is a scalar), mask and `other` broadcast to `shape`.
        let mut o = if shape.is_empty() { Vec::new() } else { self.sub_shape(shape, false) };
        let m = self.sub_shape(shape, true);
        let t = self.sub_shape(shape, true);
        let with_mask = self.rng.chance(75);
        let with_other = with_mask && self.rng.chance(50);
        let m = if with_mask && fits_offsets(&m, &o) { m } else { o.clone() };
        let t = if with_other && fits_offsets(&t, &o) { t } else { o.clone() };
        let joined = bcast(&o, &m).and_then(|j| bcast(&j, &t));
        if joined.as_deref() != Some(shape) {
            // The offsets take the whole shape where the parts do not make it up.
            o = shape.to_vec();
        }
        let (m, t) = (
            if fits_offsets(&m, &o) { m } else { o.clone() },
            if fits_offsets(&t, &o) { t } else { o.clone() },
        );
        let (p, param) = self.pointer(dt, true, &o);
        let storage = matches!(param, "h" | "hb" | "q") || (self.generic && param == "x");
        let mut args = vec![p];
        if with_mask {
            args.push(self.ex(Dt::Bool, &m).text);
            if with_other {
                args.push(if t.is_empty() && self.rng.chance(60) {
                    match dt {
                        Dt::F32 => self.rng.word(&["f32::NEG_INFINITY", "0.0", "1", "-1.5"]).to_string(),
                        _ => self.rng.word(&["0", "-1", "127"]).to_string(),
                    }
                } else {
                    self.ex(dt, &t).text
                });
            }
        }
        TExpr { text: format!("load({})", args.join(", ")), storage }
    }

    // ---- statements

    fn stmts(&mut self, n: usize, nest: u32, out: &mut String) {
        for _ in 0..n {
            self.stmt(nest, out);
        }
    }

    fn stmt(&mut self, nest: u32, out: &mut String) {
        let mut k = self.rng.below(15);
        if nest >= 2 && (8..=10).contains(&k) {
            // Deep enough: no more blocks.
            k -= 8;
        }
        match k {
            0..=3 => self.let_stmt(out),
            4 => self.pointer_var(out),
            11 | 12 => self.row_reduction(out),
            14 if nest == 0 => self.named_const(out),
            14 => self.store(out),
            13 => self.pointer_step(out),
            5 | 6 => self.store(out),
            7 => self.assign_stmt(out),
            8 => self.if_stmt(nest, out),
            9 => self.for_stmt(nest, out),
            _ => self.accumulator_loop(out),
        }
    }

    /// A `let` of a new (or shadowed) variable, mutable sometimes.
    fn let_stmt(&mut self, out: &mut String) {
        let dt = *self.rng.pick(&[Dt::F32, Dt::F32, Dt::I32, Dt::Bool]);
        let shape = self.any_shape();
        let mutable = self.rng.chance(25) && dt != Dt::Bool;
        let mut e = self.ex(dt, &shape);
        if mutable && e.storage {
            e = TExpr::of(format!("{}.to({})", paren(&e.text), dt.name()));
        }
        // Shadowing, now and then: the name takes the new type.
        let name = if !self.vars.is_empty() && self.rng.chance(10) {
            self.rng.pick(&self.vars).name.clone()
        } else {
            self.fresh_name("t")
        };
        self.vars.retain(|v| v.name != name);
        let m = if mutable { "mut " } else { "" };
        out.push_str(&format!("let {m}{name} = {};\n", e.text));
        self.vars.push(TVar { name, dt, shape, storage: e.storage, mutable });
    }

    /// A pointer variable holding part of the offsets, mutable sometimes.
    fn pointer_var(&mut self, out: &mut String) {
        let (param, dt, _, _) = *self.rng.pick(TYPED_PTRS);
        let off = self.any_shape();
        let o = if off.is_empty() { self.ex(Dt::I32, &off) } else { self.offsets(&off) };
        let name = self.fresh_name("p");
        let mutable = self.rng.chance(30);
        // Offsets loaded from u8 (`q`) are widened to i32, so a mutable pointer over them
        // takes i32 advances like any other.
        let m = if mutable { "mut " } else { "" };
        out.push_str(&format!("let {m}{name} = {param} + {};\n", paren(&o.text)));
        self.ptrs.push(PVar { name, param, dt, off, mutable });
    }

    /// A named constant (weak, so usable as a dim, in shapes and `arange`).
    fn named_const(&mut self, out: &mut String) {
        let d = self.dim();
        let name = self.fresh_name("w");
        let text = self.dim_text(d);
        out.push_str(&format!("let {name} = {text};\n"));
        self.aliases.push((name, d));
    }

    /// A mutable pointer moves on (by a scalar, or by offsets that broadcast to its own).
    fn pointer_step(&mut self, out: &mut String) {
        let muts: Vec<PVar> = self.ptrs.iter().filter(|p| p.mutable).cloned().collect();
        if muts.is_empty() {
            return self.row_reduction(out);
        }
        let p = self.rng.pick(&muts).clone();
        let d = self.sub_shape(&p.off, true);
        let e = self.ex(Dt::I32, &d).text;
        out.push_str(&match self.rng.below(3) {
            0 => format!("{} += {e};\n", p.name),
            1 => format!("{} -= {e};\n", p.name),
            _ => format!("{0} = {0} + {1};\n", p.name, paren(&e)),
        });
    }

    /// An assignment (`=` or `op=`) to a mutable variable.
    fn assign_stmt(&mut self, out: &mut String) {
        let muts: Vec<TVar> = self.vars.iter().filter(|v| v.mutable).cloned().collect();
        if muts.is_empty() {
            return self.store(out);
        }
        let v = self.rng.pick(&muts).clone();
        let ops: &[&str] = match v.dt {
            Dt::F32 => &["=", "+=", "-=", "*=", "/="],
            _ => &["=", "+=", "-=", "*=", "%=", "&=", "|=", "^="],
        };
        let op = self.rng.word(ops);
        // `=` takes the shape or what broadcasts to it (2-D), or a scalar; `op=` a part.
        let s = if op == "=" && v.shape.len() == 1 {
            if self.rng.chance(20) {
                Vec::new()
            } else {
                v.shape.clone()
            }
        } else {
            self.sub_shape(&v.shape, true)
        };
        let e = if s.is_empty() && self.rng.chance(30) { self.literal(v.dt) } else { self.ex(v.dt, &s).text };
        out.push_str(&format!("{} {op} {e};\n", v.name));
    }

    /// An `if` on a scalar condition, with an `else` sometimes.
    fn if_stmt(&mut self, nest: u32, out: &mut String) {
        let c = self.ex(Dt::Bool, &[]);
        let saved = (self.vars.clone(), self.ptrs.clone());
        let mut body = String::new();
        let n = 1 + self.rng.below(3);
        self.stmts(n, nest + 1, &mut body);
        (self.vars, self.ptrs) = saved.clone();
        let els = if self.rng.chance(40) {
            let mut e = String::new();
            self.stmts(1, nest + 1, &mut e);
            (self.vars, self.ptrs) = saved;
            format!(" else {{\n{e}}}")
        } else {
            String::new()
        };
        out.push_str(&format!("if {} {{\n{body}}}{els}\n", c.text));
    }

    /// A `for` loop over a range or a `step_by` range.
    fn for_stmt(&mut self, nest: u32, out: &mut String) {
        let saved = (self.vars.clone(), self.ptrs.clone());
        let i = self.fresh_name("i");
        let range = if self.rng.chance(50) {
            format!("0..{}", self.rng.word(&["n_rows", "4", "n_cols"]))
        } else {
            format!("(0..{}).step_by({})", self.rng.word(&["n_rows", "R"]), self.rng.word(&["2", "C"]))
        };
        self.vars.push(TVar {
            name: i.clone(),
            dt: Dt::I32,
            shape: Vec::new(),
            storage: false,
            mutable: false,
        });
        let mut body = String::new();
        let n = 1 + self.rng.below(3);
        self.stmts(n, nest + 1, &mut body);
        (self.vars, self.ptrs) = saved;
        out.push_str(&format!("for {i} in {range} {{\n{body}}}\n"));
    }

    /// A mutable accumulator over a loop (the 2-D reduction pattern).
    fn accumulator_loop(&mut self, out: &mut String) {
        let shape = self.tile_shape();
        let acc = self.fresh_name("acc");
        let sh = self.shape_text(&shape);
        let i = self.fresh_name("i");
        let sub = self.sub_shape(&shape, true);
        let saved = self.vars.clone();
        self.vars.push(TVar {
            name: i.clone(),
            dt: Dt::I32,
            shape: Vec::new(),
            storage: false,
            mutable: false,
        });
        let e = self.ex(Dt::F32, &sub);
        self.vars = saved;
        out.push_str(&format!(
            "let mut {acc} = zeros({sh});\nfor {i} in 0..n_rows {{\n{acc} += {};\n}}\n",
            e.text
        ));
        self.vars.push(TVar { name: acc, dt: Dt::F32, shape, storage: false, mutable: true });
    }

    /// The softmax pattern along an axis: a reduction, `expand_dims` back, broadcasting against
    /// the tile, another reduction (and an arg-reduction).
    fn row_reduction(&mut self, out: &mut String) {
        let shape = vec![self.dim_or_one(), self.dim_or_one()];
        let v = match self.var_of(Dt::F32, &shape) {
            Some(v) if self.rng.chance(50) => v,
            _ => {
                let name = self.fresh_name("v");
                let e = self.ex(Dt::F32, &shape);
                out.push_str(&format!("let {name} = {};\n", e.text));
                self.vars.push(TVar {
                    name: name.clone(),
                    dt: Dt::F32,
                    shape: shape.clone(),
                    storage: e.storage,
                    mutable: false,
                });
                name
            }
        };
        let ax = self.rng.below(2);
        let kept = vec![shape[1 - ax]];
        let (m, e, s, y, i) = (
            self.fresh_name("m"),
            self.fresh_name("e"),
            self.fresh_name("s"),
            self.fresh_name("y"),
            self.fresh_name("am"),
        );
        let red = self.rng.word(&["max", "min", "sum"]);
        let arg = self.rng.word(&["argmax", "argmin"]);
        let func = self.rng.chance(50);
        let call = |f: &str, x: &str| if func { format!("{f}({x}, {ax})") } else { format!("{x}.{f}({ax})") };
        let back =
            |x: &str| if func { format!("expand_dims({x}, {ax})") } else { format!("{x}.expand_dims({ax})") };
        out.push_str(&format!("let {m} = {};\n", call(red, &v)));
        out.push_str(&format!("let {e} = exp({v} - {});\n", back(&m)));
        out.push_str(&format!("let {s} = {};\n", call("sum", &e)));
        out.push_str(&format!("let {y} = {e} / {};\n", back(&s)));
        out.push_str(&format!("let {i} = {};\n", call(arg, &y)));
        let var = |name: String, dt: Dt, shape: &Shp| TVar {
            name,
            dt,
            shape: shape.clone(),
            storage: false,
            mutable: false,
        };
        self.vars.push(var(m, Dt::F32, &kept));
        self.vars.push(var(e, Dt::F32, &shape));
        self.vars.push(var(s, Dt::F32, &kept));
        self.vars.push(var(y, Dt::F32, &shape));
        self.vars.push(var(i, Dt::I32, &kept));
    }

    fn store(&mut self, out: &mut String) {
        let dt = *self.rng.pick(&[Dt::F32, Dt::F32, Dt::I32]);
        let shape = self.tile_shape();
        let o = self.sub_shape(&shape, false);
        let v = self.sub_shape(&shape, true);
        let v = if fits_offsets(&v, &o) { v } else { o.clone() };
        let (p, _) = self.pointer(dt, false, &o);
        let value = if v.is_empty() && self.rng.chance(30) {
            self.literal(dt)
        } else {
            // Prefer a variable: stores are what keep the kernel's values alive.
            match self.var_of(dt, &v) {
                Some(name) if self.rng.chance(60) => name,
                _ => self.ex(dt, &v).text,
            }
        };
        let value = if self.generic && p.starts_with("out ") && self.rng.chance(30) {
            format!("{}.to(T)", paren(&value))
        } else {
            value
        };
        let mask = if self.rng.chance(60) {
            let m = self.sub_shape(&shape, true);
            let m = if fits_offsets(&m, &o) { m } else { o.clone() };
            format!(", {}", self.ex(Dt::Bool, &m).text)
        } else {
            String::new()
        };
        out.push_str(&format!("store({p}, {value}{mask});\n"));
    }

    // ---- one statement that is wrong in a known way

    /// A tile variable (or a new tile) of rank `rank` and a non-bool dtype.
    fn tile_of_rank(&mut self, rank: usize) -> (String, Dt, Shp) {
        let found: Vec<TVar> =
            self.vars.iter().filter(|v| v.shape.len() == rank && v.dt != Dt::Bool).cloned().collect();
        if !found.is_empty() && self.rng.chance(60) {
            let v = self.rng.pick(&found).clone();
            return (v.name, v.dt, v.shape);
        }
        let dt = *self.rng.pick(&[Dt::F32, Dt::I32]);
        let shape = if rank == 1 { vec![self.dim()] } else { vec![self.dim_or_one(), self.dim_or_one()] };
        let e = self.ex(dt, &shape);
        (paren(&e.text), dt, shape)
    }

    /// Two shapes that do not broadcast together.
    fn clashing_shapes(&mut self) -> (Shp, Shp) {
        loop {
            let a = self.tile_shape();
            let b = match self.rng.below(3) {
                0 => vec![self.dim()],
                1 => a.iter().rev().copied().collect(),
                _ => self.tile_shape(),
            };
            if bcast(&a, &b).is_none() {
                return (a, b);
            }
        }
    }

    /// `f` applied to `receiver` and `args` (comma-separated, or empty), spelled at random as a
    /// function call or as method sugar on the receiver: both spellings must check alike.
    fn spell(&mut self, f: &str, receiver: &str, args: &str) -> String {
        match (self.rng.chance(50), args.is_empty()) {
            (true, true) => format!("{f}({receiver})"),
            (true, false) => format!("{f}({receiver}, {args})"),
            (false, _) => format!("{}.{f}({args})", paren(receiver)),
        }
    }

    /// One wrong statement and what is wrong with it.
    fn broken_stmt(&mut self) -> (String, &'static str) {
        let name = self.fresh_name("bad");
        let red = self.rng.word(&["sum", "max", "min", "argmax", "argmin"]);
        match self.rng.below(24) {
            case @ 0..=3 => self.broken_reduction(&name, red, case),
            case @ (4..=7 | 14..=16 | 19) => self.broken_shape_op(&name, case),
            case @ 8..=13 => self.broken_broadcast(&name, case),
            case @ (17 | 18) => self.broken_dtype(&name, red, case),
            20 => {
                let s = vec![self.dim_or_one(), self.dim_or_one()];
                let c = self.ex(Dt::Bool, &s).text;
                (format!("if {c} {{\nlet {name} = 1;\n}}\n"), "a 2-D condition")
            }
            22 | 23 => self.broken_dot(&name),
            _ => self.broken_assignment(),
        }
    }

    /// A reduction with a bad axis, or of a scalar.
    fn broken_reduction(&mut self, name: &str, red: &str, case: usize) -> (String, &'static str) {
        match case {
            0 | 1 => {
                let rank = if self.rng.chance(70) { 2 } else { 1 };
                let (t, _, s) = self.tile_of_rank(rank);
                let axis = if s.len() == 2 {
                    self.rng.word(&["2", "3", "-1", "7", "-2"])
                } else {
                    self.rng.word(&["1", "2", "-1"])
                };
                let e = self.spell(red, &t, axis);
                (format!("let {name} = {e};\n"), "axis out of range")
            }
            2 => {
                let rank = 1 + self.rng.below(2);
                let (t, _, _) = self.tile_of_rank(rank);
                let axis = self.rng.word(&[
                    "n_cols",
                    "R",
                    "C",
                    "program_id(0)",
                    "1.0",
                    "true",
                    "(n_rows - n_rows)",
                    "1u32",
                ]);
                let e = self.spell(red, &t, axis);
                (format!("let {name} = {e};\n"), "axis not a literal")
            }
            3 => {
                let dt = *self.rng.pick(&[Dt::F32, Dt::I32]);
                let s = self.ex(dt, &[]).text;
                let s = if self.rng.chance(20) { self.literal(dt) } else { s };
                let axis = self.rng.word(&["0", "1"]);
                let e = match self.rng.below(3) {
                    0 => format!("{red}({s}, {axis})"),
                    1 => format!("{}.{red}({axis})", paren(&s)),
                    _ => format!("{red}({s})"),
                };
                (format!("let {name} = {e};\n"), "reduction of a scalar")
            }
            _ => unreachable!("case {case} is not one of broken_reduction's"),
        }
    }

    /// A shape function of the wrong rank or shape, with a bad shape literal or wrong arguments.
    fn broken_shape_op(&mut self, name: &str, case: usize) -> (String, &'static str) {
        match case {
            4 => {
                let rank = 1 + self.rng.below(2);
                let (t, _, s) = self.tile_of_rank(rank);
                let total = lanes(&s);
                let mut to = self.same_lanes(&s);
                // One dim doubled (or the lanes halved): another number of lanes.
                let k = self.rng.below(to.len());
                if to[k].lit > 0 && self.rng.chance(50) {
                    to[k].lit -= 1;
                } else {
                    to[k].lit += 1;
                }
                if !to[k].ok() {
                    to[k].lit += 2;
                }
                debug_assert_ne!(lanes(&to), total);
                if self.rng.chance(20) {
                    to = vec![self.dim(), self.dim(), ONE];
                }
                let sh = self.shape_text(&to);
                let e = self.spell("reshape", &t, &sh);
                (format!("let {name} = {e};\n"), "reshape changes the lane count")
            }
            5 if self.rng.chance(25) => {
                let v = self.ex(Dt::F32, &[]).text;
                let e = match self.rng.below(3) {
                    0 => format!("expand_dims({v}, 0)"),
                    1 => format!("reshape({v}, [1, 1])"),
                    _ => format!("{}.expand_dims(1)", paren(&v)),
                };
                (format!("let {name} = {e};\n"), "a shape function of a scalar")
            }
            5 => {
                let t = if self.rng.chance(80) { self.tile_of_rank(1).0 } else { self.ex(Dt::F32, &[]).text };
                let e = self.spell("trans", &t, "");
                (format!("let {name} = {e};\n"), "trans of a 1-D tile or scalar")
            }
            6 => {
                let (t, _, _) = self.tile_of_rank(2);
                let axis = self.rng.word(&["0", "1"]);
                let e = self.spell("expand_dims", &t, axis);
                (format!("let {name} = {e};\n"), "expand_dims of a 2-D tile")
            }
            7 => {
                let (t, _, _) = self.tile_of_rank(1);
                let axis = self.rng.word(&["2", "-1", "n_cols", "R", "1.0"]);
                (format!("let {name} = expand_dims({t}, {axis});\n"), "expand_dims axis")
            }
            14 => {
                let (t, _, s) = self.tile_of_rank(2);
                // A target the source does not broadcast to: a smaller dim, a lower rank, another dim.
                let two = Dim { lit: 1, r: 0, c: 0 };
                let (a, b) = (s[0], s[1]);
                let (x, y) = (self.dim_or_one(), self.dim_or_one());
                let candidates = [
                    vec![ONE, b],
                    vec![a, ONE],
                    vec![b],
                    vec![a],
                    vec![a.mul(two), b],
                    vec![a, b.mul(two)],
                    vec![b, a],
                    vec![x, y],
                ];
                let bad: Vec<Shp> =
                    candidates.into_iter().filter(|to| bcast(&s, to).as_ref() != Some(to)).collect();
                let to = self.rng.pick(&bad).clone();
                let sh = self.shape_text(&to);
                (format!("let {name} = broadcast_to({t}, {sh});\n"), "broadcast_to a smaller shape")
            }
            15 => {
                let f = self.rng.word(&["zeros", "full", "reshape", "broadcast_to"]);
                let sh = self.rng.word(&[
                    "[R, C, 2]",
                    "[]",
                    "[R, 3]",
                    "[n_rows, C]",
                    "[2.0, C]",
                    "[0, C]",
                    "[R, C, 1, 1]",
                    "[-4, C]",
                    "[C, s]",
                    "[R, C / 3]",
                ]);
                let e = match f {
                    "zeros" => format!("zeros({sh})"),
                    "full" => format!("full({sh}, 1.0)"),
                    _ => {
                        let (t, _, _) = self.tile_of_rank(2);
                        format!("{f}({t}, {sh})")
                    }
                };
                (format!("let {name} = {e};\n"), "a bad shape literal")
            }
            16 => {
                let dims = [self.dim(), self.dim()];
                let sh = self.shape_text(&dims);
                let sh = if sh.starts_with('[') { sh } else { format!("[{sh}]") };
                (format!("let {name} = {sh};\n"), "a shape as a value")
            }
            19 => {
                let (t, _, s) = self.tile_of_rank(2);
                let e = match self.rng.below(8) {
                    0 => format!("trans({t}, 0)"),
                    1 => format!("expand_dims({t})"),
                    2 => format!("reshape({t})"),
                    3 => format!("broadcast_to({t}, [R, C], 1)"),
                    4 => format!("{t}.argmax(0, 1)"),
                    5 => format!("{t}.trans(1)"),
                    6 => {
                        let sh = self.shape_text(&s);
                        format!("full({sh}, {t})")
                    }
                    _ => format!("{t}.sum(0, 1)"),
                };
                (format!("let {name} = {e};\n"), "wrong arguments")
            }
            _ => unreachable!("case {case} is not one of broken_shape_op's"),
        }
    }

    /// Operands, masks or stored values of shapes that do not broadcast together.
    fn broken_broadcast(&mut self, name: &str, case: usize) -> (String, &'static str) {
        match case {
            8..=11 => {
                let (sa, sb) = self.clashing_shapes();
                let dt = *self.rng.pick(&[Dt::F32, Dt::I32]);
                let a = self.ex(dt, &sa).text;
                let b = self.ex(dt, &sb).text;
                let e = match self.rng.below(6) {
                    0 => format!("{} + {}", paren(&a), paren(&b)),
                    1 => format!("{} < {}", paren(&a), paren(&b)),
                    2 => format!("maximum({a}, {b})"),
                    3 => {
                        let c = self.ex(Dt::Bool, &sa).text;
                        format!("where_({c}, {b}, 0)")
                    }
                    4 => {
                        let sc = self.sub_shape(&sa, true);
                        let c = self.ex(Dt::Bool, &sc).text;
                        format!("where_({c}, {a}, {b})")
                    }
                    _ => format!("{}.minimum({b})", paren(&a)),
                };
                (format!("let {name} = {e};\n"), "shapes that do not broadcast")
            }
            12 | 13 => {
                // A mask, `other` or stored value that does not go with the offsets.
                let (so, sv) = self.clashing_shapes();
                let dt = *self.rng.pick(&[Dt::F32, Dt::I32]);
                let read = self.rng.chance(50);
                let (p, _) = self.pointer(dt, read, &so);
                let s = match self.rng.below(3) {
                    0 => {
                        let m = self.ex(Dt::Bool, &sv).text;
                        format!("let {name} = load({p}, {m});\n")
                    }
                    1 => {
                        let m = self.sub_shape(&so, true);
                        let m = self.ex(Dt::Bool, &m).text;
                        let t = self.ex(dt, &sv).text;
                        format!("let {name} = load({p}, {m}, {t});\n")
                    }
                    _ => {
                        let (p, _) = self.pointer(dt, false, &so);
                        let v = self.ex(dt, &sv).text;
                        format!("store({p}, {v});\n")
                    }
                };
                (s, "mask, other or value that does not go with the offsets")
            }
            _ => unreachable!("case {case} is not one of broken_broadcast's"),
        }
    }

    /// A reduction, math or arithmetic on the wrong dtype, or mixed dtypes.
    fn broken_dtype(&mut self, name: &str, red: &str, case: usize) -> (String, &'static str) {
        match case {
            17 => {
                let s = self.tile_shape();
                let b = self.ex(Dt::Bool, &s).text;
                let e = match self.rng.below(4) {
                    0 => format!("{red}({b}, {})", if s.len() == 2 { "1" } else { "0" }),
                    1 => format!("{}.{red}()", paren(&b)),
                    2 => format!("exp({})", self.ex(Dt::I32, &s).text),
                    _ => format!("{} + {}", paren(&b), paren(&b)),
                };
                (format!("let {name} = {e};\n"), "a reduction or math on the wrong dtype")
            }
            18 => {
                let s = self.tile_shape();
                let f = self.ex(Dt::F32, &s).text;
                let i = self.ex(Dt::I32, &s).text;
                let e = if self.rng.chance(50) {
                    format!("{} * {}", paren(&f), paren(&i))
                } else {
                    format!("where_({f} > 0.0, {f}, {i})")
                };
                (format!("let {name} = {e};\n"), "mixed dtypes")
            }
            _ => unreachable!("case {case} is not one of broken_dtype's"),
        }
    }

    /// A value that does not go into a mutable variable of another shape (a 1-D variable takes
    /// its own length only, a 2-D one what broadcasts to its shape).
    fn broken_assignment(&mut self) -> (String, &'static str) {
        let s = self.tile_shape();
        let v = self.fresh_name("mv");
        let init = self.shape_text(&s);
        let other = loop {
            let o = self.tile_shape();
            let fits = if s.len() == 1 { o == s } else { bcast(&s, &o).as_ref() == Some(&s) };
            if !fits {
                break o;
            }
        };
        let e = self.ex(Dt::F32, &other).text;
        (format!("let mut {v} = zeros({init});\n{v} = {e};\n"), "assignment of another shape")
    }
}

/// `t` in parentheses unless it is a name or already one group.
fn paren(t: &str) -> String {
    let simple = t.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    let grouped = t.starts_with('(') && t.ends_with(')') && {
        let mut depth = 0i32;
        t.char_indices().all(|(i, c)| {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                _ => {}
            }
            depth > 0 || i == t.len() - 1
        })
    };
    if simple || grouped {
        t.to_string()
    } else {
        format!("({t})")
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum TypedKind {
    /// Right by construction: must check and expand.
    Valid,
    /// One statement wrong in a known way: must give a spanned error.
    Broken,
}

/// A typed 2-D kernel, and what was broken in it (if it was).
pub(super) fn typed_kernel(rng: &mut Rng, kind: TypedKind) -> (TokenStream, &'static str) {
    let generic = rng.chance(15);
    let mut t =
        Typed { rng, vars: Vec::new(), ptrs: Vec::new(), aliases: Vec::new(), next: 0, depth: 0, generic };
    let mut body = String::new();
    // The usual prologue, then random statements.
    body.push_str("let rows = program_id(0) * R + arange(0, R);\nlet cols = arange(0, C);\n");
    t.vars.push(TVar {
        name: "rows".into(),
        dt: Dt::I32,
        shape: vec![DIM_R],
        storage: false,
        mutable: false,
    });
    t.vars.push(TVar {
        name: "cols".into(),
        dt: Dt::I32,
        shape: vec![DIM_C],
        storage: false,
        mutable: false,
    });
    if t.rng.chance(70) {
        let m = t.rng.word(&["rows.expand_dims(1) < n_rows", "expand_dims(rows < n_rows, 1)"]);
        body.push_str(&format!(
            "let offs = rows.expand_dims(1) * n_cols + cols.expand_dims(0);\nlet mask = ({m}) & (cols < n_cols).expand_dims(0);\n"
        ));
        t.vars.push(TVar {
            name: "offs".into(),
            dt: Dt::I32,
            shape: vec![DIM_R, DIM_C],
            storage: false,
            mutable: false,
        });
        t.vars.push(TVar {
            name: "mask".into(),
            dt: Dt::Bool,
            shape: vec![DIM_R, DIM_C],
            storage: false,
            mutable: false,
        });
    }
    let n = 2 + t.rng.below(6);
    // The wrong statement goes anywhere among the others, made from the variables before it.
    let broken_at = if kind == TypedKind::Broken { t.rng.below(n + 1) } else { usize::MAX };
    let mut what = "";
    for i in 0..=n {
        if i == broken_at {
            let (bad, w) = t.broken_stmt();
            body.push_str(&bad);
            what = w;
        }
        if i < n {
            t.stmt(0, &mut body);
        }
    }
    t.store(&mut body);
    let head = if generic { "T: Float, " } else { "" };
    let params: Vec<String> = TYPED_PTRS
        .iter()
        .map(|&(name, _, read, elem)| {
            let elem = if generic && matches!(name, "x" | "out") { "T" } else { elem };
            format!("{name}: *{} {elem}", if read { "const" } else { "mut" })
        })
        .collect();
    let src = format!(
        "fn k2<{head}const R: usize, const C: usize>({}, n_rows: i32, n_cols: i32, s: f32, seed: u64) {{\n{body}}}",
        params.join(", ")
    );
    (tokens(&src), what)
}
