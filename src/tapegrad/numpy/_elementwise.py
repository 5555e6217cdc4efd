"""Elementwise functions, comparisons and logic of ``tapegrad.numpy``.

Conventions shared by every function here:

- Operands may be Tensors, NumPy/CuPy arrays or Python numbers; they broadcast like NumPy and
  the result has the broadcast shape. Shapes that do not broadcast raise ``ValueError`` naming
  the op and the shapes.
- Dtypes follow NumPy's promotion; a Python number keeps the other operand's dtype
  (``tnp.maximum(x32, 0.0)`` is float32). When every operand is a Python number the first
  becomes a float32 Tensor (tapegrad's default for Python data). Transcendental functions of
  integer inputs are float64, as in NumPy. Gradients exist for floating inputs only.
- Out of the domain the result is NaN (``inf`` at a pole), without a warning. Rules whose
  derivative is unbounded give a zero gradient wherever the cotangent is zero, so
  ``where(x > 0, sqrt(x), 0.0)`` has a finite gradient at 0.
- Conventions at kinks (``abs``, ``relu``, ``maximum``, ``clip``, ...) are tabulated in
  ``docs/conventions.md``.
"""

from __future__ import annotations

from tapegrad.core import dtypes as _tg_dtypes
from tapegrad.ops._registry import ns as _ns
from tapegrad.ops._registry import tensor_arg as _tensor_arg

#: Every function here is an op's public name in the op table (each primitive's ``names``);
#: written out so that they are importable and visible to type checkers (a test keeps these lines
#: equal to the table).
__all__ = [
    "abs", "absolute", "acos", "acosh", "add", "angle", "arccos", "arccosh", "arcsin",
    "arcsinh", "arctan", "arctan2", "arctanh", "around", "asin", "asinh", "astype", "atan",
    "atan2", "atanh", "bitwise_and", "bitwise_count", "bitwise_invert", "bitwise_left_shift",
    "bitwise_not", "bitwise_or", "bitwise_right_shift", "bitwise_xor", "cbrt", "ceil", "clip",
    "conj", "conjugate", "copysign", "cos", "cosh", "deg2rad", "degrees", "divide", "divmod",
    "equal", "erf", "erfc", "exp", "exp2", "expm1", "fabs", "fix", "float_power", "floor",
    "floor_divide", "fmax", "fmin", "fmod", "frexp", "gcd", "gelu", "greater", "greater_equal",
    "heaviside", "hypot", "i0", "imag", "invert", "iscomplex", "isfinite", "isinf", "isnan",
    "isneginf", "isposinf", "isreal", "lcm", "ldexp", "left_shift", "less", "less_equal",
    "log", "log10", "log1p", "log2", "logaddexp", "logaddexp2", "logical_and", "logical_not",
    "logical_or", "logical_xor", "maximum", "minimum", "mod", "modf", "multiply",
    "negative", "nextafter", "not_equal", "positive", "pow", "power", "rad2deg", "radians",
    "real", "reciprocal", "relu", "remainder", "right_shift", "rint", "round", "sigmoid",
    "sign", "signbit", "sin", "sinc", "sinh", "softplus", "spacing", "sqrt", "square",
    "subtract", "tan", "tanh", "true_divide", "trunc", "where",
]  # fmt: skip

