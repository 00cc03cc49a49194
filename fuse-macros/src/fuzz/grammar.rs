//! (b) Kernels from a small grammar of the tile language, most of them wrong in some way.

use super::mutate::LITERALS;
use super::*;

const ELEM_TYPES: &[&str] = &["f32", "f16", "bf16", "i32", "i64", "u32", "u64", "u8", "i8", "bool", "f64"];
const SCALAR_TYPES: &[&str] = &[
    "i32", "i64", "u32", "u64", "f32", "f16", "u8", "bool", "f64", "usize", "Vec<f32>", "&[f32]", "String",
    "T",
];
const FUNCS: &[(&str, usize)] = &[
    ("program_id", 1),
    ("num_programs", 1),
    ("arange", 2),
    ("zeros", 1),
    ("full", 2),
    ("load", 2),
    ("load", 3),
    ("load", 1),
    ("where_", 3),
    ("maximum", 2),
    ("minimum", 2),
    ("sum", 1),
    ("max", 1),
    ("min", 1),
    ("cdiv", 2),
    ("rand", 2),
    ("rand16", 2),
    ("abs", 1),
    ("exp", 1),
    ("exp2", 1),
    ("log", 1),
    ("sqrt", 1),
    ("rsqrt", 1),
    ("erf", 1),
    ("tanh", 1),
    ("sigmoid", 1),
    ("floor", 1),
    ("ceil", 1),
    ("sin", 1),
    ("cos", 1),
    ("log2", 1),
    ("lod", 1),
    ("sum", 2),
    ("max", 2),
    ("min", 2),
    ("argmax", 1),
    ("argmax", 2),
    ("argmin", 1),
    ("argmin", 2),
    ("expand_dims", 2),
    ("expand_dims", 2),
    ("broadcast_to", 2),
    ("reshape", 2),
    ("trans", 1),
    ("split", 1),
    ("join", 2),
    ("dot", 2),
    ("dot", 3),
    ("zeros", 1),
    ("full", 2),
];
const METHODS: &[&str] = &[
    "exp",
    "sum",
    "max",
    "min",
    "sqrt",
    "abs",
    "maximum",
    "minimum",
    "sigmoid",
    "frobnicate",
    "argmax",
    "argmin",
    "expand_dims",
    "expand_dims",
    "broadcast_to",
    "reshape",
    "trans",
    "split",
    "join",
    "dot",
];
const BINOPS: &[&str] =
    &["+", "-", "*", "/", "%", "<", "<=", ">", ">=", "==", "!=", "&", "|", "^", "&&", "||"];

struct Gen<'r> {
    rng: &'r mut Rng,
    names: Vec<String>,
    consts: Vec<String>,
    /// The kernel's type parameters (right or wrong), usable where a type goes.
    types: Vec<String>,
    depth: u32,
}

