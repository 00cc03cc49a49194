//! The types of IR values: element types ([`DType`]), tile lengths that stay symbolic in the
//! const generics until launch ([`Len`]), scalar and tile shapes ([`Shape`]), the two together
//! ([`Ty`]), and NumPy's broadcasting rule over concrete dims ([`broadcast_source_lane`]).
//!
//! The bottom of the crate: this module imports no other.
use serde::{Deserialize, Serialize};
use std::fmt;

/// Element types: of pointers, scalars and tile elements.
///
/// ```
/// use fuse_ir::DType;
///
/// assert_eq!(DType::from_name("bf16"), Some(DType::BF16));
/// assert_eq!(DType::BF16.size_bytes(), 2);
/// assert!(!DType::BF16.is_compute());
/// assert_eq!(DType::BF16.compute(), DType::F32);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DType {
    /// `bool`: a compute type (comparisons and masks); one byte in memory; never a parameter.
    Bool,
    /// `i8`: storage only, widened to `i32` for arithmetic.
    I8,
    /// `u8`: storage only, widened to `i32` for arithmetic.
    U8,
    /// `i32`: a compute type; `program_id`, `num_programs` and `arange` give it.
    I32,
    /// `u32`: a compute type.
    U32,
    /// `i64`: a compute type.
    I64,
    /// `u64`: a compute type.
    U64,
    /// `f16` (IEEE binary16): storage only, widened to `f32` for arithmetic.
    F16,
    /// `bf16` (bfloat16): storage only, widened to `f32` for arithmetic.
    BF16,
    /// `f32`: the one float compute type.
    F32,
}

impl DType {
    /// Every dtype, in declaration order.
    pub const ALL: [DType; 10] = [
        DType::Bool,
        DType::I8,
        DType::U8,
        DType::I32,
        DType::U32,
        DType::I64,
        DType::U64,
        DType::F16,
        DType::BF16,
        DType::F32,
    ];