abs = _ns.abs
absolute = _ns.absolute
acos = _ns.acos
acosh = _ns.acosh
add = _ns.add
angle = _ns.angle
arccos = _ns.arccos
arccosh = _ns.arccosh
arcsin = _ns.arcsin
arcsinh = _ns.arcsinh
arctan = _ns.arctan
arctan2 = _ns.arctan2
arctanh = _ns.arctanh
around = _ns.around
asin = _ns.asin
asinh = _ns.asinh
astype = _ns.astype
atan = _ns.atan
atan2 = _ns.atan2
atanh = _ns.atanh
bitwise_and = _ns.bitwise_and
bitwise_count = _ns.bitwise_count
bitwise_invert = _ns.bitwise_invert
bitwise_left_shift = _ns.bitwise_left_shift
bitwise_not = _ns.bitwise_not
bitwise_or = _ns.bitwise_or
bitwise_right_shift = _ns.bitwise_right_shift
bitwise_xor = _ns.bitwise_xor
cbrt = _ns.cbrt
ceil = _ns.ceil
clip = _ns.clip
conj = _ns.conj
conjugate = _ns.conjugate
copysign = _ns.copysign
cos = _ns.cos
cosh = _ns.cosh
deg2rad = _ns.deg2rad
degrees = _ns.degrees
divide = _ns.divide
divmod = _ns.divmod
equal = _ns.equal
erf = _ns.erf
erfc = _ns.erfc
exp = _ns.exp
exp2 = _ns.exp2
expm1 = _ns.expm1
fabs = _ns.fabs
fix = _ns.fix
float_power = _ns.float_power
floor = _ns.floor
floor_divide = _ns.floor_divide
fmax = _ns.fmax
fmin = _ns.fmin
fmod = _ns.fmod
frexp = _ns.frexp
gcd = _ns.gcd
gelu = _ns.gelu
greater = _ns.greater
greater_equal = _ns.greater_equal
heaviside = _ns.heaviside
hypot = _ns.hypot
i0 = _ns.i0
imag = _ns.imag
invert = _ns.invert
iscomplex = _ns.iscomplex
isfinite = _ns.isfinite
isinf = _ns.isinf
isnan = _ns.isnan
isneginf = _ns.isneginf
isposinf = _ns.isposinf
isreal = _ns.isreal
lcm = _ns.lcm
ldexp = _ns.ldexp
left_shift = _ns.left_shift
less = _ns.less
less_equal = _ns.less_equal
log = _ns.log
log10 = _ns.log10
log1p = _ns.log1p
log2 = _ns.log2
logaddexp = _ns.logaddexp
logaddexp2 = _ns.logaddexp2
logical_and = _ns.logical_and
logical_not = _ns.logical_not
logical_or = _ns.logical_or
logical_xor = _ns.logical_xor
maximum = _ns.maximum
minimum = _ns.minimum
mod = _ns.mod
modf = _ns.modf
multiply = _ns.multiply
negative = _ns.negative
nextafter = _ns.nextafter
not_equal = _ns.not_equal
positive = _ns.positive
pow = _ns.pow
power = _ns.power
rad2deg = _ns.rad2deg
radians = _ns.radians
real = _ns.real
reciprocal = _ns.reciprocal
relu = _ns.relu
remainder = _ns.remainder
right_shift = _ns.right_shift
rint = _ns.rint
round = _ns.round
sigmoid = _ns.sigmoid
sign = _ns.sign
signbit = _ns.signbit
sin = _ns.sin
sinc = _ns.sinc
sinh = _ns.sinh
softplus = _ns.softplus
spacing = _ns.spacing
sqrt = _ns.sqrt
square = _ns.square
subtract = _ns.subtract
tan = _ns.tan
tanh = _ns.tanh
true_divide = _ns.true_divide
trunc = _ns.trunc
where = _ns.where
def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """Replace NaN with ``nan``, ``+inf`` with ``posinf`` and ``-inf`` with ``neginf`` (NumPy's
    ``nan_to_num``); the real and imaginary parts of complex input are treated separately.

    Args:
        x: Tensor, array or number of any dtype; integer and boolean input is returned as is.
        copy: Accepted for NumPy compatibility (tapegrad never modifies in place).
        nan: The value for NaN (default 0.0).
        posinf: The value for ``+inf`` (default: the largest finite value of the dtype).
        neginf: The value for ``-inf`` (default: the most negative finite value).

    Returns:
        Tensor of ``x``'s shape and dtype.

    Gradient: ``g`` where the entry is finite, 0 where it was replaced (the replacement is a
    constant). The replacement values get no gradient.
    """
    x = _tensor_arg(x)
    kind = x.dtype.kind
    if kind not in "fc":
        return x
    finfo = _tg_dtypes.finfo(x.dtype)
    hi = finfo.max if posinf is None else posinf
    lo = finfo.min if neginf is None else neginf

    def fix(v):
        v = _ns.where(_ns.isnan(v), nan, v)
        v = _ns.where(_ns.isposinf(v), hi, v)
        return _ns.where(_ns.isneginf(v), lo, v)

    if kind == "c":
        return fix(_ns.real(x)) + 1j * fix(_ns.imag(x))
    return fix(x)


__all__ += ["nan_to_num"]
