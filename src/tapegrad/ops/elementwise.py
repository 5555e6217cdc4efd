"""Elementwise primitives: arithmetic, the ufunc table, piecewise ops, casts, predicates.

Rules common to every op here (each states only what differs):

- **Shapes.** Inputs broadcast like NumPy; the output has the broadcast shape. ``apply`` sums
  each cotangent back over broadcast dimensions. Shapes that do not broadcast raise
  ``ValueError`` naming the op and the shapes.
- **Dtypes.** NumPy's: the ufunc decides (``sin`` of integers is float64). Python numbers given
  as operands stay weakly typed (``float32 Tensor * 2.0`` is float32) and get no cotangent.
  Only floating and complex inputs have gradients; a cotangent is cast to its input's dtype.
- **Domain.** Outside an op's domain the result is NaN (``inf`` at a pole), as NumPy gives it,
  without a warning (see ``tg.debug_nans`` to find where one appears).
- **NaN safety.** Where a derivative is unbounded (``sqrt`` and ``log`` at 0, ``arcsin`` at
  +-1, ``x / 0``, ...) the rule gives a zero cotangent, not ``0 * inf = NaN``, wherever the
  incoming cotangent is zero, so ``where(x > 0, sqrt(x), 0.0)`` has gradient 0 at ``x = 0``,
  to every order (TensorFlow's ``multiply_no_nan``).
- **Complex numbers.** Holomorphic ops use JAX's convention: the cotangent of ``z`` is
  ``g * f'(z)`` (no conjugate); the gradient of a real function is ``df/dx - i df/dy``
  (docs/conventions.md).

The **ufunc table** (:data:`UNARY`, :data:`BINARY`, :data:`PREDICATES`) declares each plain op
in one row: its NumPy name, its derivative written once for arrays and for Tensors
(``lambda xp, x, y: xp.cos(x)``, evaluated on NumPy/CuPy arrays in the first-order backward
and on Tensors for higher orders), what it saves and its conventions. The op's class, its
``tapegrad.numpy`` function, its Tensor method, its forward-mode rule and its batching rule all
follow from the row. The first-order backward of a table op is one fused primitive
(:class:`UnaryGrad` / :class:`BinaryGrad`: the derivative and the product in one pass over
memory); its own backward differentiates the derivative formula, so every order is exact.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from tapegrad.core.function import Function, Traits, _Quiet
from tapegrad.core.tensor import Tensor, const
from tapegrad.ops._batching import elementwise, scaled_cotangent
from tapegrad.ops._registry import expose, ns, operand, operands, tensor_arg

_LN2 = math.log(2.0)
_LN10 = math.log(10.0)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_INV_SQRT2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_GELU_C = math.sqrt(2.0 / math.pi)
_GELU_A = 0.044715


def _special(xp):
    """``scipy.special`` for NumPy arrays, ``cupyx.scipy.special`` for CuPy arrays."""
    if xp is np:
        import scipy.special

        return scipy.special
    import cupyx.scipy.special  # pragma: no cover - GPU only  # pyright: ignore[reportMissingImports, reportUnsupportedDunderAll]

    return cupyx.scipy.special  # pragma: no cover - GPU only


class _ArrayNS:
    """The array namespace derivative formulas see on arrays: NumPy (or CuPy) plus the special
    functions tapegrad's namespace also has (``sigmoid``, ``erf``, ...), so that one formula
    serves arrays and Tensors."""

    _SPECIAL = {"erf": "erf", "erfc": "erfc"}

    def __init__(self, xp):
        self._xp = xp

    def __getattr__(self, name):
        # (scipy.special is imported the first time a formula needs one of its functions)
        special = self._SPECIAL.get(name)
        got = getattr(_special(self._xp), special) if special else getattr(self._xp, name)
        setattr(self, name, got)
        return got

    def sigmoid(self, x):
        """``1 / (1 + exp(-x))``: the formula of ``scipy.special.expit`` (and of the fused
        kernels' ``sigmoid``), in the backend's own functions, so that no derivative formula
        imports ``scipy.special`` for it. Finite everywhere: ``exp(-x)`` overflows to ``inf``
        (the result 0) below about -709 in float64 (-88 in float32); every rule runs with
        floating-point warnings off."""
        return 1 / (1 + self._xp.exp(-x))


_ANS: dict = {}


def array_ns(xp) -> _ArrayNS:
    """The cached :class:`_ArrayNS` of backend ``xp``."""
    a = _ANS.get(xp)
    if a is None:
        a = _ANS[xp] = _ArrayNS(xp)
    return a


def _all_finite(xp, out) -> bool:
    """Whether every entry of floating ``out`` is finite, in one cheap pass (a BLAS dot; a
    false "no" for huge finite values only costs the exact path)."""
    if out.dtype.kind == "c":
        return bool(xp.isfinite(out).all())
    if out.dtype.itemsize >= 4:
        return bool(xp.isfinite(xp.vdot(out, out)))
    return bool(xp.isfinite(out.sum(dtype=xp.float32)))


def _masked(xp, g, mask, into=None):
    """``where(mask, g, +0.0)`` exactly (inf and NaN in ``g`` included), in one pass: ``g``'s
    bits times the 0/1 mask, so no ``inf * 0`` can make a NaN. ``into``: an array of the
    result's shape and dtype to write it to (it may be ``g`` itself)."""
    bits = _SAME_SIZE_INT.get(g.dtype.itemsize) if g.dtype.kind == "f" else None
    if bits is None:
        out = xp.where(mask, g, xp.zeros((), g.dtype))
        if into is not None:
            into[...] = out
            return into
        return out
    if into is None:
        shape = g.shape if g.shape == mask.shape else np.broadcast_shapes(g.shape, mask.shape)
        into = xp.empty(shape, g.dtype)
    xp.multiply(g.view(bits), mask, out=into.view(bits))
    return into


def _times(xp, g, d, nonan: bool, into=None):
    """``g * d`` in ``g``'s dtype; with ``nonan``, exactly 0 wherever ``g == 0``. A boolean
    ``d`` (a 0/1 derivative) selects: exactly ``where(d, g, 0)``. ``into``: an array of the
    result's shape and dtype to write it to (it may be ``g`` itself)."""
    if type(d) is np.ndarray and d.dtype == np.bool_ or getattr(d, "dtype", None) == np.bool_:
        return _masked(xp, g, d, into)
    if into is not None and not nonan and g.dtype.kind in "fc":
        return xp.multiply(g, d, out=into, casting="same_kind")
    out = g * d
    if out.dtype != g.dtype and g.dtype.kind in "fc" and out.dtype.kind != "c":
        out = out.astype(g.dtype)
    if nonan and out.size and not _all_finite(xp, out):
        out = xp.where(g == 0, xp.zeros((), out.dtype), out)
    if into is not None:
        into[...] = out
        return into
    return out


def _no_nan(xp, out, zero):
    """The fused-kernel form of the NaN-safe products and quotients: ``out``, but 0 where
    ``zero`` holds and ``out`` is not finite (an element at a time; the array rule replaces
    every ``zero`` element once any element of ``out`` is not finite, which differs from this
    only in the sign of a zero)."""
    return xp.where(zero & ~xp.isfinite(out), 0, out)


class MulNoNan(Function):
    """``a * b``, but exactly 0 wherever ``a == 0`` or ``b == 0``, even where the other factor
    is ``inf`` or NaN.

    The building block of NaN-safe rules (TensorFlow's ``multiply_no_nan``, made symmetric): a
    zero cotangent times an unbounded derivative is 0, and so is an unbounded cotangent times
    a zero derivative. Derivatives: ``b`` and ``a``, each applied with ``MulNoNan`` again, so
    every order stays NaN-free.
    """
    batch = elementwise  # vmap: broadcast like a ufunc
    traits = Traits(fresh=True, formula=lambda xp, a, b: _no_nan(xp, a * b, (a == 0) | (b == 0)))

    oper = "mul_no_nan"

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        xp = ctx.backend
        out = a * b
        if hasattr(out, "dtype") and out.size and not _all_finite(xp, out):
            out = xp.where((a == 0) | (b == 0), xp.zeros((), out.dtype), out)
        return out

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        na, nb = ctx.needs_input_grad
        return (MulNoNan.apply(g, b) if na else None), (MulNoNan.apply(g, a) if nb else None)

    @staticmethod
    def jvp(ctx, ta, tb):
        a, b = ctx.saved_tensors
        return _plus(None if ta is None else MulNoNan.apply(ta, b),
                     None if tb is None else MulNoNan.apply(a, tb))


class DivNoNan(Function):
    """``g / d``, but exactly 0 wherever ``g == 0``, even where ``d`` is 0 or NaN.

    Derivatives: ``1 / d`` for ``g`` and ``-out / d`` for ``d``, both NaN-safe.
    """
    batch = elementwise  # vmap: broadcast like a ufunc
    traits = Traits(fresh=True, formula=lambda xp, g, d: _no_nan(xp, g / d, g == 0))

    oper = "div_no_nan"

    @staticmethod
    def forward(ctx, g, d):
        xp = ctx.backend
        out = g / d
        if out.size and not _all_finite(xp, out):
            out = xp.where(g == 0, xp.zeros((), out.dtype), out)
        ctx.save_for_backward(d, out)
        return out

    @staticmethod
    def backward(ctx, h):
        d, out = ctx.saved_tensors
        ng, nd = ctx.needs_input_grad
        gg = DivNoNan.apply(h, d) if ng else None
        gd = -DivNoNan.apply(MulNoNan.apply(out, h), d) if nd else None
        return gg, gd


def _plus(a, b):
    """Sum of two optional tangents (``None`` is zero)."""
    if a is None:
        return b
    return a if b is None else a + b


# -- arithmetic ------------------------------------------------------------------------------
@expose
class Add(Function):
    """``x + y`` elementwise, broadcasting. Gradients: ``g`` to each operand.

    Raises:
        ValueError: if the shapes do not broadcast (the message names the op and the shapes).
    """
    batch = elementwise  # vmap: broadcast like a ufunc
    traits = Traits(ufunc="add")

    oper = "add"
    arity = 2
    names = ("add",)
    methods = ("__add__", "__radd__")

    @staticmethod
    def forward(ctx, x, y):
        return x + y

    @staticmethod
    def backward(ctx, g):
        return g, g

    @staticmethod
    def jvp(ctx, tx, ty):
        return _plus(tx, ty)


@expose
class Sub(Function):
    """``x - y`` elementwise, broadcasting. Gradients: ``g`` and ``-g``.

    Raises:
        ValueError: if the shapes do not broadcast.
    """
    batch = elementwise  # vmap: broadcast like a ufunc
    traits = Traits(ufunc="subtract")

    oper = "sub"
    arity = 2
    names = ("subtract",)
    methods = ("__sub__", "__rsub__")

    @staticmethod
    def forward(ctx, x, y):
        return x - y

    @staticmethod
    def backward(ctx, g):
        return g, (-g if ctx.needs_input_grad[1] else None)

    @staticmethod
    def jvp(ctx, tx, ty):
        if ty is None:
            return tx
        return -ty if tx is None else tx - ty


@expose
class Mul(Function):
    """``x * y`` elementwise, broadcasting. Gradients: ``g y`` and ``g x``.

    Raises:
        ValueError: if the shapes do not broadcast.
    """
    batch = elementwise  # vmap: broadcast like a ufunc
    traits = Traits(ufunc="multiply")

    oper = "mul"
    arity = 2
    names = ("multiply",)
    methods = ("__mul__", "__rmul__")

    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return x * y

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        nx, ny = ctx.needs_input_grad
        return (g * y if nx else None), (g * x if ny else None)

    @staticmethod
    def jvp(ctx, tx, ty):
        x, y = ctx.saved_tensors
        return _plus(None if tx is None else tx * y, None if ty is None else x * ty)


@expose
class Div(Function):
    """True division ``x / y`` elementwise, broadcasting (``true_divide`` is the same).

    Integer inputs give float64 (NumPy). ``x / 0`` is ``+-inf`` (NaN for ``0 / 0``).
    Gradients ``g / y`` and ``-g x / y**2`` (as ``-(g / y) * out``: no ``y**2`` to overflow);
    both are 0 where the cotangent is 0, also at ``y = 0``.

    Raises:
        ValueError: if the shapes do not broadcast.
    """
    batch = elementwise  # vmap: broadcast like a ufunc
    traits = Traits(ufunc="true_divide")

    oper = "div"
    arity = 2
    names = ("divide", "true_divide")
    methods = ("__truediv__", "__rtruediv__")

    @staticmethod
    def forward(ctx, x, y):
        out = x / y
        ctx.save_for_backward(y, out)
        return out

    @staticmethod
    def backward(ctx, g):
        y, out = ctx.saved_tensors
        nx, ny = ctx.needs_input_grad
        if not isinstance(y, Tensor):
            if y != 0:
                return g * (1.0 / y), None
            y = const(np.asarray(y, dtype=g.dtype))
        q = DivNoNan.apply(g, y)
        return (q if nx else None), (-MulNoNan.apply(q, out) if ny else None)

    @staticmethod
    def jvp(ctx, tx, ty):
        y, out = ctx.saved_tensors
        if not isinstance(y, Tensor):
            if y != 0:
                return tx * (1.0 / y)
            y = const(np.asarray(y, dtype=tx.dtype))
        a = None if tx is None else DivNoNan.apply(tx, y)
        b = None if ty is None else -MulNoNan.apply(DivNoNan.apply(ty, y), out)
        return _plus(a, b)


@expose
class Neg(Function):
    """``-x`` elementwise. Gradient: ``-g``."""
    batch = elementwise  # vmap: broadcast like a ufunc
    traits = Traits(ufunc="negative")

    oper = "neg"
    names = ("negative",)
    methods = ("__neg__",)

    @staticmethod
    def forward(ctx, x):
        return -x

    @staticmethod
    def backward(ctx, g):
        return -g

    @staticmethod
    def jvp(ctx, t):
        return -t


def _pow_dx(p, x, g):
    """``g p x**(p - 1)`` with Pow's conventions (0 where ``p == 0``; NaN-safe)."""
    if isinstance(p, Tensor):
        return MulNoNan.apply(g * p, x ** (p - 1))
    if p == 0:
        return None
    if p == 1:
        return g
    if p == 2:
        return g * (2 * x)
    if p > 1 and float(p).is_integer():
        return g * (p * x ** (p - 1))
    return MulNoNan.apply(g, p * x ** (p - 1))


def _pow_dp(x, out, g):
    """``g log(x) x**p``, 0 at ``x = 0`` (JAX's convention), NaN-safe."""
    if not isinstance(x, Tensor):
        x = const(np.asarray(x, dtype=out.dtype))
    return MulNoNan.apply(g, MulNoNan.apply(ns.log(ns.where(x == 0, 1.0, x)), out))


@expose
class Pow(Function):
    """``x ** p`` elementwise, broadcasting; ``pow`` is the same function.

    Derivatives: ``p x**(p-1)`` for ``x`` (0 where ``p == 0``: ``x**0 = 1`` is constant, even
    at ``x = 0``, as PyTorch) and ``log(x) x**p`` for ``p`` (0 at ``x = 0``, to every order, as
    JAX; NaN for ``x < 0``). NaN-safe where a derivative is infinite or NaN: a zero cotangent
    gives a zero gradient.

    Dtypes: NumPy's (``float32 ** 2`` is float32; integers to negative integer powers raise
    ``ValueError`` as in NumPy). ``x ** p`` for ``x < 0`` and non-integer ``p`` is NaN.

    Raises:
        ValueError: if the shapes do not broadcast, or for integers to negative integer powers.
    """
    batch = elementwise  # vmap: broadcast like a ufunc
    traits = Traits(ufunc="power")

    oper = "pow"
    arity = 2
    names = ("power", "pow")
    methods = ("__pow__", "__rpow__", "pow")

    @staticmethod
    def forward(ctx, x, p):
        out = x**p
        ctx.save_for_backward(x, p, out)
        return out

    @staticmethod
    def backward(ctx, g):
        x, p, out = ctx.saved_tensors
        nx, np_ = ctx.needs_input_grad
        return (_pow_dx(p, x, g) if nx else None), (_pow_dp(x, out, g) if np_ else None)

    @staticmethod
    def jvp(ctx, tx, tp):
        x, p, out = ctx.saved_tensors
        return _plus(None if tx is None else _pow_dx(p, x, tx),
                     None if tp is None else _pow_dp(x, out, tp))


# -- the ufunc table ---------------------------------------------------------------------------
class Unary(NamedTuple):
    """One row of the unary ufunc table.

    Attributes:
        name: The ``tapegrad.numpy`` name (and the op's ``oper``).
        fn: NumPy/CuPy function name, or ``fn(xp, x)`` on arrays.
        deriv: ``deriv(xp, x, out)``, the derivative, for arrays (``xp`` NumPy-like) and for
            Tensors (``xp`` tapegrad's namespace); ``None``: zero gradient everywhere.
        doc: The docstring (the gradient and conventions; the shared rules are in the module).
        nonan: The derivative may be infinite: a zero cotangent must give zero, not NaN.
        piecewise: The derivative is piecewise constant (its own derivative is zero): the
            formula then only ever runs on arrays.
        aliases: Further ``tapegrad.numpy`` names.
        method: Also a Tensor method.
        d2: ``d2(xp, x, out)``: the partial derivatives of ``deriv`` in ``x`` and in ``out``
            (a pair; None for zero), on Tensors: the rule of the fused backward's own backward
            (:class:`UnaryGrad`), which makes every order exact. Unused (None) for a
            piecewise-constant derivative.
    """

    name: str
    fn: str | Callable
    deriv: Callable | None
    doc: str
    nonan: bool = False
    piecewise: bool = False
    aliases: tuple = ()
    method: bool = True
    d2: Callable | None = None


class Binary(NamedTuple):
    """One row of the binary ufunc table: as :class:`Unary`, with ``dx(xp, x, y, out)`` and
    ``dy(xp, x, y, out)`` (either ``None``: zero gradient to that operand), and
    ``d2(xp, wrt, x, y, out)``: the partial derivatives of ``dx`` (``wrt=0``) or ``dy``
    (``wrt=1``) in ``x``, ``y`` and ``out`` (a triple; None for zero), on Tensors."""

    name: str
    fn: str | Callable
    dx: Callable | None
    dy: Callable | None
    doc: str
    nonan: bool = False
    piecewise: bool = False
    aliases: tuple = ()
    method: bool = False
    operators: tuple = ()
    d2: Callable | None = None


def _call(fn, xp, *args):
    if isinstance(fn, str):
        return getattr(xp, fn)(*args)
    return fn(xp, *args)


def _ufunc_name(fn):
    """``fn`` when it names a NumPy ufunc (the op's forward is exactly that ufunc), else None."""
    return fn if isinstance(fn, str) and isinstance(getattr(np, fn, None), np.ufunc) else None


def _on_arrays(fn):
    """``f(xp, *arrays)`` running a row's function: NumPy's ufunc bound once for NumPy."""
    if not isinstance(fn, str):
        return fn
    np_fn = getattr(np, fn)
    return lambda xp, *args: np_fn(*args) if xp is np else getattr(xp, fn)(*args)


def _dtype_rule(fn):
    """A classmethod ``output_dtype`` answering what ``fn`` gives on 0-d inputs."""
    rule = _DtypeRule(fn)
    return classmethod(lambda cls, *dtypes, **params: rule(*dtypes))


class _DtypeRule:
    """``output_dtype`` of a table op: what its ufunc gives on 0-d inputs of these dtypes."""

    def __init__(self, fn):
        self.fn = fn
        self.cache: dict = {}

    def __call__(self, *dtypes):
        key = tuple(d if isinstance(d, np.dtype) else type(d) for d in dtypes)
        out = self.cache.get(key)
        if out is None:
            args = [np.zeros((), d) if isinstance(d, np.dtype) else d for d in dtypes]
            with _Quiet():
                out = self.cache[key] = np.asarray(_call(self.fn, np, *args)).dtype
        return out


def _second(partials, vals, needs, h, g, nonan) -> list:
    """Cotangents of ``vals`` for ``h`` on ``g * d(*vals)``: ``h g p_i`` with ``p_i`` the
    partial derivative of the derivative formula ``d`` in ``vals[i]`` (``partials``, from the
    row's ``d2``), NaN-safe where ``nonan`` (exactly 0 where ``h g`` is 0)."""
    hg = MulNoNan.apply(h, g) if nonan else h * g
    return [None if not need or p is None or not isinstance(v, Tensor)
            else (MulNoNan.apply(hg, p) if nonan else hg * p)
            for v, need, p in zip(vals, needs, partials)]


def _times_formula(xp, g, d, nonan: bool):
    """:func:`_times` as one formula on scalars (the fused-kernel form): ``g * d`` in ``g``'s
    dtype, a boolean ``d`` selecting ``g`` or +0, and with ``nonan`` 0 where ``g == 0`` and
    the product is not finite."""
    if d.dtype == np.bool_:
        return xp.where(d, g, 0)
    out = g * d
    if out.dtype != g.dtype and g.dtype.kind in "fc" and out.dtype.kind != "c":
        out = out.astype(g.dtype)
    if nonan:
        out = xp.where((g == 0) & ~xp.isfinite(out), 0, out)
    return out


def _unary_grad_formula(xp, g, x, out, row):
    return _times_formula(xp, g, row.deriv(xp, x, out), row.nonan)


def _binary_grad_formula(xp, g, x, y, out, row, wrt):
    return _times_formula(xp, g, (row.dx if wrt == 0 else row.dy)(xp, x, y, out), row.nonan)


class UnaryGrad(Function):
    """``g * row.deriv(x, out)``: the backward (and forward-mode) rule of a unary table op,
    fused into one primitive (the derivative and the product in one pass over memory).

    Linear in ``g``. Its derivatives in ``x`` and ``out`` are ``g`` times the partial
    derivatives of the row's formula, ``d2`` (none for a piecewise-constant derivative),
    written with tapegrad operations, so every order is exact.
    """
    batch = scaled_cotangent  # vmap: broadcast like a ufunc, the output g's shape
    traits = Traits(into=True, fresh=True, formula=_unary_grad_formula)

    oper = "unary_grad"

    @staticmethod
    def forward(ctx, g, x, out, row, into=None):
        ctx.save_for_backward(g, x, out)
        ctx.row = row
        xp = ctx.backend
        return _times(xp, g, row.deriv(array_ns(xp), x, out), row.nonan, into)

    @staticmethod
    def backward(ctx, h):
        g, x, out = ctx.saved_tensors
        row = ctx.row
        ng, nx, nout = ctx.needs_input_grad
        gg = UnaryGrad.apply(h, x, out, row=row) if ng else None
        if row.piecewise or not (nx or nout):
            return gg, None, None
        return (gg, *_second(row.d2(ns, x, out), [x, out], (nx, nout), h, g, row.nonan))

    @classmethod
    def output_shape(cls, g, x, out, row):
        return tuple(g)

    @classmethod
    def output_dtype(cls, g, x, out, row):
        return g


class BinaryGrad(Function):
    """``g * row.dx(x, y, out)`` (``wrt=0``) or ``g * row.dy(...)`` (``wrt=1``): the backward
    rule of a binary table op for one operand, fused into one primitive. Linear in ``g``; its
    derivatives in ``x``, ``y`` and ``out`` are ``g`` times the partial derivatives of the row's
    formula, ``d2``, so every order is exact."""
    batch = scaled_cotangent  # vmap: broadcast like a ufunc, the output g's shape
    traits = Traits(into=True, fresh=True, formula=_binary_grad_formula)

    oper = "binary_grad"

    @staticmethod
    def forward(ctx, g, x, y, out, row, wrt, into=None):
        ctx.save_for_backward(g, x, y, out)
        ctx.row, ctx.wrt = row, wrt
        xp = ctx.backend
        d = (row.dx if wrt == 0 else row.dy)(array_ns(xp), x, y, out)
        return _times(xp, g, d, row.nonan, into)

    @staticmethod
    def backward(ctx, h):
        g, x, y, out = ctx.saved_tensors
        row, wrt = ctx.row, ctx.wrt
        needs = ctx.needs_input_grad
        gg = BinaryGrad.apply(h, x, y, out, row=row, wrt=wrt) if needs[0] else None
        if row.piecewise or not any(needs[1:]):
            return gg, None, None, None
        return (gg, *_second(row.d2(ns, wrt, x, y, out), [x, y, out], needs[1:], h, g,
                             row.nonan))

    @classmethod
    def output_shape(cls, g, x, y, out, row, wrt):
        return tuple(g)

    @classmethod
    def output_dtype(cls, g, x, y, out, row, wrt):
        return g


_UNARY_SECTIONS = {
    "Args": "Args:\n    x: Tensor, NumPy/CuPy array or Python number, of any shape ``(...)``.\n",
    "Returns": (
        "Returns:\n    Tensor of ``x``'s shape, in the dtype NumPy's ufunc gives (float32 stays "
        "float32;\n    integer input follows NumPy's type resolution).\n"),
    "Raises": (
        "Raises:\n    TypeError: for a non-numeric operand, or a dtype NumPy's ufunc has no loop "
        "for\n        (complex input of a real-only function), naming the op and the dtypes.\n"),
}
_BINARY_SECTIONS = {
    "Args": (
        "Args:\n    x, y: Tensors, NumPy/CuPy arrays or Python numbers whose shapes broadcast "
        "together\n        (NumPy's rules); a Python number is weakly typed (NEP 50) and gets "
        "no cotangent.\n"),
    "Returns": (
        "Returns:\n    Tensor of the broadcast shape, in the dtype NumPy's ufunc gives for "
        "the operands.\n"),
    "Raises": (
        "Raises:\n    ValueError: if the shapes do not broadcast (naming the op and the "
        "shapes).\n    TypeError: for a non-numeric operand, or dtypes NumPy's ufunc has no "
        "loop for.\n"),
}


def _source(fn) -> str:
    """Where a table op's values come from: NumPy's ufunc, or the row's own formula."""
    if isinstance(fn, str):
        return f"NumPy's ``{fn}`` ufunc (CuPy's on a GPU)"
    return "the formula above, on NumPy (CuPy) arrays"


def _documented(doc: str, sections: dict, source: str) -> str:
    """A table row's docstring with the shared Args/Returns/Raises sections it lacks (the
    rules of the module docstring, stated per op) and its NumPy source."""
    doc = doc.rstrip()
    extra = [text for key, text in sections.items() if f"{key}:" not in doc]
    return doc + "\n\n" + "\n".join(extra) + f"\nSource: {source}.\n"


def _table_class(row, arity: int, sections: dict, methods: tuple, rules: dict):
    """The exposed Function class of a unary or binary table ``row``: its declarations, read
    from the row, and its ``rules`` (``forward``, ``backward`` and ``jvp``, made static)."""
    fn = row.fn
    attrs = {
        "__doc__": _documented(row.doc, sections, _source(fn)),
        "oper": row.name,
        "arity": arity,
        "traits": Traits(ufunc=_ufunc_name(fn)),
        "names": (row.name, *row.aliases),
        "methods": methods,
        "row": row,
        "output_dtype": _dtype_rule(fn),
        "batch": elementwise,
    }
    attrs.update({key: staticmethod(rule) for key, rule in rules.items()})
    name = "".join(p.capitalize() for p in row.name.split("_"))
    return expose(type(name, (Function,), attrs))


def _unary_class(row: Unary):
    """The Function class of a unary table row (see the module docstring)."""
    fn, deriv = row.fn, row.deriv
    run = _on_arrays(fn)

    def forward(ctx, x):
        out = run(ctx.backend, x)
        ctx.save_for_backward(x, out)
        return out

    def backward(ctx, g):
        x, out = ctx.saved_tensors
        return UnaryGrad.apply(g, x, out, row=row)

    if deriv is None:
        rules = {"forward": lambda ctx, x: _call(fn, ctx.backend, x),
                 "backward": lambda ctx, g: None, "jvp": lambda ctx, t: None}
    else:
        # jvp: holomorphic, t * f'(x), the same primitive as backward
        rules = {"forward": forward, "backward": backward, "jvp": backward}
    methods = (row.name,) if row.method else ()
    return _table_class(row, 1, _UNARY_SECTIONS, methods, rules)


def _binary_class(row: Binary):
    """The Function class of a binary table row."""
    fn = row.fn
    run = _on_arrays(fn)

    def forward(ctx, x, y):
        out = run(ctx.backend, x, y)
        ctx.save_for_backward(x, y, out)
        return out

    def backward(ctx, g):
        x, y, out = ctx.saved_tensors
        nx, ny = ctx.needs_input_grad
        gx = BinaryGrad.apply(g, x, y, out, row=row, wrt=0) if nx and row.dx else None
        gy = BinaryGrad.apply(g, x, y, out, row=row, wrt=1) if ny and row.dy else None
        return gx, gy

    def jvp(ctx, tx, ty):
        x, y, out = ctx.saved_tensors
        a = None if tx is None or not row.dx else BinaryGrad.apply(tx, x, y, out, row=row, wrt=0)
        b = None if ty is None or not row.dy else BinaryGrad.apply(ty, x, y, out, row=row, wrt=1)
        return _plus(a, b)

    if row.dx is None and row.dy is None:
        rules = {"forward": lambda ctx, x, y: _call(fn, ctx.backend, x, y),
                 "backward": lambda ctx, g: (None, None), "jvp": lambda ctx, tx, ty: None}
    else:
        rules = {"forward": forward, "backward": backward, "jvp": jvp}
    methods = ((row.name,) if row.method else ()) + row.operators
    return _table_class(row, 2, _BINARY_SECTIONS, methods, rules)


def _sigmoid(xp, x):
    """``1 / (1 + exp(-x))`` without overflow, full relative precision in both tails."""
    e = xp.exp(-xp.abs(x))
    return xp.where(x >= 0, 1 / (1 + e), e / (1 + e))


def _logaddexp_dx(xp, x, y, out):
    """``sigmoid(x - y)``: 0 where ``exp`` overflows, 1 at ``x = +inf``; 1/2 where ``x - y``
    is NaN (``x == y == +-inf``, or a NaN operand)."""
    d = xp.sigmoid(x - y)
    return xp.where(d == d, d, 0.5)


def _swap(d):
    return lambda xp, x, y, out: d(xp, y, x, out)


def _arcsinh_deriv(xp, x):
    """``1 / sqrt(1 + x**2)``: as ``1 / hypot(x, 1)`` for real ``x`` (no overflow), with the
    principal square root for complex ``x``."""
    if x.dtype.kind == "c":
        return 1 / xp.sqrt(1 + x * x)
    return 1 / xp.hypot(x, 1.0)


def _arccosh_deriv(xp, x):
    """``1 / sqrt(x**2 - 1)``; for complex ``x`` as ``1 / (sqrt(x - 1) sqrt(x + 1))``, which
    follows the principal branch ``log(z + sqrt(z + 1) sqrt(z - 1))`` also where ``Re z < 0``
    (``sqrt(z**2 - 1)`` has the opposite sign there)."""
    if x.dtype.kind == "c":
        return 1 / (xp.sqrt(x - 1) * xp.sqrt(x + 1))
    return 1 / xp.sqrt((x - 1) * (x + 1))


# sinc'(x) = pi**2 x sum_k _SINC_SERIES[k] (pi x)**(2k), the Taylor series at 0 (terms up to
# (pi x)**16: below 1e-16 relative for |x| < 1/4).
_SINC_SERIES = [(-1) ** k * 2 * k / math.factorial(2 * k + 1) for k in range(1, 10)]


def _sinc_deriv(xp, x, y):
    """``d sinc / dx = (cos(pi x) - sinc(x)) / x``; its Taylor series for ``|x| < 1/4``, where
    the closed form cancels (and is 0/0 at 0). Both branches are finite everywhere, so the
    formula differentiates again (on Tensors) without NaN."""
    small = xp.abs(x) < 0.25
    xs = xp.where(small, 1.0, x)
    far = (xp.cos(math.pi * xs) - y) / xs
    u = (math.pi * math.pi) * (x * x)
    acc = _SINC_SERIES[-1]
    for c in _SINC_SERIES[-2::-1]:
        acc = acc * u + c
    near = (math.pi * math.pi) * x * acc
    return xp.where(small, near, far)


def _sinc_forward(xp, x):
    """NumPy's ``sinc``, except for complex ``|x| < 1e-8``: there NumPy's ``sin(y) / y``
    overflows for subnormal ``y`` (``np.sinc(2.2e-311j)`` is ``inf+nanj``), where the series
    ``1 - (pi x)**2 / 6`` is exact in float64."""
    if getattr(x, "dtype", np.dtype(float)).kind != "c":
        return xp.sinc(x)
    small = xp.abs(x) < 1e-8
    if not small.any():
        return xp.sinc(x)
    y = math.pi * x
    return xp.where(small, 1 - y * y / 6, xp.sinc(xp.where(small, 1.0, x))).astype(x.dtype)


def _i0_forward(xp, x):
    if getattr(x, "dtype", np.dtype(float)).kind == "c":
        raise TypeError(f"not supported for complex values (got dtype {x.dtype})")
    return _special(xp).i0(x)


def _i1(xp, x):
    """``I1(x)``, the derivative of ``i0``: the :class:`I1` primitive on Tensors,
    ``scipy.special.i1`` on arrays."""
    if isinstance(x, Tensor):
        return I1.apply(x)
    return _special(xp._xp if isinstance(xp, _ArrayNS) else xp).i1(x)


def _cube_times(x, d):
    """``x d**3``: the derivative of ``d(x) = 1 / s(x)`` for ``s' = x / s`` is ``-x d**3``."""
    return x * (d * d * d)


# sinc''(x) = pi**2 sum_k (2k - 1) _SINC_SERIES[k] (pi x)**(2k), the derivative of the series
# of sinc' above, for |x| < 1/4.
_SINC_SERIES2 = [(2 * k - 1) * c for k, c in enumerate(_SINC_SERIES, start=1)]


def _sinc_second(xp, x, y):
    """The partial derivatives of ``sinc'``'s formula (:func:`_sinc_deriv`) in ``x`` and in
    ``y``: ``(-pi sin(pi x) - sinc'(x)) / x`` and ``-1 / x``; for ``|x| < 1/4`` its Taylor
    series in ``x`` (``-pi**2 / 3`` at 0) and 0 in ``y``."""
    small = xp.abs(x) < 0.25
    xs = xp.where(small, 1.0, x)
    far = (-math.pi * xp.sin(math.pi * xs) - _sinc_deriv(xp, xs, y)) / xs
    u = (math.pi * math.pi) * (x * x)
    acc = _SINC_SERIES2[-1]
    for c in _SINC_SERIES2[-2::-1]:
        acc = acc * u + c
    return xp.where(small, (math.pi * math.pi) * acc, far), xp.where(small, 0.0, -1 / xs)


def _i1_prime(x, i1):
    """``I1'(x) = I0(x) - I1(x) / x`` (DLMF 10.29.2) on Tensors, ``i1`` being ``I1(x)``; for
    ``|x| < 1e-6`` the ratio ``I1(x) / x`` is its series ``1/2 + x**2 / 16`` (DLMF 10.25.2),
    exact in float64 there, where the quotient would underflow (``I1(5e-324)`` is 0)."""
    small = ns.abs(x) < 1e-6
    ratio = Where.apply(small, 0.5 + x * x / 16.0, i1 / Where.apply(small, 1.0, x))
    return ns.i0(x) - ratio


def _i0_second(xp, x, y):
    """``i0''(x) = I1'(x)`` (:func:`_i1_prime`), in ``x``; none in ``y``."""
    return _i1_prime(x, _i1(xp, x)), None


def _arctan2_second(xp, wrt, x, y, o):
    """Partial derivatives of ``arctan2``'s ``y / r2`` and ``-x / r2`` (``r2 = x**2 + y**2``,
    taken as 1 at the origin) in ``x``, ``y`` and ``out``."""
    r2 = x * x + y * y
    rs = xp.where(r2 == 0, 1.0, r2)
    rs2 = rs * rs
    if wrt == 0:
        return -2 * x * y / rs2, 1 / rs - 2 * y * y / rs2, None
    return -1 / rs + 2 * x * x / rs2, 2 * x * y / rs2, None


def _hypot_second(xp, wrt, x, y, o):
    """Partial derivatives of ``hypot``'s ``x / out`` and ``y / out`` (``out`` taken as 1 at the
    origin) in ``x``, ``y`` and ``out``."""
    hs = xp.where(o == 0, 1.0, o)
    if wrt == 0:
        return 1 / hs, None, -x / (hs * hs)
    return None, 1 / hs, -y / (hs * hs)


def _logaddexp_second(xp, wrt, x, y, o):
    """Partial derivatives of ``logaddexp``'s ``sigmoid(x - y)`` and ``sigmoid(y - x)``:
    ``+-sigmoid(x - y) sigmoid(y - x)`` (0 where ``x == y == +-inf``), none in ``out``."""
    p = xp.sigmoid(x - y) * xp.sigmoid(y - x)
    p = xp.where(p == p, p, 0.0)
    return (p, -p, None) if wrt == 0 else (-p, p, None)


def _logaddexp2_second(xp, wrt, x, y, o):
    """Partial derivatives of ``logaddexp2``'s ``2**(x - out)`` and ``2**(y - out)``."""
    if wrt == 0:
        a = _LN2 * xp.exp2(x - o)
        return a, None, -a
    b = _LN2 * xp.exp2(y - o)
    return None, b, -b


def _float_power_second(xp, wrt, x, y, o):
    """Partial derivatives of ``float_power``'s ``y x**(y - 1)`` and ``log(x) out`` (``log``
    taken as 0 at ``x = 0``) in ``x``, ``y`` and ``out``."""
    lx = xp.log(xp.where(x == 0, 1.0, x))
    if wrt == 0:
        p = xp.float_power(x, y - 1)
        return y * (y - 1) * xp.float_power(x, y - 2), p * (1 + y * lx), None
    return xp.where(x == 0, 0.0, o / xp.where(x == 0, 1.0, x)), None, lx


UNARY = [
    Unary("exp", "exp", lambda xp, x, y: y,
          "``e**x`` elementwise; overflows to ``inf``. Gradient: ``g e**x``.",
          d2=lambda xp, x, y: (None, 1.0)),
    Unary("exp2", "exp2", lambda xp, x, y: y * _LN2,
          "``2**x`` elementwise. Gradient: ``g 2**x ln 2``.",
          d2=lambda xp, x, y: (None, _LN2)),
    Unary("expm1", "expm1", lambda xp, x, y: xp.exp(x),
          "``e**x - 1``, accurate for small ``|x|``. Gradient: ``g e**x`` (recomputed from "
          "``x``: ``out + 1`` would lose all relative precision for very negative ``x``).",
          d2=lambda xp, x, y: (xp.exp(x), None)),
    Unary("log", "log", lambda xp, x, y: 1 / x,
          "Natural logarithm. Domain ``x > 0``: ``log(0) = -inf``, negative ``x`` gives NaN. "
          "Gradient ``g / x``; 0 where the cotangent is 0, also at ``x = 0``.", nonan=True,
          d2=lambda xp, x, y: (-1 / (x * x), None)),
    Unary("log1p", "log1p", lambda xp, x, y: 1 / (1 + x),
          "``log(1 + x)``, accurate for small ``|x|``. Domain ``x > -1``. Gradient "
          "``g / (1 + x)``; NaN-safe at -1.", nonan=True,
          d2=lambda xp, x, y: (-1 / ((1 + x) * (1 + x)), None)),
    Unary("log2", "log2", lambda xp, x, y: 1 / (x * _LN2),
          "Base-2 logarithm. Domain ``x > 0``. Gradient ``g / (x ln 2)``; NaN-safe at 0.",
          nonan=True,
          d2=lambda xp, x, y: (-1 / (x * x * _LN2), None)),
    Unary("log10", "log10", lambda xp, x, y: 1 / (x * _LN10),
          "Base-10 logarithm. Domain ``x > 0``. Gradient ``g / (x ln 10)``; NaN-safe at 0.",
          nonan=True,
          d2=lambda xp, x, y: (-1 / (x * x * _LN10), None)),
    Unary("sqrt", "sqrt", lambda xp, x, y: 0.5 / y,
          "Square root. Domain ``x >= 0`` (NaN below). Gradient ``g / (2 sqrt(x))``: ``+inf`` "
          "at 0 for a nonzero cotangent (as PyTorch and JAX), 0 where the cotangent is 0, so "
          "``where(x > 0, sqrt(x), 0.0)`` has a finite gradient at 0.", nonan=True,
          d2=lambda xp, x, y: (None, -0.5 / (y * y))),
    Unary("cbrt", "cbrt", lambda xp, x, y: 1 / (3 * y * y),
          "Cube root (real, defined for negative ``x``). Gradient ``g / (3 cbrt(x)**2)``; "
          "infinite at 0, NaN-safe there.", nonan=True,
          d2=lambda xp, x, y: (None, -2 / (3 * y * y * y))),
    Unary("square", "square", lambda xp, x, y: 2 * x,
          "``x * x`` elementwise (integers stay integer). Gradient: ``2 x g``.",
          d2=lambda xp, x, y: (2.0, None)),
    Unary("reciprocal", "reciprocal", lambda xp, x, y: -(y * y),
          "``1 / x``, NumPy's ``reciprocal`` (integers stay integer and truncate: "
          "``reciprocal(2) == 0``; write ``1.0 / x`` for a float). Gradient ``-g / x**2``; "
          "NaN-safe at 0.", nonan=True,
          d2=lambda xp, x, y: (None, -2 * y)),
    Unary("sin", "sin", lambda xp, x, y: xp.cos(x), "Sine (radians). Gradient: ``g cos(x)``.",
          d2=lambda xp, x, y: (-xp.sin(x), None)),
    Unary("cos", "cos", lambda xp, x, y: -xp.sin(x),
          "Cosine (radians). Gradient: ``-g sin(x)``.",
          d2=lambda xp, x, y: (-xp.cos(x), None)),
    Unary("tan", "tan", lambda xp, x, y: 1 + y * y,
          "Tangent (radians; poles at ``pi/2 + k pi``). Gradient: ``g (1 + tan(x)**2)``.",
          d2=lambda xp, x, y: (None, 2 * y)),
    Unary("arcsin", "arcsin", lambda xp, x, y: 1 / xp.sqrt((1 - x) * (1 + x)),
          "Inverse sine, radians in [-pi/2, pi/2]. Domain [-1, 1]. Gradient "
          "``g / sqrt(1 - x**2)``: infinite at +-1, NaN-safe there.", nonan=True,
          aliases=("asin",),
          d2=lambda xp, x, y: (_cube_times(x, 1 / xp.sqrt((1 - x) * (1 + x))), None)),
    Unary("arccos", "arccos", lambda xp, x, y: -1 / xp.sqrt((1 - x) * (1 + x)),
          "Inverse cosine, radians in [0, pi]. Domain [-1, 1]. Gradient "
          "``-g / sqrt(1 - x**2)``: infinite at +-1, NaN-safe there.", nonan=True,
          aliases=("acos",),
          d2=lambda xp, x, y: (-_cube_times(x, 1 / xp.sqrt((1 - x) * (1 + x))), None)),
    Unary("arctan", "arctan", lambda xp, x, y: 1 / (1 + x * x),
          "Inverse tangent, radians in (-pi/2, pi/2). Gradient: ``g / (1 + x**2)``.",
          aliases=("atan",),
          d2=lambda xp, x, y: (-2 * x / ((1 + x * x) * (1 + x * x)), None)),
    Unary("sinh", "sinh", lambda xp, x, y: xp.cosh(x),
          "Hyperbolic sine; overflows to ``+-inf``. Gradient: ``g cosh(x)``.",
          d2=lambda xp, x, y: (xp.sinh(x), None)),
    Unary("cosh", "cosh", lambda xp, x, y: xp.sinh(x),
          "Hyperbolic cosine; overflows to ``inf``. Gradient: ``g sinh(x)``.",
          d2=lambda xp, x, y: (xp.cosh(x), None)),
    Unary("tanh", "tanh", lambda xp, x, y: 1 - y * y,
          "Hyperbolic tangent. Gradient: ``g (1 - tanh(x)**2)``.",
          d2=lambda xp, x, y: (None, -2 * y)),
    Unary("arcsinh", "arcsinh", lambda xp, x, y: _arcsinh_deriv(xp, x),
          "Inverse hyperbolic sine. Gradient ``g / sqrt(x**2 + 1)`` (as ``g / hypot(x, 1)`` for "
          "real ``x``: no overflow; the principal ``sqrt(1 + z**2)`` for complex ``z``, whose "
          "branch cuts are arcsinh's own, on the imaginary axis beyond +-1j).",
          aliases=("asinh",),
          d2=lambda xp, x, y: (-_cube_times(x, _arcsinh_deriv(xp, x)), None)),
    Unary("arccosh", "arccosh", lambda xp, x, y: _arccosh_deriv(xp, x),
          "Inverse hyperbolic cosine. Domain ``x >= 1``. Gradient ``g / sqrt(x**2 - 1)``: "
          "infinite at 1, NaN-safe there. For complex ``z``: ``g / (sqrt(z - 1) sqrt(z + 1))``, "
          "the derivative of NumPy's principal branch (cut on the real axis below 1).",
          nonan=True, aliases=("acosh",),
          d2=lambda xp, x, y: (-_cube_times(x, _arccosh_deriv(xp, x)), None)),
    Unary("arctanh", "arctanh", lambda xp, x, y: 1 / ((1 - x) * (1 + x)),
          "Inverse hyperbolic tangent. Domain (-1, 1) (``+-inf`` at +-1). Gradient "
          "``g / (1 - x**2)``; NaN-safe at +-1.", nonan=True, aliases=("atanh",),
          d2=lambda xp, x, y: (2 * x / (((1 - x) * (1 + x)) * ((1 - x) * (1 + x))), None)),
    Unary("erf", lambda xp, x: _special(xp).erf(x),
          lambda xp, x, y: _TWO_OVER_SQRT_PI * xp.exp(-(x * x)),
          "Error function ``2/sqrt(pi) int_0^x exp(-t**2) dt`` (``scipy.special.erf``; float32 "
          "stays float32). Gradient: ``g 2/sqrt(pi) exp(-x**2)``.",
          d2=lambda xp, x, y: (-2 * x * (_TWO_OVER_SQRT_PI * xp.exp(-(x * x))), None)),
    Unary("erfc", lambda xp, x: _special(xp).erfc(x),
          lambda xp, x, y: -_TWO_OVER_SQRT_PI * xp.exp(-(x * x)),
          "Complementary error function ``1 - erf(x)``, accurate for large ``x``. Gradient: "
          "``-g 2/sqrt(pi) exp(-x**2)``.",
          d2=lambda xp, x, y: (2 * x * (_TWO_OVER_SQRT_PI * xp.exp(-(x * x))), None)),
    Unary("sigmoid", _sigmoid, lambda xp, x, y: y * xp.sigmoid(-x),
          "Logistic sigmoid ``1 / (1 + exp(-x))`` (``scipy.special.expit``), stable for any "
          "``x``: never overflows, full relative precision in both tails. Gradient: "
          "``g sigmoid(x) sigmoid(-x)``, finite everywhere.",
          d2=lambda xp, x, y: (-y * xp.sigmoid(-x) * xp.sigmoid(x), xp.sigmoid(-x))),
    Unary("softplus", lambda xp, x: xp.logaddexp(x, 0), lambda xp, x, y: xp.sigmoid(x),
          "``log(1 + exp(x))`` as ``logaddexp(x, 0)``: equals ``x`` for large ``x`` and "
          "``exp(x)`` for very negative ``x``, to float precision. Gradient: ``g sigmoid(x)``.",
          d2=lambda xp, x, y: (xp.sigmoid(x) * xp.sigmoid(-x), None)),
    Unary("floor", "floor", None,
          "Largest integer ``<= x`` (dtype kept). Zero gradient everywhere."),
    Unary("ceil", "ceil", None, "Smallest integer ``>= x`` (dtype kept). Zero gradient."),
    Unary("trunc", "trunc", None, "Integer part, towards 0 (dtype kept). Zero gradient.",
          aliases=("fix",)),
    Unary("rint", "rint", None, "Round to the nearest integer, halves to even. Zero gradient."),
    Unary("positive", "positive", lambda xp, x, y: 1, "``+x`` (a copy). Gradient: ``g``.",
          piecewise=True, method=False),
    Unary("fabs", "fabs", lambda xp, x, y: xp.sign(x),
          "``|x|`` for real ``x``. Gradient ``g sign(x)``: 0 at 0.", piecewise=True,
          method=False),
    Unary("deg2rad", "deg2rad", lambda xp, x, y: math.pi / 180,
          "Degrees to radians. Gradient: ``g pi/180``.", piecewise=True, aliases=("radians",),
          method=False),
    Unary("rad2deg", "rad2deg", lambda xp, x, y: 180 / math.pi,
          "Radians to degrees. Gradient: ``g 180/pi``.", piecewise=True, aliases=("degrees",),
          method=False),
    Unary("sinc", _sinc_forward, _sinc_deriv,
          "Normalized sinc ``sin(pi x) / (pi x)``, 1 at 0 (NumPy's ``sinc``; complex ``x`` "
          "too, 1 also at complex subnormals where NumPy gives ``inf+nanj``). Gradient "
          "``g (cos(pi x) - sinc(x)) / x``, written as its Taylor series for "
          "``|x| < 1/4`` (so it is accurate near 0 and exact at 0, where it is 0 and the second "
          "derivative is ``-pi**2 / 3``, at every order).", method=False,
          d2=_sinc_second),
    Unary("spacing", "spacing", None,
          "The distance from ``x`` to the next float away from 0 (one unit in the last place; "
          "NumPy's ``spacing``). Piecewise constant: zero gradient everywhere.", method=False),
    Unary("i0", _i0_forward, lambda xp, x, y: _i1(xp, x),
          "Modified Bessel function of the first kind, order 0 (NumPy's ``i0``, computed with "
          "``scipy.special.i0``; float32 stays float32, integers give float64). Real input "
          "only. Gradient ``g I1(x)`` (DLMF 10.29.3), whose own derivative is "
          "``I0(x) - I1(x) / x`` (1/2 at 0).\n\nRaises:\n    TypeError: for complex input "
          "(as NumPy).", method=False,
          d2=_i0_second),
]

BINARY = [
    Binary("arctan2", "arctan2",
           lambda xp, x, y, o: y / xp.where((x * x + y * y) == 0, 1.0, x * x + y * y),
           lambda xp, x, y, o: -x / xp.where((x * x + y * y) == 0, 1.0, x * x + y * y),
           "Angle of the point ``(x2, x1)`` in radians, in [-pi, pi] (``atan2`` is the same). "
           "Gradients ``g x2 / (x1**2 + x2**2)`` and ``-g x1 / (x1**2 + x2**2)``; 0 at the "
           "origin, where the angle has no derivative.", aliases=("atan2",),
          d2=_arctan2_second),
    Binary("hypot", "hypot",
           lambda xp, x, y, o: x / xp.where(o == 0, 1.0, o),
           lambda xp, x, y, o: y / xp.where(o == 0, 1.0, o),
           "``sqrt(x**2 + y**2)`` without overflow. Gradients ``g x / hypot`` and "
           "``g y / hypot``; 0 at the origin (a kink, like ``abs`` at 0).",
          d2=_hypot_second),
    Binary("logaddexp", "logaddexp", _logaddexp_dx, _swap(_logaddexp_dx),
           "``log(exp(x) + exp(y))`` without overflow or underflow. Gradients "
           "``g sigmoid(x - y)`` and ``g sigmoid(y - x)``, each finite; at ``x == y == +-inf`` "
           "each operand gets ``g / 2``.",
          d2=_logaddexp_second),
    Binary("logaddexp2", "logaddexp2",
           lambda xp, x, y, o: xp.exp2(x - o), lambda xp, x, y, o: xp.exp2(y - o),
           "``log2(2**x + 2**y)`` without overflow. Gradients ``g 2**(x - out)`` and "
           "``g 2**(y - out)``.",
          d2=_logaddexp2_second),
    Binary("fmax", "fmax",
           lambda xp, x, y, o: xp.where(x == y, 0.5, (x > y) | xp.isnan(y)),
           lambda xp, x, y, o: xp.where(x == y, 0.5, (y > x) | xp.isnan(x)),
           "Elementwise maximum ignoring NaN (NumPy's ``fmax``). Gradient: to the operand "
           "returned; ties split equally.", piecewise=True),
    Binary("fmin", "fmin",
           lambda xp, x, y, o: xp.where(x == y, 0.5, (x < y) | xp.isnan(y)),
           lambda xp, x, y, o: xp.where(x == y, 0.5, (y < x) | xp.isnan(x)),
           "Elementwise minimum ignoring NaN (NumPy's ``fmin``). Gradient: to the operand "
           "returned; ties split equally.", piecewise=True),
    Binary("remainder", "remainder", lambda xp, x, y, o: 1,
           lambda xp, x, y, o: -xp.floor_divide(x, y),
           "``x - floor(x / y) * y`` (``mod``, the ``%`` operator): the result has ``y``'s "
           "sign. Gradients ``g`` and ``-g floor(x / y)`` (one-sided at the jumps, as PyTorch "
           "and JAX). ``y == 0`` gives NaN for floats and 0 for integers.", piecewise=True,
           aliases=("mod",), operators=("__mod__", "__rmod__")),
    Binary("fmod", "fmod", lambda xp, x, y, o: 1, lambda xp, x, y, o: -xp.trunc(x / y),
           "C's ``fmod``: the remainder with ``x``'s sign. Gradients ``g`` and "
           "``-g trunc(x / y)``.", piecewise=True),
    Binary("floor_divide", "floor_divide", None, None,
           "``floor(x / y)`` (the ``//`` operator). Zero gradient everywhere. ``y == 0`` gives "
           "``+-inf``/NaN for floats and 0 for integers.",
           operators=("__floordiv__", "__rfloordiv__")),
    Binary("copysign", "copysign",
           lambda xp, x, y, o: xp.where(xp.signbit(x) == xp.signbit(y), 1.0, -1.0), None,
           "``|x|`` with the sign of ``y``. Gradient ``+-g`` to ``x``; none to ``y``.",
           piecewise=True),
    Binary("float_power", "float_power",
           lambda xp, x, y, o: y * xp.float_power(x, y - 1),
           lambda xp, x, y, o: xp.log(xp.where(x == 0, 1.0, x)) * o,
           "``x ** y`` computed in float64 (or complex128). Gradients as :func:`power`.",
           nonan=True,
          d2=_float_power_second),
    Binary("heaviside", "heaviside", None, lambda xp, x, y, o: x == 0,
           "Heaviside step ``heaviside(x, h0)``: 0 below 0, 1 above, ``h0`` at 0. Gradient: "
           "none to ``x`` (piecewise constant, jumps included); ``g`` to ``h0`` where "
           "``x == 0`` (the value there is ``h0`` itself), 0 elsewhere (as JAX's).",
           piecewise=True),
    Binary("nextafter", "nextafter", lambda xp, x, y, o: 1, None,
           "The next float after ``x`` towards ``y``: ``x`` moved by one unit in the last place. "
           "Gradient: ``g`` to ``x`` (the step is below any finite difference), none to ``y``.",
           piecewise=True),
    Binary("ldexp", "ldexp", lambda xp, x, y, o: xp.exp2(y), None,
           "``x * 2**y`` for integer ``y``. Gradient: ``g 2**y`` to ``x``.", piecewise=True),
]

PREDICATES = [  # name, NumPy function, arity, Tensor methods and operators
    ("equal", "equal", 2, ("__eq__",)), ("not_equal", "not_equal", 2, ("__ne__",)),
    ("less", "less", 2, ("__lt__",)), ("less_equal", "less_equal", 2, ("__le__",)),
    ("greater", "greater", 2, ("__gt__",)), ("greater_equal", "greater_equal", 2, ("__ge__",)),
    ("logical_and", "logical_and", 2, ()), ("logical_or", "logical_or", 2, ()),
    ("logical_xor", "logical_xor", 2, ()), ("logical_not", "logical_not", 1, ("logical_not",)),
    ("isfinite", "isfinite", 1, ("isfinite",)), ("isnan", "isnan", 1, ("isnan",)),
    ("isinf", "isinf", 1, ("isinf",)), ("signbit", "signbit", 1, ()),
    ("isneginf", "isneginf", 1, ()), ("isposinf", "isposinf", 1, ()),
    ("isreal", "isreal", 1, ()), ("iscomplex", "iscomplex", 1, ()),
]

BITWISE = [  # name, NumPy function, arity, Tensor methods and operators, aliases
    ("bitwise_and", "bitwise_and", 2, ("__and__", "__rand__"), ()),
    ("bitwise_or", "bitwise_or", 2, ("__or__", "__ror__"), ()),
    ("bitwise_xor", "bitwise_xor", 2, ("__xor__", "__rxor__"), ()),
    ("invert", "invert", 1, ("__invert__",), ("bitwise_invert",)),
    ("bitwise_not", "invert", 1, (), ()),
    ("left_shift", "left_shift", 2, ("__lshift__", "__rlshift__"), ("bitwise_left_shift",)),
    ("right_shift", "right_shift", 2, ("__rshift__", "__rrshift__"), ("bitwise_right_shift",)),
    ("bitwise_count", "bitwise_count", 1, (), ()),
    ("gcd", "gcd", 2, (), ()), ("lcm", "lcm", 2, (), ()),
]


def _predicate_class(name, fn, arity, methods):
    """A non-differentiable elementwise op (comparison, logic, bitwise, classification)."""
    doc = (f"NumPy's ``{fn}`` elementwise" + (", broadcasting" if arity == 2 else "")
           + "; no gradient (a boolean or integer result).\n\n"
           + ("Args:\n    x: Tensor, array or number of any shape.\n\n" if arity == 1 else
              "Args:\n    x, y: Tensors, arrays or numbers whose shapes broadcast together.\n\n")
           + "Returns:\n    Boolean (or integer) Tensor of the " + ("input's" if arity == 1 else
                                                                    "broadcast") + " shape.\n\n"
           + "Raises:\n    TypeError: for a non-numeric operand"
           + (".\n" if arity == 1 else ".\n    ValueError: if the shapes do not broadcast.\n"))
    if arity == 1:
        forward = staticmethod(lambda ctx, x: getattr(ctx.backend, fn)(x))
    else:
        forward = staticmethod(lambda ctx, x, y: getattr(ctx.backend, fn)(x, y))
    attrs = {
        "__doc__": doc, "oper": name, "arity": arity, "differentiable": False,
        "traits": Traits(ufunc=_ufunc_name(fn)),
        "names": (name,), "methods": methods, "forward": forward, "batch": elementwise,
        "output_dtype": _dtype_rule(fn),
    }
    cname = "".join(p.capitalize() for p in name.split("_"))
    return expose(type(cname, (Function,), attrs))


def _bitwise_class(name, fn, arity, methods, aliases):
    """An integer-only elementwise op (bitwise logic, shifts, ``gcd``, ``lcm``): NumPy's ufunc,
    no gradient, and a clear ``TypeError`` naming the op and the dtypes for floating or complex
    operands (NumPy has no loop for them)."""
    kinds = "integer or boolean" if name.startswith(("bitwise", "invert")) else "integer"
    doc = (f"NumPy's ``{fn}`` elementwise" + (", broadcasting" if arity == 2 else "")
           + f", on {kinds} operands; no gradient (an integer or boolean result).\n\n"
           "Raises:\n    TypeError: for floating or complex operands, naming the op and the "
           "dtypes (as NumPy).\n")

    def refuse(args):
        got = " and ".join(_dt(a) for a in args)
        return TypeError(
            f"expects {kinds} operands, got {got} (NumPy's {fn} has no floating-point or "
            "complex loop); cast with .astype(int) first"
        )

    if arity == 1:
        def forward(ctx, x):  # pyright: ignore[reportRedeclaration]
            try:
                return getattr(ctx.backend, fn)(x)
            except TypeError:
                raise refuse((x,)) from None
    else:
        def forward(ctx, x, y):
            try:
                return getattr(ctx.backend, fn)(x, y)
            except TypeError:
                raise refuse((x, y)) from None

    attrs = {
        "__doc__": doc, "oper": name, "arity": arity, "differentiable": False,
        "traits": Traits(ufunc=_ufunc_name(fn)), "names": (name, *aliases), "methods": methods,
        "forward": staticmethod(forward), "batch": elementwise, "output_dtype": _dtype_rule(fn),  # pyright: ignore[reportArgumentType]
    }
    cname = "".join(p.capitalize() for p in name.split("_"))
    return expose(type(cname, (Function,), attrs))


_GENERATED = {}
for _row in UNARY:
    _GENERATED[_row.name] = _unary_class(_row)
for _row in BINARY:
    _GENERATED[_row.name] = _binary_class(_row)
for _p in PREDICATES:
    _GENERATED[_p[0]] = _predicate_class(*_p)
for _p in BITWISE:
    _GENERATED[_p[0]] = _bitwise_class(*_p)
# The classes the table makes, by name (a test keeps these lines equal to the table).
Exp = _GENERATED["exp"]
Exp2 = _GENERATED["exp2"]
Expm1 = _GENERATED["expm1"]
Log = _GENERATED["log"]
Log1p = _GENERATED["log1p"]
Log2 = _GENERATED["log2"]
Log10 = _GENERATED["log10"]
Sqrt = _GENERATED["sqrt"]
Cbrt = _GENERATED["cbrt"]
Square = _GENERATED["square"]
Reciprocal = _GENERATED["reciprocal"]
Sin = _GENERATED["sin"]
Cos = _GENERATED["cos"]
Tan = _GENERATED["tan"]
Arcsin = _GENERATED["arcsin"]
Arccos = _GENERATED["arccos"]
Arctan = _GENERATED["arctan"]
Sinh = _GENERATED["sinh"]
Cosh = _GENERATED["cosh"]
Tanh = _GENERATED["tanh"]
Arcsinh = _GENERATED["arcsinh"]
Arccosh = _GENERATED["arccosh"]
Arctanh = _GENERATED["arctanh"]
Erf = _GENERATED["erf"]
Erfc = _GENERATED["erfc"]
Sigmoid = _GENERATED["sigmoid"]
Softplus = _GENERATED["softplus"]
Floor = _GENERATED["floor"]
Ceil = _GENERATED["ceil"]
Trunc = _GENERATED["trunc"]
Rint = _GENERATED["rint"]
Positive = _GENERATED["positive"]
Fabs = _GENERATED["fabs"]
Deg2rad = _GENERATED["deg2rad"]
Rad2deg = _GENERATED["rad2deg"]
Sinc = _GENERATED["sinc"]
Spacing = _GENERATED["spacing"]
I0 = _GENERATED["i0"]
Arctan2 = _GENERATED["arctan2"]
Hypot = _GENERATED["hypot"]
Logaddexp = _GENERATED["logaddexp"]
Logaddexp2 = _GENERATED["logaddexp2"]
Fmax = _GENERATED["fmax"]
Fmin = _GENERATED["fmin"]
Remainder = _GENERATED["remainder"]
Fmod = _GENERATED["fmod"]
FloorDivide = _GENERATED["floor_divide"]
Copysign = _GENERATED["copysign"]
FloatPower = _GENERATED["float_power"]
Heaviside = _GENERATED["heaviside"]
Nextafter = _GENERATED["nextafter"]
Ldexp = _GENERATED["ldexp"]
Equal = _GENERATED["equal"]
NotEqual = _GENERATED["not_equal"]
Less = _GENERATED["less"]
LessEqual = _GENERATED["less_equal"]
Greater = _GENERATED["greater"]
GreaterEqual = _GENERATED["greater_equal"]
LogicalAnd = _GENERATED["logical_and"]
LogicalOr = _GENERATED["logical_or"]
LogicalXor = _GENERATED["logical_xor"]
LogicalNot = _GENERATED["logical_not"]
Isfinite = _GENERATED["isfinite"]
Isnan = _GENERATED["isnan"]
Isinf = _GENERATED["isinf"]
Signbit = _GENERATED["signbit"]
Isneginf = _GENERATED["isneginf"]
Isposinf = _GENERATED["isposinf"]
Isreal = _GENERATED["isreal"]
Iscomplex = _GENERATED["iscomplex"]
BitwiseAnd = _GENERATED["bitwise_and"]
BitwiseOr = _GENERATED["bitwise_or"]
BitwiseXor = _GENERATED["bitwise_xor"]
Invert = _GENERATED["invert"]
BitwiseNot = _GENERATED["bitwise_not"]
LeftShift = _GENERATED["left_shift"]
RightShift = _GENERATED["right_shift"]
BitwiseCount = _GENERATED["bitwise_count"]
Gcd = _GENERATED["gcd"]
Lcm = _GENERATED["lcm"]


# -- ops with a rule of their own --------------------------------------------------------------
@expose
class Abs(Function):
    """``|x|`` elementwise (``absolute`` is the same function).

    Gradient ``g sign(x)`` for real ``x`` (0 at 0, consistent with ``sign(0) = 0``, as
    PyTorch); ``g conj(z) / |z|`` for complex ``z`` (JAX's convention; 0 at 0).
    """
    batch = elementwise  # vmap: broadcast like a ufunc
    traits = Traits(ufunc="absolute")

    oper = "abs"
    names = ("abs", "absolute")
    methods = ("abs", "__abs__")

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.backend.abs(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        if x.dtype.kind == "c":
            r = ns.abs(x)
            return g * ns.conj(x) / ns.where(r == 0, 1.0, r)
        return g * ns.sign(x)

    @staticmethod
    def jvp(ctx, t):
        (x,) = ctx.saved_tensors
        if x.dtype.kind == "c":
            r = ns.abs(x)
            return ns.real(ns.conj(x) * t) / ns.where(r == 0, 1.0, r)
        return t * ns.sign(x)

    @classmethod
    def output_dtype(cls, d):
        return np.abs(np.zeros((), d)).dtype


@expose
class Sign(Function):
    """``sign(x)`` elementwise: -1, 0 or 1 for real ``x`` (NaN for NaN), ``z / |z|`` for complex
    ``z`` (0 at 0; NumPy 2's complex sign).

    Gradient: zero for real ``x``, everywhere (the jumps at 0 included: piecewise constant).
    For complex ``z`` the sign is smooth away from 0 but not holomorphic: with ``s = z / |z|``,
    ``ds = (dz - s**2 conj(dz)) / (2 |z|)`` (Wirtinger derivatives ``1 / (2|z|)`` and
    ``-z**2 / (2 |z|**3)``), so the cotangent of ``z`` is ``(g - conj(g) conj(s)**2) / (2|z|)``
    (JAX's convention); 0 at ``z = 0``, where the sign has no limit.
    """
    batch = elementwise  # vmap: broadcast like a ufunc
    traits = Traits(ufunc="sign")

    oper = "sign"
    names = ("sign",)
    methods = ("sign",)

    @staticmethod
    def forward(ctx, x):
        ctx.cplx = x.dtype.kind == "c"
        if ctx.cplx:
            ctx.save_for_backward(x)
        return ctx.backend.sign(x)

    @staticmethod
    def _pullback(ctx, g, conj_s2_of):
        (z,) = ctx.saved_tensors
        r = Abs.apply(z)
        s = Sign.apply(z)
        zero = r == 0
        num = g - Conj.apply(g) * conj_s2_of(s)
        return Where.apply(zero, 0.0, num / (2 * Where.apply(zero, 1.0, r)))

    @staticmethod
    def backward(ctx, g):
        if not ctx.cplx:
            return None
        return Sign._pullback(ctx, g, lambda s: Conj.apply(s * s))

    @staticmethod
    def jvp(ctx, t):
        if not ctx.cplx:
            return None
        return Sign._pullback(ctx, t, lambda s: s * s)

    @classmethod
    def output_dtype(cls, d):
        return np.sign(np.zeros((), d)).dtype


class I1(Function):
    """Modified Bessel function of the first kind, order 1 (``scipy.special.i1``): the
    derivative of :func:`i0`, a primitive so that ``i0`` differentiates to every order (it is
    not a NumPy function, so it has no public name here). Gradient ``g (I0(x) - I1(x) / x)``
    (DLMF 10.29.2, :func:`_i1_prime`: exact near 0 too)."""
    batch = elementwise  # vmap: broadcast like a ufunc
    traits = Traits(fresh=True)

    oper = "i1"

    @staticmethod
    def forward(ctx, x):
        out = _special(ctx.backend).i1(x)
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, g):
        x, out = ctx.saved_tensors
        return g * _i1_prime(x, out)

    output_dtype = _dtype_rule(lambda xp, x: _special(xp).i1(x))  # pyright: ignore[reportAssignmentType]


def _dt(v) -> str:
    return str(v.dtype) if hasattr(v, "dtype") else type(v).__name__


def _no_complex(x) -> None:
    """Reject a complex array in a forward (as NumPy's ``frexp`` and ``modf`` do)."""
    if x.dtype.kind == "c":
        raise TypeError(f"not supported for complex values (got dtype {x.dtype})")


def _dtypes_of(fn, *dtypes) -> list:
    """The dtypes of the outputs NumPy's multi-output ``fn`` gives on 0-d inputs of
    ``dtypes`` (other arguments, Python numbers, passed as they are)."""
    args = [np.zeros((), d) if isinstance(d, np.dtype) else d for d in dtypes]
    with _Quiet():
        outs = fn(*args)
    return [np.asarray(o).dtype for o in outs]


def _broadcast_pair(cls, x, y) -> list:
    """``output_shape`` of a two-output binary op: both outputs have the broadcast shape."""
    shape = Function.output_shape.__func__(cls, x, y)
    return [shape, shape]


@expose
class Frexp(Function):
    """Decompose ``x`` into mantissa and exponent, ``x = mantissa * 2**exponent`` with
    ``0.5 <= |mantissa| < 1`` (``(0, 0)`` at 0), NumPy's ``frexp``.

    Returns ``(mantissa, exponent)``: the mantissa has ``x``'s floating dtype (integers give
    float64), the exponent is int32 and carries no gradient. Gradient of the mantissa:
    ``g 2**-exponent`` (the exponent is piecewise constant). At powers of two, where the
    exponent jumps, this is the one-sided derivative on the side away from 0; at 0 (where the
    mantissa jumps from 0 to +-1/2) it is ``g``.

    Raises:
        TypeError: for complex input (as NumPy).
    """
    batch = elementwise  # vmap: broadcast like a ufunc
    traits = Traits(fresh=True)

    oper = "frexp"
    names = ("frexp",)

    @staticmethod
    def forward(ctx, x):
        _no_complex(x)
        m, e = ctx.backend.frexp(x)
        ctx.save_for_backward(e)  # an int32 output: no gradient flows through it
        return m, e

    @staticmethod
    def backward(ctx, g, _ge):
        (e,) = ctx.saved_tensors
        return ns.ldexp(g, -e)

    @classmethod
    def output_shape(cls, x):
        return [tuple(x), tuple(x)]

    @classmethod
    def output_dtype(cls, d):
        return _dtypes_of(np.frexp, d)


@expose
class Modf(Function):
    """Fractional and integral parts of ``x``, both with ``x``'s sign (NumPy's ``modf``).

    Returns ``(fractional, integral)``, both of ``x``'s floating dtype (integers give
    float64). Gradients: ``g`` through the fractional part, zero through the integral part
    (piecewise constant); at whole numbers the one-sided derivatives agree with these.

    Raises:
        TypeError: for complex input (as NumPy).
    """
    batch = elementwise  # vmap: broadcast like a ufunc
    traits = Traits(fresh=True)

    oper = "modf"
    names = ("modf",)

    @staticmethod
    def forward(ctx, x):
        _no_complex(x)
        return ctx.backend.modf(x)

    @staticmethod
    def backward(ctx, g_frac, _g_int):
        return g_frac

    @classmethod
    def output_shape(cls, x):
        return [tuple(x), tuple(x)]

    @classmethod
    def output_dtype(cls, d):
        return _dtypes_of(np.modf, d)


@expose
class DivMod(Function):
    """``(floor_divide(x, y), remainder(x, y))`` in one pass, broadcasting (NumPy's ``divmod``,
    Python's ``divmod(x, y)`` on Tensors).

    Gradients: none through the quotient (piecewise constant); through the remainder ``g`` to
    ``x`` and ``-g floor(x / y)`` to ``y``, as :func:`remainder` (one-sided at the jumps).
    ``y == 0`` gives NaN/``inf`` for floats and 0 for integers, as NumPy.

    Raises:
        ValueError: if the shapes do not broadcast.
        TypeError: for complex input (as NumPy).
    """
    batch = elementwise  # vmap: broadcast like a ufunc
    traits = Traits(fresh=True)

    oper = "divmod"
    arity = 2
    names = ("divmod",)
    methods = ("__divmod__", "__rdivmod__")

    @staticmethod
    def forward(ctx, x, y):
        xp = ctx.backend
        q, r = xp.divmod(x, y)
        q, r = xp.asarray(q), xp.asarray(r)
        ctx.save_for_backward(q)
        return q, r

    @staticmethod
    def backward(ctx, _gq, gr):
        (q,) = ctx.saved_tensors
        nx, ny = ctx.needs_input_grad
        return (gr if nx else None), (-(gr * q) if ny else None)

    @classmethod
    def output_shape(cls, x, y):
        return _broadcast_pair(cls, x, y)

    @classmethod
    def output_dtype(cls, x, y):
        return _dtypes_of(np.divmod, x, y)

    @staticmethod
    def api(x, y):
        return DivMod.apply(*operands(x, y))


DivMod.api.__doc__ = DivMod.__doc__


@expose
class Where(Function):
    """``x`` where ``condition`` is true, else ``y``, broadcasting all three (NumPy
    ``where``; the arguments may also be given by name, as HIPS autograd's). With neither
    ``x`` nor ``y``: ``nonzero(condition)``.

    Gradient: the cotangent goes to ``x`` where ``condition`` holds and to ``y`` elsewhere.

    Raises:
        TypeError: if ``condition`` is not boolean (compare first, e.g. ``x > 0``), or only
            one of ``x`` and ``y`` is given.
        ValueError: if the shapes do not broadcast.
    """
    batch = elementwise  # vmap: broadcast like a ufunc
    traits = Traits(fresh=True, formula=lambda xp, cond, x, y: xp.where(cond, x, y))

    oper = "where"
    names = ("where",)

    @staticmethod
    def forward(ctx, cond, x, y):
        ctx.save_for_backward(cond)
        return ctx.backend.where(cond, x, y)

    @staticmethod
    def backward(ctx, g):
        (cond,) = ctx.saved_tensors
        _, nx, ny = ctx.needs_input_grad
        gx = Where.apply(cond, g, 0.0) if nx else None
        gy = Where.apply(cond, 0.0, g) if ny else None
        return None, gx, gy

    @staticmethod
    def jvp(ctx, tc, tx, ty):
        (cond,) = ctx.saved_tensors
        return Where.apply(cond, 0.0 if tx is None else tx, 0.0 if ty is None else ty)

    @staticmethod
    def api(condition, x=None, y=None):
        if x is None and y is None:
            return ns.nonzero(condition)
        if x is None or y is None:
            raise TypeError("where: give both x and y (or neither, for nonzero(condition))")
        cond = tensor_arg(condition)
        if cond.dtype != np.bool_:
            raise TypeError(
                f"where: condition must be boolean, got dtype {cond.dtype} (shape {cond.shape}); "
                "pass a comparison such as x > 0, or cast with condition.astype(bool)"
            )
        x, y = operands(x, y)
        return Where.apply(cond, x, y)

    @classmethod
    def output_dtype(cls, c, x, y):
        args = [d for d in (x, y) if isinstance(d, (np.dtype, int, float, complex))]
        return np.result_type(*args)


@expose
class Clip(Function):
    """``clip(a, a_min, a_max) = minimum(maximum(a, a_min), a_max)``; a bound may be ``None``.

    Gradient: to ``a`` where ``a_min <= a <= a_max`` (bounds inclusive: at the boundary the
    whole gradient goes to ``a``, as PyTorch's ``clamp``), else to the active bound. With
    ``a_min > a_max`` the result is ``a_max`` everywhere (NumPy) and the gradient goes to it.

    Raises:
        ValueError: if the shapes do not broadcast, or for bounds given both positionally
            (``a_min``/``a_max``) and as NumPy 2's ``min=``/``max=``.
    """
    batch = elementwise  # vmap: broadcast like a ufunc
    traits = Traits(fresh=True)

    oper = "clip"
    names = ("clip",)
    methods = ("clip",)

    @staticmethod
    def forward(ctx, x, a_min, a_max):
        ctx.save_for_backward(x, a_min, a_max)
        return ctx.backend.clip(x, a_min, a_max)

    @staticmethod
    def backward(ctx, g):
        x, lo, hi = ctx.saved_tensors
        nx, nlo, nhi = ctx.needs_input_grad
        below = None if lo is None else x < lo
        above = None
        if hi is not None:
            above = ns.where(below, lo, x) > hi if below is not None else x > hi
            if below is not None:
                below = below & ~above
        if below is None:
            out_x = above
        elif above is None:
            out_x = below
        else:
            out_x = below | above
        gx = (g if out_x is None else ns.where(out_x, 0.0, g)) if nx else None
        glo = ns.where(below, g, 0.0) if nlo else None
        ghi = ns.where(above, g, 0.0) if nhi else None
        return gx, glo, ghi

    @staticmethod
    def api(a, a_min=None, a_max=None, *, min=None, max=None):  # noqa: A002
        a = tensor_arg(a)
        if (min is not None or max is not None) and (a_min is not None or a_max is not None):
            raise ValueError(
                "clip: pass the bounds either as a_min/a_max or as min=/max= (NumPy 2's "
                "keywords), not both"
            )
        a_min = min if a_min is None else a_min
        a_max = max if a_max is None else a_max
        if a_min is None and a_max is None:
            return a
        lo = None if a_min is None else operand(a_min)
        hi = None if a_max is None else operand(a_max)
        return Clip.apply(a, lo, hi)


@expose
class Round(Function):
    """Round to ``decimals`` decimals (negative: tens, hundreds...), halves to even, like NumPy
    (``around`` is the same function). Dtype kept. Zero gradient everywhere.

    Raises:
        TypeError: if ``decimals`` is not an int.
    """
    batch = elementwise  # vmap: broadcast like a ufunc
    traits = Traits(fresh=True)

    oper = "round"
    names = ("round", "around")
    methods = ("round", "__round__")

    @staticmethod
    def forward(ctx, x, decimals=0):
        return ctx.backend.round(x, decimals)

    @staticmethod
    def backward(ctx, g):
        return None

    @staticmethod
    def api(x, decimals=0):
        if isinstance(decimals, bool) or not isinstance(decimals, (int, np.integer)):
            raise TypeError(f"round: decimals must be an int, got {decimals!r}")
        return Round.apply(tensor_arg(x), decimals=int(decimals))


@expose
class Relu(Function):
    """Rectified linear unit ``maximum(x, 0)``; dtype kept. Gradient: ``g`` where ``x > 0``,
    else 0; at ``x = 0`` the gradient is 0 (as PyTorch and JAX). The backward is
    :class:`ReluGrad` of the cotangent and the saved output."""
    batch = elementwise  # vmap: broadcast like a ufunc
    traits = Traits(fresh=True)

    oper = "relu"
    names = ("relu",)
    methods = ("relu",)

    @staticmethod
    def forward(ctx, x):
        out = ctx.backend.maximum(x, 0)
        # The output carries the mask (out > 0 exactly where x > 0, NaN in neither).
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        return ReluGrad.apply(g, out)

    jvp = backward


_SAME_SIZE_INT = {2: "i2", 4: "i4", 8: "i8"}  # float16/32/64 viewed as integers of their size


class ReluGrad(Function):
    """``where(y > 0, g, 0)``: the backward of :class:`Relu` given its output ``y``, fused into
    one primitive.

    Exactly ``where``'s values, ``+0.0`` where ``y <= 0`` (or NaN) whatever ``g`` holds there,
    inf and NaN included: ``g``'s bits, viewed as integers of its size, are multiplied by the
    mask (0 or 1), with no floating-point product that could turn ``inf * 0`` into NaN. Linear
    in ``g``, piecewise constant in ``y``: its backward sends ``ReluGrad(h, y)`` to ``g`` and
    nothing to ``y``.
    """
    batch = scaled_cotangent  # vmap: broadcast like a ufunc, the output g's shape
    traits = Traits(into=True, fresh=True)

    oper = "relu_grad"
    nondiff_argnums = (1,)

    @staticmethod
    def forward(ctx, g, y, into=None):
        ctx.save_for_backward(y)
        return _masked(ctx.backend, g, y > 0, into)

    @staticmethod
    def backward(ctx, h):
        (y,) = ctx.saved_tensors
        return (ReluGrad.apply(h, y) if ctx.needs_input_grad[0] else None), None

    @staticmethod
    def jvp(ctx, tg, ty):
        (y,) = ctx.saved_tensors
        return None if tg is None else ReluGrad.apply(tg, y)

    @classmethod
    def output_dtype(cls, g, y):
        return g


@expose
class Gelu(Function):
    """Gaussian error linear unit (Hendrycks and Gimpel, 2016, arXiv:1606.08415).

    ``approximate="none"``: ``x Phi(x)`` with ``Phi`` the standard normal CDF; derivative
    ``Phi(x) + x phi(x)``. ``approximate="tanh"``: ``0.5 x (1 + tanh(u))``,
    ``u = sqrt(2/pi) (x + 0.044715 x**3)``, and its derivative. A bool is accepted as JAX's
    ``approximate`` (True means ``"tanh"``).

    Raises:
        ValueError: for another ``approximate``.
    """
    batch = elementwise  # vmap: broadcast like a ufunc
    traits = Traits(fresh=True)

    oper = "gelu"
    names = ("gelu",)
    methods = ("gelu",)

    @staticmethod
    def forward(ctx, x, approximate="none"):
        xp = ctx.backend
        ctx.save_for_backward(x)
        ctx.approximate = approximate
        if approximate == "tanh":
            return 0.5 * x * (1 + xp.tanh(_GELU_C * (x + _GELU_A * (x * x * x))))
        return x * _special(xp).ndtr(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        if ctx.approximate == "tanh":
            x2 = x * x
            t = ns.tanh(_GELU_C * (x + _GELU_A * (x2 * x)))
            d = 0.5 * (1 + t) + (0.5 * _GELU_C) * x * (1 - t * t) * (1 + (3 * _GELU_A) * x2)
        else:
            cdf = 0.5 * ns.erfc(-_INV_SQRT2 * x)
            d = cdf + x * (_INV_SQRT_2PI * ns.exp(-0.5 * (x * x)))
        return g * d

    @staticmethod
    def api(x, approximate="none"):
        if approximate is True or approximate is False:
            approximate = "tanh" if approximate else "none"
        if approximate not in ("none", "tanh"):
            raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
        return Gelu.apply(tensor_arg(x), approximate=approximate)


class _MinMax(Function):
    """Elementwise maximum (minimum) with NaN propagating (NumPy's ``maximum``/``minimum``).

    Gradient: to the operand that gives the result; at ties ``x == y`` split equally (``g / 2``
    each), consistent with the reductions ``max``/``min``. The forward also returns the tie
    mask (a boolean, non-differentiable second output), so the backward needs only the output,
    ``y`` and that mask: ``x`` need not outlive the op (in ``maximum(h @ w + b, 0.0)`` the
    pre-activation is freed at once, as in a hand-written ReLU).

    Raises:
        ValueError: if the shapes do not broadcast.
    """
    batch = elementwise  # vmap: broadcast like a ufunc

    arity = 2
    greater = True
    traits = Traits(fresh=True)

    @classmethod
    def forward(cls, ctx, x, y):
        xp = ctx.backend
        out = xp.maximum(x, y) if cls.greater else xp.minimum(x, y)
        ties = xp.asarray(x == y)
        if ties.shape != out.shape:
            ties = xp.broadcast_to(ties, out.shape)
        ctx.save_for_backward(out, y, ties)
        ctx.mark_non_differentiable(ties)
        return out, ties

    @classmethod
    def backward(cls, ctx, g, _g_ties):
        out, y, ties = ctx.saved_tensors
        nx, ny = ctx.needs_input_grad
        gx = MinMaxGrad.apply(g, out, y, ties, greater=cls.greater, wrt=0) if nx else None
        gy = MinMaxGrad.apply(g, out, y, ties, greater=cls.greater, wrt=1) if ny else None
        return gx, gy

    @classmethod
    def jvp(cls, ctx, tx, ty):
        out, y, ties = ctx.saved_tensors
        a = None if tx is None else MinMaxGrad.apply(tx, out, y, ties, greater=cls.greater, wrt=0)
        b = None if ty is None else MinMaxGrad.apply(ty, out, y, ties, greater=cls.greater, wrt=1)
        return _plus(a, b), None

    @classmethod
    def output_shape(cls, x, y):
        return _broadcast_pair(cls, x, y)

    @classmethod
    def output_dtype(cls, x, y):
        return [np.result_type(*[d for d in (x, y) if isinstance(d, (np.dtype, int, float))]),
                np.dtype(bool)]


@expose
class Maximum(_MinMax):
    __doc__ = _MinMax.__doc__
    oper = "maximum"
    traits = Traits(fresh=True, formula=lambda xp, x, y: (xp.maximum(x, y), x == y))
    names = ("maximum",)
    methods = ("maximum",)

    @staticmethod
    def api(x, y):
        return Maximum.apply(*operands(x, y))[0]


@expose
class Minimum(_MinMax):
    __doc__ = _MinMax.__doc__.replace("maximum (minimum)", "minimum (maximum)")  # pyright: ignore[reportOptionalMemberAccess]
    oper = "minimum"
    traits = Traits(fresh=True, formula=lambda xp, x, y: (xp.minimum(x, y), x == y))
    names = ("minimum",)
    methods = ("minimum",)
    greater = False

    @staticmethod
    def api(x, y):
        return Minimum.apply(*operands(x, y))[0]


def _minmax_grad_formula(xp, g, out, y, ties, greater, wrt):
    """:class:`MinMaxGrad` on scalars (the fused-kernel form): ``g / 2`` at a tie, else ``g``
    or +0 (the array rule, once any tie exists, multiplies the others by 1.0 or 0.0, which
    differs from this only where ``g`` is not finite or in the sign of a zero)."""
    win = out > y if greater else out < y
    if wrt == 1:
        win = ~(win | ties)
    return xp.where(ties, g * 0.5, _times_formula(xp, g, win, False))


class MinMaxGrad(Function):
    """The backward of :class:`Maximum`/:class:`Minimum` for one operand (``wrt`` 0 or 1):
    ``g`` where that operand gives the result, ``g / 2`` at ties, 0 elsewhere, from the output
    ``out``, the second operand ``y`` and the tie mask (``x`` wins exactly where ``out`` is
    strictly beyond ``y``). Linear in ``g``, piecewise constant in the rest."""
    batch = scaled_cotangent  # vmap: broadcast like a ufunc, the output g's shape
    traits = Traits(into=True, fresh=True, formula=_minmax_grad_formula)

    oper = "minmax_grad"
    nondiff_argnums = (1, 2, 3)

    @staticmethod
    def forward(ctx, g, out, y, ties, greater, wrt, into=None):
        ctx.save_for_backward(out, y, ties)
        ctx.greater, ctx.wrt = greater, wrt
        xp = ctx.backend
        win = out > y if greater else out < y
        if wrt == 1:
            win = ~(win | ties)
        d = xp.where(ties, 0.5, win) if ties.any() else win
        return _times(xp, g, d, False, into)

    @staticmethod
    def backward(ctx, h):
        out, y, ties = ctx.saved_tensors
        gh = MinMaxGrad.apply(h, out, y, ties, greater=ctx.greater, wrt=ctx.wrt)
        return gh, None, None, None

    @staticmethod
    def jvp(ctx, t, *_):
        if t is None:  # only the piecewise-constant operands move: the output stays
            return None
        out, y, ties = ctx.saved_tensors
        return MinMaxGrad.apply(t, out, y, ties, greater=ctx.greater, wrt=ctx.wrt)

    @classmethod
    def output_dtype(cls, g, *rest, **params):
        return g


# -- complex parts ---------------------------------------------------------------------------
@expose
class Real(Function):
    """The real part (the value itself for real input). Gradient (JAX's convention): the
    cotangent, as a complex cotangent of ``z`` for complex input.

    Args:
        x: Tensor, array or number of any shape; real or complex.

    Returns:
        Tensor of ``x``'s shape: float32 for complex64, float64 for complex128, ``x``'s dtype
        for real input.

    Raises:
        TypeError: for a non-numeric operand.
    """
    batch = elementwise  # vmap: broadcast like a ufunc
    traits = Traits(view=True)

    oper = "real"
    names = ("real",)

    @staticmethod
    def forward(ctx, x):
        ctx.cplx = x.dtype.kind == "c"
        return ctx.backend.real(x)

    @staticmethod
    def backward(ctx, g):
        return g

    @staticmethod
    def jvp(ctx, t):
        return ns.real(t) if ctx.cplx else t

    @classmethod
    def output_dtype(cls, d):
        return np.real(np.zeros((), d)).dtype


@expose
class Imag(Function):
    """The imaginary part (zeros for real input). Gradient (JAX's convention): ``-1j g`` to a
    complex ``z``; none to a real input.

    Args:
        x: Tensor, array or number of any shape; real or complex.

    Returns:
        Tensor of ``x``'s shape: float32 for complex64, float64 for complex128, ``x``'s dtype
        (zeros) for real input.

    Raises:
        TypeError: for a non-numeric operand.
    """
    batch = elementwise  # vmap: broadcast like a ufunc
    traits = Traits(view=True)

    oper = "imag"
    names = ("imag",)

    @staticmethod
    def forward(ctx, x):
        ctx.cplx = x.dtype.kind == "c"
        return ctx.backend.imag(x)

    @staticmethod
    def backward(ctx, g):
        return g * -1j if ctx.cplx else None

    @staticmethod
    def jvp(ctx, t):
        return ns.imag(t) if ctx.cplx else None

    @classmethod
    def output_dtype(cls, d):
        return np.imag(np.zeros((), d)).dtype


@expose
class Conj(Function):
    """The complex conjugate (``conjugate`` is the same; the value for real input). Gradient:
    the conjugate of the cotangent.

    Args:
        x: Tensor, array or number of any shape.

    Returns:
        Tensor of ``x``'s shape and dtype.

    Raises:
        TypeError: for a non-numeric operand.
    """
    batch = elementwise  # vmap: broadcast like a ufunc
    traits = Traits(ufunc="conjugate")

    oper = "conj"
    names = ("conj", "conjugate")
    methods = ("conj", "conjugate")

    @staticmethod
    def forward(ctx, x):
        return ctx.backend.conj(x)

    @staticmethod
    def backward(ctx, g):
        return Conj.apply(g)

    jvp = backward


@expose
class Angle(Function):
    """The angle of complex ``z`` in radians (0 or pi for real input), NumPy's ``angle``.
    Gradient (JAX's convention): ``g (-1j conj(z)) / |z|**2``, 0 at 0; none for real input.

    Args:
        z: Tensor, array or number of any shape (real or complex).
        deg: Return degrees instead of radians (the public function's keyword).

    Returns:
        Real floating Tensor of ``z``'s shape (float32 for complex64/float32, float64 for
        complex128/float64/integers).

    Raises:
        TypeError: for a non-numeric operand.
    """
    batch = elementwise  # vmap: broadcast like a ufunc
    traits = Traits(fresh=True)

    oper = "angle"
    names = ("angle",)

    @staticmethod
    def forward(ctx, z):
        ctx.save_for_backward(z)
        return ctx.backend.angle(z)

    @staticmethod
    def backward(ctx, g):
        (z,) = ctx.saved_tensors
        if z.dtype.kind != "c":
            return None
        r2 = ns.real(z * ns.conj(z))
        return g * (-1j * ns.conj(z)) / ns.where(r2 == 0, 1.0, r2)

    @classmethod
    def output_dtype(cls, d):
        return np.angle(np.zeros((), d)).dtype

    @staticmethod
    def api(z, deg=False):
        """The angle (argument) of complex ``z``, in radians in ``(-pi, pi]`` or, with
        ``deg=True``, in degrees (NumPy's ``angle``); 0 or pi for real input.

        Gradient (JAX's convention): ``g (-1j conj(z)) / |z|**2`` (times ``180/pi`` with
        ``deg``), 0 at 0; none for real input."""
        out = Angle.apply(tensor_arg(z))
        return out * (180.0 / math.pi) if deg else out


# -- casts and gradient control ----------------------------------------------------------------
@expose
class AsType(Function):
    """Cast to ``dtype``; differentiable between floating and complex dtypes (the cotangent is
    cast back: a complex-to-real cast keeps the real part, JAX's convention); integer and
    boolean results carry no gradient.

    Raises:
        TypeError: if ``dtype`` is not a dtype NumPy understands, naming it.
    """
    batch = elementwise  # vmap: broadcast like a ufunc
    traits = Traits(fresh=True, formula=lambda xp, x, dtype: x.astype(dtype))

    oper = "astype"
    bfloat16_native = True  # NumPy casts to and from bfloat16 itself
    names = ("astype",)
    methods = ("astype", "convert_to")

    @staticmethod
    def forward(ctx, x, dtype):
        if x.dtype.kind == "c" and np.dtype(dtype).kind in "iuf":
            x = x.real  # decided, not warned: the real part, as NumPy's cast keeps
        return x.astype(dtype)

    @staticmethod
    def backward(ctx, g):
        return g, None

    @staticmethod
    def jvp(ctx, t, _):
        return AsType.apply(t, ctx.out_avals[0][1])

    @staticmethod
    def api(x, dtype, copy=True):
        x = tensor_arg(x)
        try:
            dtype = np.dtype(dtype)
        except TypeError:
            raise TypeError(
                f"astype: {dtype!r} is not a dtype; expected a NumPy dtype or name such as "
                "'float32', 'int64', 'complex64' or 'bool'"
            ) from None
        if x.dtype == dtype:
            return x
        return AsType.apply(x, dtype)

    @classmethod
    def output_shape(cls, shape, dtype=None):
        return tuple(shape)

    @classmethod
    def output_dtype(cls, in_dtype, dtype=None):
        return np.dtype(dtype)


@expose
class StopGradient(Function):
    """The same value with zero gradient under every transform (``x.detach()``)."""
    batch = elementwise  # vmap: broadcast like a ufunc
    traits = Traits(view=True)

    oper = "stop_gradient"
    differentiable = False
    methods = ("detach",)

    @staticmethod
    def forward(ctx, x):
        return x


__all__ = [
    "MulNoNan", "DivNoNan", "Add", "Sub", "Mul", "Div", "Neg", "Pow", "Unary", "Binary",
    "UNARY", "BINARY", "PREDICATES", "BITWISE", "UnaryGrad", "BinaryGrad", "Abs", "Sign", "I1",
    "Frexp", "Modf", "DivMod", "Where", "Clip", "Round",
    "Maximum", "Minimum", "MinMaxGrad", "Relu", "ReluGrad", "Gelu", "Real", "Imag", "Conj",
    "Angle", "AsType", "StopGradient",
    # the table's classes
    "Exp", "Exp2", "Expm1", "Log", "Log1p", "Log2", "Log10", "Sqrt", "Cbrt", "Square",
    "Reciprocal", "Sin", "Cos", "Tan", "Arcsin", "Arccos", "Arctan", "Sinh", "Cosh", "Tanh",
    "Arcsinh", "Arccosh", "Arctanh", "Erf", "Erfc", "Sigmoid", "Softplus", "Floor", "Ceil",
    "Trunc", "Rint", "Positive", "Fabs", "Deg2rad", "Rad2deg", "Sinc", "Spacing", "I0",
    "Arctan2", "Hypot", "Logaddexp", "Logaddexp2", "Fmax", "Fmin", "Remainder", "Fmod",
    "FloorDivide", "Copysign", "FloatPower", "Heaviside", "Nextafter", "Ldexp", "Equal",
    "NotEqual", "Less", "LessEqual", "Greater", "GreaterEqual", "LogicalAnd", "LogicalOr",
    "LogicalXor", "LogicalNot", "Isfinite", "Isnan", "Isinf", "Signbit", "Isneginf",
    "Isposinf", "Isreal", "Iscomplex", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "Invert",
    "BitwiseNot", "LeftShift", "RightShift", "BitwiseCount", "Gcd", "Lcm",
]  # fmt: skip

from tapegrad.ops._registry import METHODS as _METHODS  # noqa: E402

_METHODS["real"] = property(lambda self: Real.apply(self), doc="The real part (``tnp.real``).")
_METHODS["imag"] = property(lambda self: Imag.apply(self), doc="The imaginary part.")