    /// The name users write in kernels and in `.to(..)` casts.
    pub fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::I8 => "i8",
            DType::U8 => "u8",
            DType::I32 => "i32",
            DType::U32 => "u32",
            DType::I64 => "i64",
            DType::U64 => "u64",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F32 => "f32",
        }
    }

    /// The dtype [`DType::name`] spells `name`, or `None` for any other string.
    pub fn from_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == name)
    }

    /// Bytes per element in memory (`bool` is stored as one byte).
    pub fn size_bytes(self) -> usize {
        match self {
            DType::Bool | DType::I8 | DType::U8 => 1,
            DType::F16 | DType::BF16 => 2,
            DType::I32 | DType::U32 | DType::F32 => 4,
            DType::I64 | DType::U64 => 8,
        }
    }

    /// `f16`, `bf16` or `f32`.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::F32)
    }

    /// A signed or unsigned integer type of any width (not `bool`).
    pub fn is_int(self) -> bool {
        matches!(self, DType::I8 | DType::U8 | DType::I32 | DType::U32 | DType::I64 | DType::U64)
    }

    /// `i8`, `i32` or `i64`.
    pub fn is_signed_int(self) -> bool {
        matches!(self, DType::I8 | DType::I32 | DType::I64)
    }

    /// Types arithmetic is done in. Everything else is widened first (see [`DType::compute`]).
    pub fn is_compute(self) -> bool {
        matches!(self, DType::Bool | DType::I32 | DType::U32 | DType::I64 | DType::U64 | DType::F32)
    }

    /// The compute type a storage type widens to: `f16`/`bf16` → `f32`, `i8`/`u8` → `i32`.
    pub fn compute(self) -> DType {
        match self {
            DType::F16 | DType::BF16 => DType::F32,
            DType::I8 | DType::U8 => DType::I32,
            other => other,
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A tile length: `2^log2 * product(const generics)`. Every factor is a power of two, so every
/// length is one. `consts` holds indices into [`Kernel::consts`](crate::Kernel::consts), sorted,
/// repeated for powers.
///
/// A length is symbolic until launch, when the const generics get their values ([`Len::eval`]).
///
/// ```
/// use fuse_ir::Len;
///
/// // `2 * BLOCK`, where `BLOCK` is the kernel's first const generic.
/// let len = Len::of_const(0).mul(&Len::literal_log2(1));
/// let names = ["BLOCK".to_string()];
/// assert_eq!(len.eval(&[256]), Some(512));
/// assert_eq!(len.c_expr(&names), "(BLOCK * 2)");
/// assert_eq!(len.display(&names), "2 * BLOCK");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Len {
    /// The exponent of the literal power-of-two factor; negative for a division (`BLOCK / 2` has
    /// `log2 == -1`).
    pub log2: i32,
    /// The const generic factors, as indices into [`Kernel::consts`](crate::Kernel::consts)
    /// (sorted; an index appears once per power).
    pub consts: Vec<u32>,
}

impl Len {
    /// The literal length `2^log2` (no const generic factor).
    pub fn literal_log2(log2: i32) -> Len {
        Len { log2, consts: Vec::new() }
    }

    /// The length of the const generic with index `index` in
    /// [`Kernel::consts`](crate::Kernel::consts).
    pub fn of_const(index: u32) -> Len {
        Len { log2: 0, consts: vec![index] }
    }

    /// The product of two lengths (used for `2 * BLOCK` and the like).
    pub fn mul(&self, other: &Len) -> Len {
        let mut consts = self.consts.clone();
        consts.extend_from_slice(&other.consts);
        consts.sort_unstable();
        Len { log2: self.log2 + other.log2, consts }
    }

    /// The value for concrete const-generic values (`const_values[i]` for
    /// [`Kernel::consts`](crate::Kernel::consts)`[i]`); `None` if a value is missing or not a power
    /// of two, or the result is not a whole number or not below `2^63`.
    pub fn eval(&self, const_values: &[u64]) -> Option<u64> {
        let mut log2 = i64::from(self.log2);
        for &c in &self.consts {
            let v = *const_values.get(c as usize)?;
            if !v.is_power_of_two() {
                return None;
            }
            log2 += i64::from(v.trailing_zeros());
        }
        if !(0..63).contains(&log2) {
            return None;
        }
        Some(1u64 << log2)
    }

    /// A C expression for this length, naming const generics by their (`#define`d) names
    /// (`const_names[i]` for index `i`, normally [`Kernel::consts`](crate::Kernel::consts)).
    ///
    /// # Panics
    /// If an index in [`Len::consts`] is out of range of `const_names`.
    pub fn c_expr(&self, const_names: &[String]) -> String {
        let factors: Vec<String> = self.consts.iter().map(|&c| const_names[c as usize].clone()).collect();
        let mut expr = if factors.is_empty() { "1".to_string() } else { factors.join(" * ") };
        match self.log2.cmp(&0) {
            std::cmp::Ordering::Greater if self.consts.is_empty() => expr = format!("{}", 1u64 << self.log2),
            std::cmp::Ordering::Greater => expr = format!("({expr} * {})", 1u64 << self.log2),
            std::cmp::Ordering::Less => expr = format!("({expr} / {})", 1u64 << (-self.log2)),
            std::cmp::Ordering::Equal if self.consts.len() > 1 => expr = format!("({expr})"),
            std::cmp::Ordering::Equal => {}
        }
        expr
    }

    /// How users would write it (`2 * BLOCK`, `BLOCK / 4`), for diagnostics; const generics named
    /// as in [`Len::c_expr`].
    ///
    /// # Panics
    /// If an index in [`Len::consts`] is out of range of `const_names`.
    pub fn display(&self, const_names: &[String]) -> String {
        let mut parts: Vec<String> = Vec::new();
        if (self.log2 > 0 || self.consts.is_empty()) && self.log2 >= 0 {
            parts.push(format!("{}", 1u64 << self.log2.min(62)));
        }
        parts.extend(self.consts.iter().map(|&c| const_names[c as usize].clone()));
        let mut s = parts.join(" * ");
        if self.log2 < 0 {
            s = format!("{s} / {}", 1u64 << (-self.log2).min(62));
        }
        s
    }
}

/// Scalar (uniform across the program), a 1-D tile, or a 2-D tile.
///
/// A 2-D tile `[rows, cols]` is stored row-major: element `(r, c)` is lane `r * cols + c`, so a
/// tile's lanes are numbered the same way whatever its rank, and
/// [`Expr::Reshape`](crate::Expr::Reshape) keeps them.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Shape {
    /// One value, the same in every thread of a program.
    Scalar,
    /// A 1-D tile of this many elements, spread over the threads of a program.
    Tile(Len),
    /// A 2-D tile `[rows, cols]` (row-major), spread over the threads of a program.
    Tile2(Len, Len),
}