impl Gen<'_> {
    fn name(&mut self) -> String {
        if self.names.is_empty() || self.rng.chance(5) {
            return rng_ident(self.rng);
        }
        self.rng.pick(&self.names).clone()
    }

    fn constant(&mut self) -> String {
        if !self.consts.is_empty() && self.rng.chance(60) {
            let c = self.rng.pick(&self.consts).clone();
            return match self.rng.below(4) {
                0 => format!("2 * {c}"),
                1 => format!("{c} / 2"),
                _ => c,
            };
        }
        self.rng.pick(&["1", "2", "4", "128", "256", "3", "100", "0", "1024", "65536", "-4"]).to_string()
    }

    /// A tile shape: mostly `[M, N]` of constants, sometimes of another rank or not constant.
    fn shape(&mut self) -> String {
        let rank = match self.rng.below(10) {
            0 => 0,
            1 | 2 => 1,
            3 => 3,
            _ => 2,
        };
        let dims: Vec<String> =
            (0..rank).map(|_| if self.rng.chance(85) { self.constant() } else { self.expr() }).collect();
        format!("[{}]", dims.join(", "))
    }

    /// An axis: mostly 0 or 1.
    fn axis(&mut self) -> String {
        match self.rng.below(10) {
            0 => self.expr(),
            1 => self.rng.pick(&["2", "-1", "3", "1u32", "1.0", "R"]).to_string(),
            _ => self.rng.pick(&["0", "1"]).to_string(),
        }
    }

    /// An element type: the kernel's type parameters as often as the concrete ones.
    fn elem_type(&mut self) -> String {
        if !self.types.is_empty() && self.rng.chance(50) {
            return self.rng.pick(&self.types).clone();
        }
        self.rng.pick(ELEM_TYPES).to_string()
    }

    fn expr(&mut self) -> String {
        self.depth += 1;
        let leaf = self.depth > 4 || self.rng.chance(25);
        let e = if leaf {
            match self.rng.below(6) {
                0 => self.rng.pick(LITERALS).to_string(),
                1 => self.constant(),
                2 => {
                    let ty = if self.rng.chance(50) { self.elem_type() } else { "f32".into() };
                    format!(
                        "{ty}::{}",
                        self.rng.pick(&["NEG_INFINITY", "INFINITY", "NAN", "MAX", "MIN", "EPSILON", "ONE"])
                    )
                }
                _ => self.name(),
            }
        } else {
            match self.rng.below(10) {
                0 => format!("arange(0, {})", self.constant()),
                1 | 2 => {
                    let (f, arity) = *self.rng.pick(FUNCS);
                    let arity = match self.rng.below(10) {
                        0 => arity + 1,
                        1 => arity.saturating_sub(1),
                        _ => arity,
                    };
                    // Shapes and axes where the 2-D functions take them, mostly.
                    let args: Vec<String> = (0..arity)
                        .map(|i| match (f, i) {
                            ("zeros" | "full", 0) | ("reshape" | "broadcast_to", 1)
                                if self.rng.chance(60) =>
                            {
                                self.shape()
                            }
                            ("sum" | "max" | "min" | "argmax" | "argmin" | "expand_dims", 1)
                                if self.rng.chance(60) =>
                            {
                                self.axis()
                            }
                            _ => self.expr(),
                        })
                        .collect();
                    format!("{f}({})", args.join(", "))
                }
                3 => {
                    let m = *self.rng.pick(METHODS);
                    let recv = self.expr();
                    let arg = match m {
                        "maximum" | "minimum" => self.expr(),
                        "expand_dims" if self.rng.chance(80) => self.axis(),
                        "reshape" | "broadcast_to" if self.rng.chance(80) => self.shape(),
                        "sum" | "max" | "min" | "argmax" | "argmin" if self.rng.chance(40) => self.axis(),
                        _ if self.rng.chance(10) => self.expr(),
                        _ => String::new(),
                    };
                    format!("({recv}).{m}({arg})")
                }
                4 => {
                    let t = self.elem_type();
                    let e = self.expr();
                    if self.rng.chance(50) {
                        format!("({e}).to({t})")
                    } else {
                        format!("({e}) as {t}")
                    }
                }
                5 => format!(
                    "{}(0) * {} + arange(0, {})",
                    self.rng.pick(&["program_id", "num_programs"]),
                    self.constant(),
                    self.constant()
                ),
                6 if self.rng.chance(50) => format!("{}({})", self.rng.pick(&["-", "!"]), self.expr()),
                6 => {
                    // The 2-D offsets pattern: rows down, columns across.
                    let (a, b, n) = (self.expr(), self.expr(), self.expr());
                    format!("({a}).expand_dims(1) * {n} + ({b}).expand_dims({})", self.axis())
                }
                7 => format!("load({} + {}, {})", self.name(), self.expr(), self.expr()),
                _ => {
                    let op = *self.rng.pick(BINOPS);
                    format!("({} {op} {})", self.expr(), self.expr())
                }
            }
        };
        self.depth -= 1;
        e
    }

    fn stmts(&mut self, n: usize, nest: u32) -> String {
        let mut out = String::new();
        for _ in 0..n {
            let s = match self.rng.below(if nest > 1 { 6 } else { 9 }) {
                0..=2 => {
                    let name = if self.rng.chance(70) || self.names.is_empty() {
                        rng_ident(self.rng)
                    } else {
                        self.name()
                    };
                    let m = if self.rng.chance(30) { "mut " } else { "" };
                    let e = self.expr();
                    self.names.push(name.clone());
                    if self.rng.chance(8) {
                        // A tuple `let`: of a split (right) or of anything else (an error).
                        let other = rng_ident(self.rng);
                        self.names.push(other.clone());
                        let init = if self.rng.chance(70) { format!("split({e})") } else { e };
                        format!("let ({m}{name}, {other}) = {init};\n")
                    } else {
                        format!("let {m}{name} = {e};\n")
                    }
                }
                3 => format!(
                    "{} {} {};\n",
                    self.name(),
                    self.rng.pick(&["=", "+=", "-=", "*=", "/=", "%="]),
                    self.expr()
                ),
                4 | 5 => {
                    let mask = if self.rng.chance(70) { format!(", {}", self.expr()) } else { String::new() };
                    format!("store({} + {}, {}{mask});\n", self.name(), self.expr(), self.expr())
                }
                6 => {
                    let count = 1 + self.rng.below(3);
                    let body = self.stmts(count, nest + 1);
                    let els = if self.rng.chance(40) {
                        format!(" else {{ {} }}", self.stmts(1, nest + 1))
                    } else {
                        String::new()
                    };
                    format!("if {} {{ {body} }}{els}\n", self.expr())
                }
                7 => {
                    let v = rng_ident(self.rng);
                    let range = if self.rng.chance(50) {
                        format!("{}..{}", self.expr(), self.expr())
                    } else {
                        format!("({}..{}).step_by({})", self.expr(), self.expr(), self.constant())
                    };
                    self.names.push(v.clone());
                    let count = 1 + self.rng.below(3);
                    let body = self.stmts(count, nest + 1);
                    format!("for {v} in {range} {{ {body} }}\n")
                }
                _ => format!("{};\n", self.expr()),
            };
            out.push_str(&s);
        }
        out
    }
}

