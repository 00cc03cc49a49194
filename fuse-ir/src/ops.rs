//! The operators of the IR's expressions: element-wise ([`UnaryOp`], [`BinaryOp`]), reductions
//! ([`ReduceOp`], [`ArgOp`]), how many bits of a Philox block a random lane takes
//! ([`RandWidth`]), and which element types `dot` takes ([`dot_accumulator`], [`DOT_MIN_DIM`]).
use crate::types::DType;
use serde::{Deserialize, Serialize};

/// An element-wise function of one operand ([`Expr::Unary`](crate::Expr::Unary)); the result has
/// the operand's dtype.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum UnaryOp {
    /// Arithmetic negation (ints wrap).
    Neg,
    /// Logical not on bool, bitwise not on ints.
    Not,
    /// `abs` on floats and signed ints (ints wrap: `abs(i32::MIN) == i32::MIN`).
    Abs,
    // f32 only from here on.
    /// `e^x`.
    Exp,
    /// `2^x`.
    Exp2,
    /// Natural logarithm.
    Log,
    /// Base-2 logarithm.
    Log2,
    /// Square root.
    Sqrt,
    /// `1 / sqrt(x)`.
    Rsqrt,
    /// The error function.
    Erf,
    /// Hyperbolic tangent.
    Tanh,
    /// `1 / (1 + exp(-x))`.
    Sigmoid,
    /// Round toward negative infinity.
    Floor,
    /// Round toward positive infinity.
    Ceil,
    /// Sine (radians).
    Sin,
    /// Cosine (radians).
    Cos,
}

impl UnaryOp {
    /// The lower-case name: how kernels spell the math functions (`exp`, `rsqrt`, ...; see
    /// [`UnaryOp::MATH`]), and `neg`, `not`, `abs` for the others. Used to look up the math
    /// functions by name and in error messages.
    pub fn name(self) -> &'static str {
        match self {
            UnaryOp::Neg => "neg",
            UnaryOp::Not => "not",
            UnaryOp::Abs => "abs",
            UnaryOp::Exp => "exp",
            UnaryOp::Exp2 => "exp2",
            UnaryOp::Log => "log",
            UnaryOp::Log2 => "log2",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::Rsqrt => "rsqrt",
            UnaryOp::Erf => "erf",
            UnaryOp::Tanh => "tanh",
            UnaryOp::Sigmoid => "sigmoid",
            UnaryOp::Floor => "floor",
            UnaryOp::Ceil => "ceil",
            UnaryOp::Sin => "sin",
            UnaryOp::Cos => "cos",
        }
    }

    /// The math functions, which take and return f32.
    pub const MATH: [UnaryOp; 13] = [
        UnaryOp::Exp,
        UnaryOp::Exp2,
        UnaryOp::Log,
        UnaryOp::Log2,
        UnaryOp::Sqrt,
        UnaryOp::Rsqrt,
        UnaryOp::Erf,
        UnaryOp::Tanh,
        UnaryOp::Sigmoid,
        UnaryOp::Floor,
        UnaryOp::Ceil,
        UnaryOp::Sin,
        UnaryOp::Cos,
    ];
}

/// An element-wise operation on two operands of one dtype ([`Expr::Binary`](crate::Expr::Binary)).
/// The result has that dtype, except for comparisons, whose result is bool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BinaryOp {
    /// `a + b`. Ints wrap on overflow.
    Add,
    /// `a - b`. Ints wrap on overflow.
    Sub,
    /// `a * b`. Ints wrap on overflow.
    Mul,
    /// Ints: truncating; division by zero gives 0 (on both back ends). Floats: IEEE.
    Div,
    /// Ints: sign of the dividend (C/Rust `%`); by zero gives 0. Floats: `fmodf`.
    Rem,
    /// `maximum(a, b)`: IEEE maxNum on floats (a NaN operand is ignored).
    Max,
    /// `minimum(a, b)`: IEEE minNum on floats (a NaN operand is ignored).
    Min,
    /// `a & b`: logical on bool, bitwise on ints.
    And,
    /// `a | b`: logical on bool, bitwise on ints.
    Or,
    /// `a ^ b`: logical on bool, bitwise on ints.
    Xor,
    // Comparisons: the result is bool.
    /// `a < b` (bool result).
    Lt,
    /// `a <= b` (bool result).
    Le,
    /// `a > b` (bool result).
    Gt,
    /// `a >= b` (bool result).
    Ge,
    /// `a == b` (bool result).
    Eq,
    /// `a != b` (bool result).
    Ne,
}

impl BinaryOp {
    /// `<`, `<=`, `>`, `>=`, `==` or `!=`: the result is bool.
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge | BinaryOp::Eq | BinaryOp::Ne
        )
    }
    /// `&`, `|` or `^`.
    pub fn is_bitwise(self) -> bool {
        matches!(self, BinaryOp::And | BinaryOp::Or | BinaryOp::Xor)
    }
}

/// How [`Expr::Reduce`](crate::Expr::Reduce) combines the lanes of a tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ReduceOp {
    /// `sum(t)`.
    Sum,
    /// `max(t)`.
    Max,
    /// `min(t)`.
    Min,
}

/// What [`Expr::ArgReduce`](crate::Expr::ArgReduce) looks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ArgOp {
    /// `argmax`.
    Max,
    /// `argmin`.
    Min,
}

/// How many bits of a Philox4x32-10 block one lane of [`Expr::Rand`](crate::Expr::Rand) takes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RandWidth {
    /// `rand`: a 32-bit word per lane, four lanes per Philox call
    /// ([`philox::rand`](crate::philox::rand)).
    #[default]
    W32,
    /// `rand16`: a 16-bit half-word per lane, eight lanes per Philox call
    /// ([`philox::rand16`](crate::philox::rand16)).
    W16,
}

impl RandWidth {
    /// `true` for [`RandWidth::W32`] (serde's `skip_serializing_if`).
    pub fn is_w32(&self) -> bool {
        *self == RandWidth::W32
    }
    /// Lanes that share one Philox call: 4 or 8.
    pub fn lanes_per_call(self) -> u64 {
        match self {
            RandWidth::W32 => 4,
            RandWidth::W16 => 8,
        }
    }
    /// The language's name for it.
    pub fn name(self) -> &'static str {
        match self {
            RandWidth::W32 => "rand",
            RandWidth::W16 => "rand16",
        }
    }
}

/// The accumulator dtype of [`Expr::Dot`](crate::Expr::Dot) for operands of `input` (their storage
/// type): `F32` for `F16`, `BF16` and `F32` (as TF32), `I32` for `I8`; `None` for any other type,
/// which `dot` does not take.
///
/// ```
/// use fuse_ir::{dot_accumulator, DType};
///
/// assert_eq!(dot_accumulator(DType::BF16), Some(DType::F32));
/// assert_eq!(dot_accumulator(DType::I8), Some(DType::I32));
/// assert_eq!(dot_accumulator(DType::U8), None);
/// ```
pub fn dot_accumulator(input: DType) -> Option<DType> {
    match input {
        DType::F16 | DType::BF16 | DType::F32 => Some(DType::F32),
        DType::I8 => Some(DType::I32),
        _ => None,
    }
}

/// The smallest M, N and K of [`Expr::Dot`](crate::Expr::Dot).
pub const DOT_MIN_DIM: u64 = 16;