impl Shape {
    /// Whether this is [`Shape::Scalar`].
    pub fn is_scalar(&self) -> bool {
        matches!(self, Shape::Scalar)
    }
    /// The number of lanes of a tile (the product of its dims); `None` for a scalar.
    pub fn len(&self) -> Option<Len> {
        match self {
            Shape::Scalar => None,
            Shape::Tile(l) => Some(l.clone()),
            Shape::Tile2(r, c) => Some(r.mul(c)),
        }
    }
    /// The dims: none for a scalar, `[len]` for a 1-D tile, `[rows, cols]` for a 2-D tile.
    pub fn dims(&self) -> Vec<Len> {
        match self {
            Shape::Scalar => Vec::new(),
            Shape::Tile(l) => vec![l.clone()],
            Shape::Tile2(r, c) => vec![r.clone(), c.clone()],
        }
    }
    /// 0, 1 or 2.
    pub fn rank(&self) -> usize {
        match self {
            Shape::Scalar => 0,
            Shape::Tile(_) => 1,
            Shape::Tile2(..) => 2,
        }
    }
    /// The shape with these dims (`None` for more than two).
    pub fn from_dims(dims: &[Len]) -> Option<Shape> {
        match dims {
            [] => Some(Shape::Scalar),
            [l] => Some(Shape::Tile(l.clone())),
            [r, c] => Some(Shape::Tile2(r.clone(), c.clone())),
            _ => None,
        }
    }
}

/// For [`Expr::Broadcast`](crate::Expr::Broadcast): the lane of a source of dims `src` that lane
/// `lane` of a destination of dims `dst` reads, under NumPy's rules (dims aligned at the right; a
/// missing or unit source dim repeats). Dims are concrete sizes here (launch-time values of
/// [`Len`]s).
///
/// ```
/// use fuse_ir::broadcast_source_lane;
/// // [2, 1] -> [2, 3]: lane (1, 2) = 5 reads row 1.
/// assert_eq!(broadcast_source_lane(&[2, 1], &[2, 3], 5), 1);
/// // [3] (as [1, 3]) -> [2, 3]: lane 5 reads column 2.
/// assert_eq!(broadcast_source_lane(&[3], &[2, 3], 5), 2);
/// ```
pub fn broadcast_source_lane(src: &[u64], dst: &[u64], lane: u64) -> u64 {
    let mut rest = lane;
    let mut src_lane = 0;
    let mut src_stride = 1;
    for (i, &d) in dst.iter().enumerate().rev() {
        let coord = rest % d.max(1);
        rest /= d.max(1);
        let back = dst.len() - 1 - i;
        if back < src.len() {
            let s = src[src.len() - 1 - back];
            if s != 1 {
                src_lane += coord * src_stride;
            }
            src_stride *= s;
        }
    }
    src_lane
}

/// The type of a value.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Ty {
    /// The element type.
    pub dtype: DType,
    /// Scalar or tile, and the tile's length.
    pub shape: Shape,
}

impl Ty {
    /// A scalar of `dtype`.
    pub fn scalar(dtype: DType) -> Ty {
        Ty { dtype, shape: Shape::Scalar }
    }
    /// A tile of `len` elements of `dtype`.
    pub fn tile(dtype: DType, len: Len) -> Ty {
        Ty { dtype, shape: Shape::Tile(len) }
    }
    /// A 2-D tile `[rows, cols]` of `dtype`.
    pub fn tile2(dtype: DType, rows: Len, cols: Len) -> Ty {
        Ty { dtype, shape: Shape::Tile2(rows, cols) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn len_eval_and_c_expr() {
        let names = vec!["BLOCK".to_string(), "N".to_string()];
        let l = Len::of_const(0).mul(&Len::literal_log2(1));
        assert_eq!(l.eval(&[256, 4]), Some(512));
        assert_eq!(l.c_expr(&names), "(BLOCK * 2)");
        assert_eq!(Len::literal_log2(10).c_expr(&names), "1024");
        assert_eq!(Len::of_const(0).eval(&[100]), None, "non power of two rejected");
        let half = Len { log2: -1, consts: vec![0] };
        assert_eq!(half.eval(&[1]), None);
        assert_eq!(half.eval(&[8]), Some(4));
    }
}