fn rng_ident(rng: &mut Rng) -> String {
    let names = [
        "a", "b", "c", "offs", "mask", "v", "acc", "t", "i", "x", "out", "n", "tmp", "r", "s", "rows", "cols",
    ];
    let base = *rng.pick(&names);
    if rng.chance(30) {
        format!("{base}{}", rng.below(3))
    } else {
        base.to_string()
    }
}

pub(super) fn generated_kernel(rng: &mut Rng) -> TokenStream {
    let mut consts = Vec::new();
    for _ in 0..rng.below(3) {
        consts.push(rng.pick(&["BLOCK", "B", "N", "K", "R", "C"]).to_string());
    }
    let mut generics: Vec<String> = consts
        .iter()
        .map(|c| format!("const {c}: {}", if rng.chance(95) { "usize" } else { "u32" }))
        .collect();
    // Generic kernels: mostly right (`T: Float`, `O: Half`), sometimes not.
    let mut types = Vec::new();
    let mut where_clause = String::new();
    if rng.chance(25) {
        let most = if rng.chance(10) { 4 } else { 2 };
        for name in ["T", "O", "U", "V"].into_iter().take(1 + rng.below(most)) {
            let decl = match rng.below(20) {
                0 => name.to_string(),
                1 => format!("{name}: Copy"),
                2 => format!("{name}: Float + Copy"),
                3 => format!("{name}: Float = f32"),
                4 => format!("{name}: fuse::Float"),
                5 => format!("{name}: ?Sized"),
                6 => {
                    where_clause = format!(" where {name}: Float");
                    name.to_string()
                }
                7 | 8 => format!("{name}: Half"),
                _ => format!("{name}: Float"),
            };
            generics.insert(types.len(), decl);
            types.push(name.to_string());
        }
        if rng.chance(5) {
            generics.insert(0, "'a".into());
        }
    }
    let mut g = Gen { rng, names: Vec::new(), consts: consts.clone(), types, depth: 0 };
    let mut params = Vec::new();
    for _ in 0..g.rng.below(6) {
        let name = rng_ident(g.rng);
        let ty = match g.rng.below(5) {
            0 | 1 => format!("*const {}", g.elem_type()),
            2 | 3 => format!("*mut {}", g.elem_type()),
            _ if !g.types.is_empty() && g.rng.chance(10) => g.rng.pick(&g.types).clone(),
            _ => g.rng.pick(SCALAR_TYPES).to_string(),
        };
        params.push(format!("{name}: {ty}"));
        g.names.push(name);
    }
    g.names.extend(consts.iter().cloned());
    let n = 1 + g.rng.below(8);
    let body = g.stmts(n, 0);
    let generics = if generics.is_empty() { String::new() } else { format!("<{}>", generics.join(", ")) };
    let src = format!("fn gen{generics}({}){where_clause} {{\n{body}}}", params.join(", "));
    // Every generated string lexes (balanced delimiters, known tokens).
    tokens(&src)
}
