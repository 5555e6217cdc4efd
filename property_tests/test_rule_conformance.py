"""Every primitive's rules against each other: ``tapegrad.testing.check_rule`` over every
:class:`~tapegrad.Function` subclass tapegrad defines, found by walking the class tree (not a
list), on a grid of static parameters and shapes.

For each op and case: ``vmap`` over each argument (leading, non-leading and last
``in_axes``, and all together) equals the Python loop; ``jacfwd``, ``jacrev`` and ``hessian``
equal loops of ``jvp``/``vjp``; the forward-mode rule agrees with the backward rule;
``vmap(grad)`` equals the loop of ``grad``; and first derivatives agree with finite
differences. A primitive with no entry in :data:`SPECS` fails
:func:`test_every_primitive_has_a_spec`: a new op cannot go untested by accident.

The reductions are also checked on drawn shapes (size-0 and size-1 dimensions included) and
drawn axes (None, an int or a tuple, positive or negative) with hypothesis.

Profiles: the default (``fast``) runs a few cases per op, chosen to cover non-leading and
negative axes, ``keepdims`` both ways and non-square shapes; ``TAPEGRAD_RULES=long`` (or the
``dev`` hypothesis profile) runs the whole grid (also size-1 and size-0 dimensions, 0-d and
3-d inputs, tuple axes).
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import zlib
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.core.function import Function
from tapegrad.testing import check_rule

LONG = (os.environ.get("TAPEGRAD_RULES", "") == "long"
        or os.environ.get("HYPOTHESIS_PROFILE", "") == "dev")


# -- discovery -------------------------------------------------------------------------------
def _import_all() -> None:
    for m in pkgutil.walk_packages(tg.__path__, "tapegrad."):
        importlib.import_module(m.name)


def all_primitives() -> list:
    """Every Function subclass defined by tapegrad (user rules made by ``custom_vjp`` are
    instances of its one primitive and are left out)."""
    _import_all()
    from tapegrad.transforms.custom_vjp import _CustomVJPFunction

    seen: list = []

    def walk(c):
        for s in c.__subclasses__():
            if s in seen:
                continue
            seen.append(s)
            walk(s)

    walk(Function)
    return [c for c in seen if c.__module__.startswith("tapegrad.")
            and not (issubclass(c, _CustomVJPFunction) and c is not _CustomVJPFunction)]


def qualname(cls) -> str:
    return f"{cls.__module__.removeprefix('tapegrad.')}.{cls.__name__}"


# -- cases -----------------------------------------------------------------------------------
class Case(NamedTuple):
    """One check: ``make(rng)`` gives the positional arguments of one example (called again
    for the other example of the batch), ``params`` the static keyword parameters, ``fn`` a
    function applying the primitive where its own calling convention needs help (default:
    the class itself), ``checks`` the checks (default: all), ``tol`` ``(atol, rtol)``."""

    make: Callable
    params: dict = {}
    fn: Any = None
    checks: tuple | None = None
    tol: tuple = (1e-8, 1e-6)
    label: str = ""
    raises: type | None = None  # the error the case must raise (and vmap with it)


class Abstract(NamedTuple):
    """A base class with no rules of its own: its subclasses are checked."""

    reason: str


NO_FD = ("vmap", "jacfwd", "jacrev", "jvp_vjp", "hessian", "vmap_grad")
FIRST_ORDER = ("vmap", "jacfwd", "jacrev", "jvp_vjp", "vmap_grad", "fd")


def U(lo=-1.0, hi=1.0):
    """Uniform floats in ``[lo, hi)``."""
    return lambda rng, shape: rng.uniform(lo, hi, shape)


UNIT = U()  # the default sampler: uniform in [-1, 1)


def AWAY(lo=0.2, hi=1.0):
    """Floats with ``lo <= |v| < hi`` and random signs (away from a kink at 0)."""
    return lambda rng, shape: rng.uniform(lo, hi, shape) * rng.choice([-1.0, 1.0], shape)


def INT(lo, hi, dtype=np.int64):
    return lambda rng, shape: rng.integers(lo, hi, shape).astype(dtype)


def BOOL():
    return lambda rng, shape: rng.random(shape) < 0.5


def arrays(*specs):
    """``make`` from ``(shape, sampler)`` pairs; a non-pair entry is passed as is (static)."""

    def make(rng):
        out = []
        for s in specs:
            if isinstance(s, tuple) and len(s) == 2 and callable(s[1]):
                out.append(s[1](rng, s[0]))
            else:
                out.append(s)
        return tuple(out)

    return make


def pick(long_cases: list, fast: list) -> list:
    """The whole grid in the long profile, else the cases at the positions ``fast``."""
    if LONG:
        return long_cases
    return [long_cases[i] for i in fast if i < len(long_cases)]


# Shapes of the grid: non-square, square, size-1 and size-0 dimensions, 0-d and 3-d.
SHAPES = [(3, 4), (3, 3), (1, 4), (3, 0), (), (4,), (2, 3, 4)]
BINARY_SHAPES = [((3, 4), (4,)), ((1, 4), (3, 1)), ((3, 4), (3, 4)), ((), (3,)),
                 ((3, 0), (1, 0)), ((4,), ())]


def unary_cases(sample, fast=(0,), checks=None, tol=(1e-8, 1e-6), params=None):
    cases = [Case(arrays((s, sample)), params or {}, checks=checks, tol=tol, label=str(s))
             for s in SHAPES]
    return pick(cases, fast)


def binary_cases(sx, sy=None, fast=(0, 1), checks=None, tol=(1e-8, 1e-6), params=None):
    sy = sx if sy is None else sy
    cases = [Case(arrays((a, sx), (b, sy)), params or {}, checks=checks, tol=tol,
                  label=f"{a}{b}") for a, b in BINARY_SHAPES]
    return pick(cases, fast)


AXES_GRID = [
    # (shape, axis, keepdims): the first rows are the fast profile
    ((3, 4), 1, False),
    ((3, 4), -1, True),
    ((2, 3, 4), (0, -1), False),
    ((3, 3), None, True),
    ((3, 4), 0, False),
    ((3, 4), -2, True),
    ((3, 4), None, False),
    ((3, 4), (0, 1), True),
    ((2, 3, 4), 1, False),
    ((2, 3, 4), -2, True),
    ((2, 3, 4), (1, 2), True),
    ((1, 4), 0, False),
    ((1, 4), 1, True),
    ((3, 0), 0, False),
    ((3, 0), 1, True),
    ((4,), 0, False),
    ((4,), -1, True),
    ((), None, False),
    ((3, 4), 2, False),  # out of range: the op and every vmap of it raise
    ((3, 4), (0, -3), True),
]
#: The rows of AXES_GRID whose axis is out of range.
_BAD_AXES = {((3, 4), 2), ((3, 4), (0, -3))}


def _empty_reduction(shape, axis) -> bool:
    axes = range(len(shape)) if axis is None else (axis if isinstance(axis, tuple) else (axis,))
    return any(shape[a] == 0 for a in axes)


def reduction_cases(sample=UNIT, fast=(0, 1, 2, 3, 18), checks=None, extra=None, nonempty=False,
                    tol=(1e-8, 1e-6)):
    """The AXES_GRID cases; ``nonempty``: a reduction over a size-0 axis raises ValueError."""
    cases = []
    for shape, axis, keepdims in AXES_GRID:
        params = {"axis": axis, "keepdims": keepdims, **(extra or {})}
        bad = (shape, axis) in _BAD_AXES or (nonempty and _empty_reduction(shape, axis))
        cases.append(Case(arrays((shape, sample)), params, checks=checks, tol=tol,
                          label=f"{shape}-{axis}-{keepdims}", raises=ValueError if bad else None))
    return pick(cases, fast)


SINGLE_AXIS = [((3, 4), 1), ((3, 4), -1), ((2, 3, 4), 0), ((2, 3, 4), -2), ((1, 4), 0),
               ((3, 0), 1), ((4,), 0), ((3, 4), -2), ((3, 4), 2), ((4,), -2)]
_BAD_AXIS = {((3, 4), 2), ((4,), -2)}


def axis_cases(sample=UNIT, fast=(0, 1, 3, 8), checks=None, extra=None, key="axis",
               tol=(1e-8, 1e-6), nonempty=False):
    """The SINGLE_AXIS cases; ``nonempty``: an op over a size-0 axis raises ValueError."""
    cases = [Case(arrays((shape, sample)), {key: axis, **(extra or {})}, checks=checks,
                  tol=tol, label=f"{shape}-{axis}",
                  raises=ValueError if (shape, axis) in _BAD_AXIS or (
                      nonempty and _empty_reduction(shape, axis)) else None)
             for shape, axis in SINGLE_AXIS]
    return pick(cases, fast)


# -- elementwise table ops: specs derived from the table row ---------------------------------
#: Sampling domains of table rows by name (default: positive floats in [0.2, 0.9), inside the
#: domain of every other unary function).
ROW_DOMAINS: dict = {
    "arccosh": (U(1.2, 3.0),),
    "arctan2": (AWAY(), AWAY()),
    "hypot": (AWAY(), AWAY()),
    "remainder": (U(0.5, 3.0), U(0.3, 0.9)),
    "fmod": (U(0.5, 3.0), U(0.3, 0.9)),
    "floor_divide": (U(0.5, 3.0), U(0.3, 0.9)),
    "copysign": (AWAY(), AWAY()),
    "float_power": (U(0.3, 2.0), U(-2.0, 2.0)),
    "heaviside": (AWAY(), U()),
    "nextafter": (U(), U()),
    "ldexp": (U(), INT(-3, 4)),
    "fmax": (U(), U()),
    "fmin": (U(), U()),
    "logaddexp": (U(-2, 2), U(-2, 2)),
    "logaddexp2": (U(-2, 2), U(-2, 2)),
    "tan": (U(-1.2, 1.2),),
    "sinc": (U(-2, 2),),
    "spacing": (AWAY(),),
    "floor": (U(-3, 3),),
    "ceil": (U(-3, 3),),
    "trunc": (U(-3, 3),),
    "rint": (U(-3, 3),),
    "i0": (U(-2, 2),),
}
_INT_ROW = (INT(0, 7), INT(0, 7))
_BOOL_ROW = (BOOL(), BOOL())


def _row_domains(cls) -> tuple:
    name = cls.row.name if hasattr(cls, "row") else cls.oper
    if name in ROW_DOMAINS:
        return ROW_DOMAINS[name]
    arity = getattr(cls, "arity", 1)
    if name.startswith("logical_"):
        return _BOOL_ROW[:arity]
    if not cls.differentiable and (name.startswith(("bitwise", "left_", "right_", "invert"))
                                   or name in ("gcd", "lcm")):
        return _INT_ROW[:arity]
    return (U(0.2, 0.9),) * arity


def table_spec(cls):
    doms = _row_domains(cls)
    if len(doms) == 1:
        return unary_cases(doms[0], fast=(0, 4))
    return binary_cases(doms[0], doms[1], fast=(0, 1, 3))


# -- specs -----------------------------------------------------------------------------------
from tapegrad.core import weak  # noqa: E402
from tapegrad.ops import elementwise as ew  # noqa: E402
from tapegrad.ops import movement as mv  # noqa: E402
from tapegrad.ops import reduction as rd  # noqa: E402

SPECS: dict = {}


def spec(*classes):
    """Decorator: the function returns the cases of ``classes``."""

    def register(fn):
        for c in classes:
            SPECS[c] = fn
        return fn

    return register


def _cases(cls) -> list:
    s = SPECS.get(cls)
    if s is None and hasattr(cls, "row"):
        return table_spec(cls)
    if isinstance(s, Abstract):
        return []
    return s(cls) if s is not None else []


# elementwise: the predicate and bitwise tables (no derivative; vmap only)
@spec(*[ew._GENERATED[p[0]] for p in (*ew.PREDICATES, *ew.BITWISE)])
def _(cls):
    return table_spec(cls)


# elementwise: arithmetic and friends
@spec(ew.Add, ew.Sub, ew.Mul, ew.MulNoNan)
def _(cls):
    return binary_cases(U(), fast=(0, 1, 3))


@spec(ew.Div, ew.DivNoNan)
def _(cls):
    return binary_cases(U(), AWAY(0.3, 1.0), fast=(0, 1))


@spec(ew.Pow)
def _(cls):
    return binary_cases(U(0.3, 2.0), U(-2.0, 2.0), fast=(0, 1))


@spec(ew.Neg, ew.Real, ew.Imag, ew.Conj)
def _(cls):
    cases = unary_cases(U(), fast=(0, 4))
    cplx = [Case(arrays(((3, 4), U()), ), fn=lambda x, c=cls: c.apply(x * (1 + 0.5j)),
                 label="complex")]
    return cases + cplx


@spec(ew.Abs, ew.Sign, ew.Relu)
def _(cls):
    return unary_cases(AWAY(), fast=(0, 4)) + [
        Case(arrays(((3, 4), AWAY())), fn=lambda x, c=cls: c.apply(x * (1 - 0.7j)),
             label="complex")] * (cls is not ew.Relu)


@spec(ew.Angle)
def _(cls):
    return [Case(arrays(((3, 4), AWAY())), fn=lambda x: ew.Angle.apply(x * (1 - 0.7j) + 0.3),
                 label="complex"),
            Case(arrays(((3, 4), AWAY())), label="real")]


@spec(ew.I1)
def _(cls):
    return unary_cases(U(-2, 2), fast=(0, 4))


@spec(ew.Frexp, ew.Modf)
def _(cls):
    return unary_cases(AWAY(0.3, 3.0), fast=(0, 4))


@spec(ew.DivMod)
def _(cls):
    return binary_cases(U(0.5, 3.0), U(0.3, 0.9), fast=(0, 1))


@spec(ew.Where)
def _(cls):
    shapes = [((3, 4), (3, 4), (4,)), ((1, 4), (3, 1), ()), ((3, 0), (1, 0), (3, 1)),
              ((), (3,), (3,))]
    return pick([Case(arrays((c, BOOL()), (a, U()), (b, U())), label=str(c))
                 for c, a, b in shapes], (0, 1))


@spec(ew.Clip)
def _(cls):
    cases = [
        Case(arrays(((3, 4), U(-2, 2)), ((4,), U(-1.0, -0.5)), ((3, 1), U(0.5, 1.0))),
             label="tensor bounds"),
        Case(arrays(((3, 4), U(-2, 2)), None, ((4,), U(0.2, 1.0))), label="upper only"),
        Case(arrays(((3, 4), U(-2, 2)), -0.5, 0.5), label="number bounds"),
        Case(arrays(((), U(-2, 2)), ((3,), U(-1.0, -0.5)), None), label="0-d lower only"),
    ]
    return pick(cases, (0, 1, 2))


@spec(ew.Round)
def _(cls):
    return pick([Case(arrays(((3, 4), U(-30, 30))), {"decimals": d}) for d in (0, 1, -1)],
                (0, 2))


@spec(ew.ReluGrad)
def _(cls):
    return pick([Case(arrays(((3, 4), U()), ((3, 4), AWAY()))),
                 Case(arrays(((3, 4), U()), ((4,), AWAY()))),
                 Case(arrays(((1, 4), U()), ((3, 1), AWAY())))], (0, 1))


def _gelu_cases(cls):
    return pick([Case(arrays(((3, 4), U(-2, 2))), {"approximate": a})
                 for a in ("none", "tanh")] + unary_cases(U(-2, 2), fast=()), (0, 1))


spec(ew.Gelu)(_gelu_cases)


SPECS[ew._MinMax] = Abstract("base of Maximum and Minimum")


@spec(ew.Maximum, ew.Minimum)
def _(cls):
    ties = Case(lambda rng: (np.round(rng.uniform(-2, 2, (3, 4))), np.round(rng.uniform(-2, 2, 4))),
                checks=NO_FD, label="ties")
    return binary_cases(U(), fast=(0, 1, 3)) + [ties]


@spec(ew.MinMaxGrad)
def _(cls):
    def make(rng):
        x, y = rng.uniform(-1, 1, (3, 4)), np.round(rng.uniform(-1, 1, 4))
        x[0, 0] = y[0]  # a tie
        return (rng.standard_normal((3, 4)), np.maximum(x, y), y, x == y)

    # piecewise constant in out, y and ties, with a tie: no finite differences across it
    return [Case(make, {"greater": g, "wrt": w}, label=f"{g}-{w}", checks=NO_FD)
            for g in (True, False) for w in (0, 1)][: 4 if LONG else 2]


@spec(ew.UnaryGrad)
def _(cls):
    rows = [ew.Sin.row, ew.Log.row, ew.Sqrt.row, ew.Tanh.row, ew.Deg2rad.row]

    def make(row):
        def m(rng):
            x = rng.uniform(0.2, 0.9, (3, 4))
            return (rng.standard_normal((3, 4)), x, getattr(np, row.name)(x))

        return m

    return pick([Case(make(r), {"row": r}, label=r.name) for r in rows], (0, 2))


@spec(ew.BinaryGrad)
def _(cls):
    rows = [ew.Arctan2.row, ew.Hypot.row, ew.Logaddexp.row]

    def make(row):
        def m(rng):
            x, y = rng.uniform(0.2, 0.9, (3, 4)), rng.uniform(0.2, 0.9, 4)
            return (rng.standard_normal((3, 4)), x, y, getattr(np, row.name)(x, y))

        return m

    return pick([Case(make(r), {"row": r, "wrt": w}, label=f"{r.name}-{w}")
                 for r in rows for w in (0, 1)], (0, 3))


@spec(ew.AsType)
def _(cls):
    return [Case(arrays(((3, 4), U()), np.dtype(np.float32)), tol=(1e-6, 1e-5),
                 checks=("vmap", "jacfwd", "jacrev", "jvp_vjp", "hessian", "vmap_grad")),
            Case(arrays(((3, 4), U()), np.dtype(np.complex128)), label="to complex"),
            Case(arrays(((3, 4), U(-3, 3)), np.dtype(np.int64)), label="to int")]


@spec(ew.StopGradient)
def _(cls):
    return unary_cases(U(), fast=(0,))


# reductions
@spec(rd.Sum, rd.Prod, rd.LogSumExp, rd.Norm2, rd.Any, rd.All)
def _(cls):
    return reduction_cases()


@spec(rd.NormP)
def _(cls):
    return reduction_cases(AWAY(), extra={"p": 3.0}, fast=(0, 2))


@spec(rd.Max, rd.Min, rd.Mean)
def _(cls):
    return reduction_cases(nonempty=True)


@spec(rd.Var, rd.Std)
def _(cls):
    return reduction_cases(fast=(0, 1, 2), nonempty=True) + [
        Case(arrays(((3, 4), U())), {"axis": 1, "ddof": 1}, label="ddof")]


@spec(weak._PythonOp)
def _(cls):  # Python's arithmetic on the numbers jit traces: not differentiable, vmapped
    return [Case(arrays(((), U(0.5, 2.0)), ((), U(0.5, 2.0))), {"op": op, "out": "float"},
                 checks=("vmap",), label=op) for op in ("add", "truediv", "pow")] + [
        Case(arrays(((), U(0.5, 2.0))), {"op": "neg", "out": "float"}, checks=("vmap",),
             label="neg")]


@spec(rd.ArgMax, rd.ArgMin)
def _(cls):
    return axis_cases(fast=(0, 1, 3), nonempty=True) + [Case(arrays(((3, 4), U())), {"axis": None,
                                                                      "keepdims": True})]


@spec(rd.CumSum, rd.CumProd)
def _(cls):
    return axis_cases(AWAY(0.5, 1.5), fast=(0, 1, 3)) + [
        Case(arrays(((3, 4), AWAY(0.5, 1.5))), {"axis": 0, "reverse": True}, label="reverse")]


@spec(rd.Shift)
def _(cls):
    return axis_cases(fast=(0, 1, 3), extra={"shift": 1, "fill": 0.5}) + [
        Case(arrays(((3, 4), U())), {"axis": -1, "shift": -2, "fill": 0})]


@spec(rd.SumGrad)
def _(cls):
    grid = [((3, 4), (1,), False), ((3, 4), (0,), True), ((2, 3, 4), (0, 2), False),
            ((3, 4), (0, 1), False), ((3, 4), (), False)]

    def make(shape, axes, keepdims):
        out = rd._reduced_shape(shape, axes, keepdims)
        return arrays((out, U()))

    cases = [Case(make(s, a, k), {"shape": s, "axes": a, "keepdims": k, "scale": sc},
                  label=f"{s}-{a}-{k}") for s, a, k in grid for sc in (None, 0.5)]
    return pick(cases, (0, 3, 4))


@spec(rd.ExtremumGrad)
def _(cls):
    grid = [((3, 4), (1,), False), ((3, 4), (0,), True), ((2, 3, 4), (0, 2), False),
            ((3, 4), (0, 1), False), ((3, 3), (1,), False), ((1, 4), (0,), False)]

    def make(shape, axes, keepdims):
        def m(rng):
            x = np.round(rng.uniform(-2, 2, shape) * 2) / 2  # ties
            out = x.max(axis=axes, keepdims=keepdims)
            return (rng.standard_normal(out.shape), x, out)

        return m

    return pick([Case(make(s, a, k), {"axes": a, "keepdims": k}, label=f"{s}-{a}-{k}")
                 for s, a, k in grid], (0, 1, 2))


# movement
SPECS[mv._MovementFunction] = Abstract("base of the movement ops (error messages only)")


@spec(mv.Reshape)
def _(cls):
    grid = [((3, 4), (4, 3)), ((3, 4), (-1,)), ((2, 3, 4), (6, -1)), ((3, 0), (0, 5)),
            ((), (1, 1)), ((1, 4), (2, 2))]
    return pick([Case(arrays((s, U()), t), label=f"{s}->{t}") for s, t in grid], (0, 1, 2))


@spec(mv.Transpose)
def _(cls):
    grid = [((3, 4), (1, 0)), ((2, 3, 4), (2, 0, 1)), ((2, 3, 4), (-1, 0, -2)),
            ((3, 4), None), ((2, 3, 4), None), ((1, 0), (1, 0))]
    return pick([Case(arrays((s, U())), {"axes": a}, label=f"{s}-{a}") for s, a in grid],
                (0, 2, 3))


@spec(mv.BroadcastTo)
def _(cls):
    grid = [((4,), (3, 4)), ((3, 1), (3, 4)), ((), (2, 3)), ((1, 4), (2, 3, 4)),
            ((3, 1), (3, 0))]
    return pick([Case(arrays((s, U()), t), label=f"{s}->{t}") for s, t in grid], (0, 1, 3))


def _index_case(x_shape, template, ints_lo_hi=None, label=""):
    """A GetItem case: ``template(rng)`` builds a NumPy index (its arrays vary per example)."""
    key, _ = mv.split_index(template(np.random.default_rng(0)))

    def make(rng):
        _, arrs = mv.split_index(template(rng))
        return (rng.uniform(-1, 1, x_shape), *[np.asarray(a) for a in arrs])

    return key, make


def _ix(n, shape, rng, dup=False):
    if dup:
        return rng.integers(-n, n, shape)
    return rng.permutation(np.arange(-n, n))[: int(np.prod(shape))].reshape(shape)


def _mask(n, k, rng):
    m = np.zeros(n, bool)
    m[rng.permutation(n)[:k]] = True
    return m


INDEX_GRID = [
    ((3, 4), lambda r: (slice(1, None), slice(None, None, -2)), "basic"),
    ((3, 4), lambda r: (slice(None), _ix(4, (2,), r)), "array on axis 1"),
    ((3, 4), lambda r: (_ix(3, (2, 1), r), _ix(4, (3,), r)), "broadcast arrays"),
    ((2, 3, 4), lambda r: (_ix(2, (2,), r, True), slice(None), _ix(4, (2,), r)), "separated"),
    ((3, 4), lambda r: (_mask(3, 2, r),), "mask"),
    ((2, 3, 4), lambda r: (None, Ellipsis, 1), "none ellipsis int"),
    ((2, 3, 4), lambda r: (slice(None), _ix(3, (3,), r, True), slice(1, 3)), "dups middle"),
    ((3, 0), lambda r: (_ix(3, (2,), r),), "size 0"),
]


@spec(mv.GetItem)
def _(cls):
    cases = []
    for shape, template, label in INDEX_GRID:
        key, make = _index_case(shape, template)
        cases.append(Case(make, fn=lambda x, *a, key=key: mv.GetItem.apply(x, *a, key=key),
                          label=label))
    return pick(cases, (0, 1, 3, 4))


@spec(mv.ScatterAdd)
def _(cls):
    cases = []
    for shape, template, label in INDEX_GRID:
        key, make0 = _index_case(shape, template)

        def make(rng, make0=make0, key=key, shape=shape):
            x, *arrs = make0(rng)
            g = mv.GetItem.apply(tg.Tensor(x), *[tg.Tensor(a) for a in arrs], key=key)
            return (rng.standard_normal(g.shape), *arrs)

        cases.append(Case(make, fn=lambda g, *a, key=key, shape=shape: mv.ScatterAdd.apply(
            g, *a, shape=shape, key=key), label=label))
    return pick(cases, (1, 3, 6))


def _scatter_cases(apply, fast=(1, 3, 6), v_sample=UNIT, x_sample=UNIT):
    cases = []
    for shape, template, label in INDEX_GRID:
        key, make0 = _index_case(shape, template)

        def make(rng, make0=make0, key=key):
            x, *arrs = make0(rng)
            g = mv.GetItem.apply(tg.Tensor(x), *[tg.Tensor(a) for a in arrs], key=key)
            return (x_sample(rng, x.shape), v_sample(rng, g.shape), *arrs)

        cases.append(Case(make, fn=lambda x, v, *a, key=key: apply(x, v, *a, key=key),
                          label=label))
    return pick(cases, fast)


@spec(mv.ScatterAddInto)
def _(cls):
    return _scatter_cases(mv.ScatterAddInto.apply)


@spec(mv.ScatterSet)
def _(cls):
    return _scatter_cases(mv.ScatterSet.apply)


@spec(mv.ScatterMul)
def _(cls):
    return _scatter_cases(mv.ScatterMul.apply, v_sample=AWAY(0.5, 1.5))


@spec(mv.ScatterMinMax)
def _(cls):
    return [case for op in ("max", "min") for case in _scatter_cases(
        lambda x, v, *a, key, op=op: mv.ScatterMinMax.apply(x, v, *a, key=key, op=op),
        fast=(1, 6))]


@spec(mv.DuplicatePairs)
def _(cls):
    return [Case(arrays(((6,), INT(0, 3))), label="ties"),
            Case(arrays(((5,), INT(0, 100))), label="distinct"),
            Case(arrays(((1,), INT(0, 3))), label="one")]


@spec(mv.Concatenate)
def _(cls):
    grid = [(((3, 4), (3, 2)), 1), (((3, 4), (1, 4), (2, 4)), -2), (((2, 3, 4), (2, 1, 4)), -2),
            (((3,), (4,)), 0), (((3, 0), (3, 2)), -1)]
    return pick([Case(arrays(*[(s, U()) for s in shapes]), {"axis": ax}, label=f"{shapes}-{ax}")
                 for shapes, ax in grid], (0, 1, 2))


@spec(mv.Split)
def _(cls):
    grid = [((3, 5), (1, 3), 1), ((4, 3), (2,), -2), ((2, 3, 4), (1, 1, 3), -1),
            ((3, 5), (3, 1), 1), ((4,), (0, 4), 0), ((3, 2), (), 0)]
    return pick([Case(arrays((s, U()), idx), {"axis": ax}, label=f"{s}-{idx}-{ax}")
                 for s, idx, ax in grid], (0, 1, 3, 5))


@spec(mv.Flip)
def _(cls):
    grid = [((3, 4), (1,)), ((3, 4), (-1, 0)), ((2, 3, 4), (0, -2)), ((3, 0), (0,)), ((), ())]
    return pick([Case(arrays((s, U())), {"axis": a}, label=f"{s}-{a}") for s, a in grid],
                (0, 1, 2))


@spec(mv.Roll)
def _(cls):
    grid = [((3, 4), (1,), (1,)), ((3, 4), (-2, 1), (-1, 0)), ((2, 3, 4), 5, None),
            ((3, 4), (1,), (-2,)), ((3, 0), (1,), (0,))]
    return pick([Case(arrays((s, U())), {"shift": sh, "axis": a}, label=f"{s}-{sh}-{a}")
                 for s, sh, a in grid], (0, 1, 2))


@spec(mv.Pad)
def _(cls):
    cases = [Case(arrays(((3, 4), U())), {"pad_width": ((1, 2), (0, 1)), "mode": m,
                                          **({"constant_values": 0.5} if m == "constant"
                                             else {})}, label=m)
             for m in ("constant", "edge", "reflect", "symmetric", "wrap")]
    cases.append(Case(arrays(((4,), U())), {"pad_width": ((5, 6),), "mode": "reflect"},
                      label="long reflect"))
    return pick(cases, (0, 2, 4))


@spec(mv.SlidingWindow)
def _(cls):
    grid = [((3, 5), (2,), (1,), (1, 1)), ((3, 5), (2, 3), (0, 1), (1, 1)),
            ((2, 3, 5), (3,), (-1,), (1, 1, 1)), ((3, 5), (2,), (1,), (1, 2)),
            ((6,), (2, 2), (0, 0), (1,))]
    return pick([Case(arrays((s, U())), {"window_shape": w, "axis": a, "step": step},
                      label=f"{s}-{w}-{a}-{step}") for s, w, a, step in grid], (0, 1, 2))


@spec(mv.WindowScatterAdd)
def _(cls):
    grid = [((3, 5), (2,), (1,), (1, 1)), ((3, 5), (2, 3), (0, 1), (1, 1)),
            ((2, 3, 5), (3,), (-1,), (1, 1, 1)), ((3, 5), (2,), (1,), (1, 2))]
    cases = []
    for s, w, a, step in grid:
        out = mv.SlidingWindow.apply(tg.Tensor(np.zeros(s)), window_shape=w, axis=a,
                                     step=step).shape
        cases.append(Case(arrays((out, U())), {"in_shape": s, "window_shape": w, "axis": a,
                                               "step": step}, label=f"{s}-{w}-{a}-{step}"))
    return pick(cases, (0, 1, 2))


@spec(mv.ToDevice)
def _(cls):
    return [Case(arrays(((3, 4), U()), "cpu"))]


# linalg
from tapegrad.ops import linalg as la  # noqa: E402


def SQ(n=3, batch=()):
    """Well-conditioned square matrices."""
    return lambda rng, shape: rng.standard_normal(batch + (n, n)) + 3 * np.eye(n)


def SPD(n=3, batch=()):
    def sample(rng, shape):
        m = rng.standard_normal(batch + (n, n))
        return m @ np.swapaxes(m, -1, -2) + n * np.eye(n)

    return sample


def NONSYM_PD(n=3, batch=()):
    """Not symmetric, with a positive-definite symmetric part."""
    return lambda rng, shape: 0.3 * rng.standard_normal(batch + (n, n)) + 2 * np.eye(n)


@spec(la.MatMul)
def _(cls):
    grid = [((3, 4), (4, 2), {}), ((3, 4), (4,), {}), ((4,), (4, 2), {}), ((4,), (4,), {}),
            ((2, 3, 4), (4, 3), {}), ((3, 4), (2, 4, 3), {}),
            ((4, 3), (4, 2), {"transpose_a": True}), ((3, 4), (2, 4), {"transpose_b": True}),
            ((3, 0), (0, 2), {})]
    return pick([Case(arrays((a, U()), (b, U())), p, label=f"{a}@{b}{p}") for a, b, p in grid],
                (0, 1, 3, 6))


@spec(la.Einsum)
def _(cls):
    grid = [("ij,jk->ik", ((3, 4), (4, 2))), ("ii->i", ((3, 3),)), ("ij->", ((3, 4),)),
            ("bij,bjk->bik", ((2, 3, 4), (2, 4, 2))), ("i,j->ij", ((3,), (4,))),
            ("...ij,j->...i", ((2, 3, 4), (4,))), ("ij,ij->j", ((3, 4), (3, 4)))]
    return pick([Case(arrays(*[(s, U()) for s in shapes]), {"subscripts": sub}, label=sub)
                 for sub, shapes in grid], (0, 1, 3, 5))


@spec(la.Inv, la.Det, la.SlogDet)
def _(cls):
    return pick([Case(arrays((None, SQ(3))), label="3x3"),
                 Case(arrays((None, SQ(3, (2,)))), label="batch"),
                 Case(arrays((None, SQ(1))), label="1x1"),
                 Case(lambda rng: (-SQ(3)(rng, None),), label="negative det")], (0, 1, 3))


@spec(la.Solve)
def _(cls):
    return pick([Case(arrays((None, SQ(3)), ((3,), U())), label="vector"),
                 Case(arrays((None, SQ(3)), ((3, 2), U())), label="matrix"),
                 Case(arrays((None, SQ(3, (2,))), ((2, 3, 2), U())), label="batch"),
                 Case(arrays((None, SQ(3)), ((2, 3, 2), U())), label="broadcast b")], (0, 1, 3))


@spec(la.Cholesky)
def _(cls):
    return pick([Case(arrays((None, SPD(3))), {"upper": up}, label=f"spd upper={up}")
                 for up in (False, True)] +
                [Case(arrays((None, NONSYM_PD(3))), {"upper": up}, label=f"nonsym upper={up}")
                 for up in (False, True)] +
                [Case(lambda rng: (SPD(3)(rng, None) + 1j * _antisym(rng, 3),),
                      label="complex hermitian")], (0, 3, 4))


def _antisym(rng, n):
    m = 0.3 * rng.standard_normal((n, n))
    return m - m.T


def _gauge_free(v):
    """Sign- and phase-free functions of eigen/singular vectors (the columns): ``|v|**2``."""
    return tnp.real(v * tnp.conj(v))


@spec(la.Svd)
def _(cls):
    def fn(a, full_matrices=False):
        u, s, vh = la.Svd.apply(a, full_matrices=full_matrices)
        k = s.shape[-1]
        outer = u[..., :, :1] * vh[..., :1, :]  # u_1 v_1^H: free of the phase
        return s, _gauge_free(u[..., :, :k]), _gauge_free(vh[..., :k, :]), outer

    grid = [((3, 4), False), ((4, 3), False), ((3, 3), False), ((2, 3, 4), False),
            ((4, 3), True)]
    cases = [Case(arrays((s, U())), {"full_matrices": f}, fn=fn, label=f"{s}-{f}")
             for s, f in grid]
    cases.append(Case(lambda rng: (U()(rng, (3, 3)) + 1j * U()(rng, (3, 3)),), fn=fn,
                      label="complex"))
    return pick(cases, (0, 1, 5))


@spec(la.Eigh)
def _(cls):
    def fn(a, UPLO="L"):  # noqa: N803
        w, v = la.Eigh.apply(a, UPLO=UPLO)
        return w, _gauge_free(v), v[..., :, :1] * tnp.conj(v[..., :, :1]).swapaxes(-1, -2)

    cases = [Case(arrays((None, SPD(3))), {"UPLO": u}, fn=fn, label=f"sym {u}") for u in "LU"]
    cases += [Case(arrays(((3, 3), U())), {"UPLO": u}, fn=fn, label=f"nonsym {u}") for u in "LU"]
    cases.append(Case(lambda rng: (U()(rng, (3, 3)) + 1j * U()(rng, (3, 3)),), fn=fn,
                      label="complex nonsym"))
    cases.append(Case(arrays((None, SPD(3, (2,)))), fn=fn, label="batch"))
    return pick(cases, (0, 2, 3, 4))


@spec(la.Eig)
def _(cls):
    def fn(a):
        w, v = la.Eig.apply(a)
        return w, _gauge_free(v)

    return pick([Case(arrays(((3, 3), U())), fn=fn, label="real"),
                 Case(lambda rng: (U()(rng, (3, 3)) + 1j * U()(rng, (3, 3)),), fn=fn,
                      label="complex"),
                 Case(arrays(((2, 3, 3), U())), fn=fn, label="batch")], (0, 1))


@spec(la.Qr)
def _(cls):
    grid = [((4, 3), "reduced"), ((3, 4), "reduced"), ((3, 3), "complete"), ((4, 3), "r"),
            ((2, 4, 3), "reduced")]
    return pick([Case(arrays((s, U())), {"mode": m}, label=f"{s}-{m}",
                      raises=ValueError if m == "r" else None) for s, m in grid], (0, 1, 2, 3))


@spec(la.Pinv)
def _(cls):
    return pick([Case(arrays((s, U())), label=str(s)) for s in ((3, 4), (4, 3), (3, 3),
                                                                (2, 3, 4))], (0, 1))


# fft
from tapegrad.ops import fft as ff  # noqa: E402


def _cplx(shape):
    return lambda rng: (rng.uniform(-1, 1, shape) + 1j * rng.uniform(-1, 1, shape),)


@spec(ff.Fft)
def _(cls):
    grid = [((3, 4), (1,), "backward", False), ((3, 4), (-1, 0), "ortho", True),
            ((2, 3, 4), (0, -1), "forward", False), ((4,), (0,), "backward", True)]
    return pick([Case(_cplx(s), {"axes": a, "norm": n, "inverse": i}, label=f"{s}-{a}-{n}-{i}")
                 for s, a, n, i in grid] +
                [Case(arrays(((3, 4), U())), {"axes": (1,)}, label="real input")], (0, 1, 4))


@spec(ff.Rfft)
def _(cls):
    grid = [((3, 4), 1, "backward"), ((3, 5), -1, "ortho"), ((2, 3, 4), 0, "forward"),
            ((3, 4), -2, "backward")]
    return pick([Case(arrays((s, U())), {"axis": a, "norm": n}, label=f"{s}-{a}-{n}")
                 for s, a, n in grid], (0, 1, 3))


@spec(ff.Irfft)
def _(cls):
    grid = [((3, 3), 1, 4, "backward"), ((3, 3), -1, 5, "ortho"), ((3, 3, 4), 0, 4, "forward"),
            ((3, 4), -2, 4, "backward")]
    return pick([Case(_cplx(s), {"axis": a, "n": n, "norm": nm}, label=f"{s}-{a}-{n}-{nm}")
                 for s, a, n, nm in grid], (0, 1, 3))


# sorting and index ops
from tapegrad.ops import sorting as so  # noqa: E402
from tapegrad.ops import statistics as stt  # noqa: E402

SPECS[so._IndexFunction] = Abstract("base of the integer-valued ops")
SPECS[stt._NanArg] = Abstract("base of NanArgMax and NanArgMin")


@spec(so.ArgSort)
def _(cls):
    return axis_cases(fast=(0, 1, 3)) + [Case(arrays(((3, 4), U())), {"axis": -1,
                                                                      "kind": "stable"})]


@spec(so.ArgPartition)
def _(cls):
    return pick([Case(arrays((s, U())), {"kth": k, "axis": a}, label=f"{s}-{k}-{a}")
                 for s, k, a in [((3, 4), 1, -1), ((3, 4), 2, 0), ((2, 3, 4), 0, -2),
                                 ((3, 4), -1, 1)]], (0, 1, 2))


@spec(so.LexSort)
def _(cls):
    return pick([Case(arrays(((3, 4), INT(0, 3)), ((3, 4), U())), {"axis": a}, label=str(a))
                 for a in (-1, 0, 1)], (0, 1))


@spec(so.SearchSorted)
def _(cls):
    def sorted_(n):
        return lambda rng, shape: np.sort(rng.uniform(-1, 1, n))

    return pick([Case(arrays((None, sorted_(5)), ((3, 4), U())), {"side": s}, label=s)
                 for s in ("left", "right")] +
                [Case(arrays((None, sorted_(5)), ((), U())), label="scalar v")], (0, 1))


@spec(so.NonZero)
def _(cls):
    def fixed_count(shape, k):
        def make(rng):
            m = np.zeros(int(np.prod(shape)))
            m[rng.permutation(m.size)[:k]] = rng.uniform(0.5, 1, k)
            return (m.reshape(shape),)

        return make

    return [Case(fixed_count((3, 4), 5), label="same count"),
            Case(fixed_count((6,), 2), label="1-d"),
            Case(arrays(((3, 4), INT(0, 2))), label="varying count")]


@spec(so.Unique)
def _(cls):
    def perm_of(values):
        return lambda rng: (rng.permutation(np.asarray(values, float)),)

    return [Case(perm_of([1, 2, 2, 3, 3, 3]), label="same values"),
            Case(arrays(((6,), INT(0, 3))), label="varying")]


@spec(so.IsIn)
def _(cls):
    return pick([Case(arrays(((3, 4), INT(0, 5)), ((3,), INT(0, 5))), {"invert": i},
                      label=f"invert={i}") for i in (False, True)], (0, 1))


@spec(so.Bincount)
def _(cls):
    return pick([Case(arrays(((6,), INT(0, 4)), ((6,), U())), {"minlength": 5}, label="weights"),
                 Case(arrays(((6,), INT(0, 4)), None), {"minlength": 5}, label="counts"),
                 Case(arrays(((0,), INT(0, 4)), ((0,), U())), {"minlength": 3}, label="empty")],
                (0, 1))


@spec(stt.NanArgMax, stt.NanArgMin)
def _(cls):
    def with_nan(shape):
        def make(rng):
            x = rng.uniform(-1, 1, shape)
            x[0, 0] = np.nan
            return (x,)

        return make

    return axis_cases(fast=(0, 1), nonempty=True) + [Case(with_nan((3, 4)), {"axis": 1},
                                                          label="nan")]


@spec(stt.Roots)
def _(cls):
    def real_roots(n):
        def make(rng):
            r = np.sort(rng.uniform(-2, 2, n)) + np.arange(n)  # distinct
            return (np.poly(r) * rng.uniform(0.5, 2),)

        return make

    return [Case(real_roots(3), fn=lambda p: tnp.sort(tnp.real(stt.Roots.apply(p))),
                 checks=FIRST_ORDER, label="distinct real roots")]


# vmap's own stack
_vmap_mod = importlib.import_module("tapegrad.transforms.vmap")


@spec(_vmap_mod._Stack)
def _(cls):
    return pick([Case(arrays(((3, 4), U()), ((3, 4), U()), ((3, 4), U())), label="three"),
                 Case(arrays(((), U()), ((), U())), label="0-d"),
                 Case(arrays(((3, 0), U()), ((3, 0), U())), label="size 0")], (0, 1))


# random numbers: functions of the key's bits (no derivative); vmap must draw each example's
trandom = importlib.import_module("tapegrad.random")
_rkeys = importlib.import_module("tapegrad.random._keys")
_rgamma = importlib.import_module("tapegrad.random._gamma")
_rsamplers = importlib.import_module("tapegrad.random._samplers")


def _keys(rng):
    return (trandom.key(int(rng.integers(0, 2**31))).numpy(),)


@spec(_rkeys._Split)
def _(cls):
    return [Case(_keys, fn=lambda k: _rkeys._Split.apply(k, 3), label="num=3")]


@spec(_rkeys._FoldIn)
def _(cls):
    return [Case(lambda rng: (*_keys(rng), np.int64(rng.integers(0, 100))),
                 fn=lambda k, d: _rkeys._FoldIn.apply(k, d), label="data")]


@spec(_rkeys._Draw)
def _(cls):
    return [Case(_keys, fn=lambda k, kind=kind, a=a, b=b: _rkeys._Draw.apply(
        k, kind, (3, 2), np.dtype(np.float64 if kind != "randint" else np.int64), a, b),
        label=kind) for kind, a, b in (("uniform", 0.0, 1.0), ("normal", 0.0, 1.0),
                                       ("randint", 0, 5))]


@spec(_rsamplers._Poisson)
def _(cls):
    return [Case(lambda rng: (*_keys(rng), rng.uniform(0.5, 20.0, (3,))),
                 fn=lambda k, lam: _rsamplers._Poisson.apply(k, lam, (2, 3), np.dtype(np.int64)),
                 label="rates")]


@spec(_rgamma.LogGammaincInv)
def _(cls):
    return pick([Case(arrays(((3, 4), U(0.5, 3.0)), ((3, 4), U(0.1, 0.9))), label="same"),
                 Case(arrays(((4,), U(0.5, 3.0)), ((3, 4), U(0.1, 0.9))), label="broadcast"),
                 Case(arrays(((), U(0.5, 3.0)), ((2,), U(0.1, 0.9))), label="0-d a")],
                (0, 1))


# nn.functional primitives
from tapegrad.nn import _losses as _closs  # noqa: E402
from tapegrad.nn import functional as F  # noqa: E402
from tapegrad.ops import nn as nn_ops  # noqa: E402  (their home)

SPECS[nn_ops._Loss] = Abstract("base of the fused losses")


@spec(F.Softmax, F.LogSoftmax)
def _(cls):
    return axis_cases(fast=(0, 1, 3))


spec(F.Gelu)(_gelu_cases)


@spec(F.MeanSquaredLoss, F.BinaryCrossEntropyWithLogits, F.HingeLoss)
def _(cls):
    y = U(-1, 1) if cls is not F.HingeLoss else (lambda rng, s: rng.choice([-1.0, 1.0], s))
    return pick([Case(arrays(((3, 4), U()), ((3, 4), y)), {"reduction": r}, label=r)
                 for r in ("mean", "sum", "none")] +
                [Case(arrays(((4,), U()), ((), y)), {"reduction": "mean"}, label="scalar target")],
                (0, 2, 3))


@spec(F.BinaryCrossEntropy)
def _(cls):
    return pick([Case(arrays(((3, 4), U(0.1, 0.9)), ((3, 4), U(0, 1))), {"reduction": r},
                      label=r) for r in ("mean", "sum", "none")], (0, 2))


def _xent_cases():
    grid = [((3, 4), (3,), {}), ((3, 4), (3,), {"reduction": "sum", "label_smoothing": 0.1}),
            ((3, 4), (3,), {"reduction": "none"}), ((2, 3, 4), (2, 3), {"ignore_index": 1}),
            ((4,), (), {})]
    return grid


@spec(F.CrossEntropy)
def _(cls):
    return pick([Case(arrays((ls, U(-2, 2)), (ts, INT(0, 4))), p, label=f"{ls}{p}")
                 for ls, ts, p in _xent_cases()], (0, 1, 3))


@spec(F.CrossEntropyGrad)
def _(cls):
    cases = []
    for ls, ts, p in _xent_cases():
        gshape = ts if p.get("reduction") == "none" else ()
        cases.append(Case(arrays((ls, U(-2, 2)), (ts, INT(0, 4)), (gshape, U())), p,
                          label=f"{ls}{p}"))
    return pick(cases, (0, 2, 3))


@spec(F.Linear)
def _(cls):
    return pick([Case(arrays(((3, 4), U()), ((4, 2), U()), ((2,), U())), label="bias"),
                 Case(arrays(((2, 3, 4), U()), ((4, 2), U()), ((2,), U())), label="3-d"),
                 Case(arrays(((3, 4), U()), ((4, 2), U()), None), label="no bias",
                      raises=ValueError),
                 Case(arrays(((4,), U()), ((4, 2), U()), ((2,), U())), label="vector",
                      raises=ValueError)], (0, 2, 3))


CONV_GRID = [
    dict(),
    dict(stride=(2, 1), padding=(1, 0, 0, 1)),
    dict(dilation=(1, 2), groups=2),
    # one and three spatial axes (conv1d/conv3d and the transposed convolutions)
    dict(stride=(2,), padding=(1, 0), dilation=(2,)),
    dict(stride=(1, 2, 1), padding=(0, 1, 1, 0, 0, 0), dilation=(1, 1, 2), groups=2),
]


def _conv_shapes(p):
    groups = p.get("groups", 1)
    nd = len(p.get("stride", (1, 1)))
    spatial = {1: (7,), 2: (5, 6), 3: (3, 4, 5)}[nd]
    kernel = {1: (3,), 2: (2, 3), 3: (2, 2, 2)}[nd]
    return (2, 2 * groups) + spatial, (2 * groups, 2) + kernel


@spec(F.Conv2d)
def _(cls):
    cases = []
    for p in CONV_GRID:
        xs, ws = _conv_shapes(p)
        cases.append(Case(arrays((xs, U()), (ws, U()), ((ws[0],), U())), p, label=str(p),
                          checks=FIRST_ORDER))
    return pick(cases, (0, 1, 2, 3, 4))


def _conv_out(xs, ws, p):
    return F.Conv2d.apply(tg.Tensor(np.zeros(xs)), tg.Tensor(np.zeros(ws)), **p).shape


@spec(F.Conv2dInputGrad)
def _(cls):
    cases = []
    for p in CONV_GRID:
        xs, ws = _conv_shapes(p)
        cases.append(Case(arrays((_conv_out(xs, ws, p), U()), (ws, U())),
                          {"in_hw": xs[2:], **p}, label=str(p), checks=FIRST_ORDER))
    return pick(cases, (0, 1, 2, 3, 4))


@spec(F.Conv2dWeightGrad)
def _(cls):
    cases = []
    for p in CONV_GRID:
        xs, ws = _conv_shapes(p)
        cases.append(Case(arrays((xs, U()), (_conv_out(xs, ws, p), U())),
                          {"kernel": ws[2:], **p}, label=str(p), checks=FIRST_ORDER))
    return pick(cases, (0, 1, 2, 3, 4))


POOL_GRID = [dict(kernel=(2, 2), stride=(2, 2)),
             dict(kernel=(3, 2), stride=(1, 2), padding=(1, 1, 0, 1)),
             # one and three spatial axes, dilation, ceil_mode's longer end padding
             dict(kernel=(3,), stride=(2,), padding=(1, 2), dilation=(2,)),
             dict(kernel=(2, 3, 2), stride=(1, 2, 2), padding=(0, 1, 1, 1, 0, 0),
                  dilation=(2, 1, 1))]


def _pool_shape(p):
    return {1: (2, 3, 7), 2: (2, 3, 5, 4), 3: (2, 2, 4, 4, 3)}[len(p["kernel"])]


@spec(F.MaxPool2d)
def _(cls):
    return [Case(arrays((_pool_shape(p), U())), p, label=str(p)) for p in POOL_GRID]


def _pool_args(p):
    def make(rng):
        x = rng.uniform(-1, 1, _pool_shape(p))
        out = F.MaxPool2d.apply(tg.Tensor(x), **p).numpy()
        return (rng.standard_normal(out.shape), x, out)

    return make


@spec(F.MaxPool2dGrad)
def _(cls):
    return [Case(_pool_args(p), p, label=str(p)) for p in POOL_GRID]


@spec(F.MaxPool2dGather)
def _(cls):
    def make(p):
        def m(rng):
            g, x, out = _pool_args(p)(rng)
            return (rng.standard_normal(x.shape), x, out)

        return m

    return [Case(make(p), p, label=str(p)) for p in POOL_GRID]


@spec(nn_ops._TakeRows)
def _(cls):
    return [Case(arrays(((5, 3), U()), ((2, 3), INT(-5, 5))), label="2-d index"),
            Case(arrays(((5,), U()), ((4,), INT(0, 5))), label="1-d table")]


@spec(nn_ops._ScatterRows)
def _(cls):
    return [Case(arrays(((2, 3, 4), U()), ((2, 3), INT(-5, 5))), {"rows": 5}, label="2-d"),
            Case(arrays(((4,), U()), ((4,), INT(0, 5))), {"rows": 5}, label="1-d")]


@spec(F.ScaledDotProductAttention)
def _(cls):
    return pick([
        Case(arrays(((3, 4), U()), ((5, 4), U()), ((5, 2), U()), None, None), {"scale": 0.5},
             label="plain"),
        Case(arrays(((2, 3, 4), U()), ((2, 5, 4), U()), ((2, 5, 2), U()), ((3, 5), U()),
                    ((2, 3, 5), U(0, 2))), label="bias and drop"),
        Case(arrays(((3, 4), U()), ((2, 5, 4), U()), ((5, 2), U()), ((5,), U()), None),
             label="broadcast"),
    ], (0, 1, 2))


def _ctc_args(n_frames=(4, 6), blanks_first=False):
    """``make`` for :class:`CTCLoss`: log-probabilities ``(T=6, N=2, C=3)``, padded targets
    ``(2, 2)`` with labels in ``[1, 3)``, lengths drawn so that every alignment exists
    (``n_frames``: the range of input lengths; a short one may leave a target unalignable)."""

    def make(rng):
        tl = rng.integers(0, 3, 2)
        tl[0] = 2
        il = rng.integers(n_frames[0], n_frames[1] + 1, 2)
        return (rng.standard_normal((6, 2, 3)), rng.integers(1, 3, (2, 2)), il, tl)

    return make


@spec(_closs.CTCLoss)
def _(cls):
    return pick([
        Case(_ctc_args(), {"blank": 0}, label="feasible"),
        Case(_ctc_args((1, 6)), {"blank": 0, "zero_infinity": True}, label="zero_infinity"),
    ], (0, 1))


# checkpoint, custom rules, ODE integration: through their public entry points
ck = importlib.import_module("tapegrad.transforms.checkpoint")
cu = importlib.import_module("tapegrad.transforms.custom_vjp")


def _body(x, y):
    return tnp.sin(x) * y + tnp.sum(x * x, axis=-1, keepdims=True)


@spec(ck.Checkpoint)
def _(cls):
    return [Case(arrays(((3, 4), U()), ((4,), U())), fn=tg.checkpoint(_body), label="body")]


@spec(ck.PolicyCheckpoint)
def _(cls):
    return [Case(arrays(((3, 4), U()), ((4,), U())), fn=tg.checkpoint(_body, save_only={"sin"}),
                 label="save sin"),
            Case(arrays(((3, 4), U()), ((4,), U())), fn=tg.checkpoint(_body, budget_bytes=64),
                 label="budget")]


# structured control flow: through tg.scan, tg.while_loop and tg.switch
cf = importlib.import_module("tapegrad.transforms.control")


def _scan_fn(x, y):
    def step(c, row):
        c = tnp.tanh(c * y + row)
        return c, c * row

    c, ys = tg.scan(step, x[0], x)
    return tnp.sum(ys, axis=0) + c


def _while_fn(x, y):
    def body(c):
        return c[0] * y + tnp.sin(c[0]), c[1] + 1

    return tg.while_loop(lambda c: c[1] < 3, body, (x, tg.Tensor(0)))[0]


def _switch_fn(x, y):
    return tg.switch(1, [lambda a, b: a * b, lambda a, b: tnp.sin(a) * b + a * a], x, y)


@spec(cf.Scan)
def _(cls):
    return [Case(arrays(((3, 4), U()), ((4,), U())), fn=_scan_fn, label="rnn")]


@spec(cf.While)
def _(cls):
    return [Case(arrays(((3, 4), U()), ((4,), U())), fn=_while_fn, label="three steps")]


def _revolve_fn(x, y):
    """The gradient of a scan reversed from at most two stored carries (the Revolve step)."""
    def loss(w):
        def step(c, row):
            c = tnp.tanh(c * w + row)
            return c, c * row

        c, ys = tg.scan(step, x[0], x, checkpoint=2)
        return tnp.sum(ys) + tnp.sum(c)

    return tg.grad(loss)(y)


@spec(cf.Revolve)
def _(cls):
    return [Case(arrays(((5, 4), U()), ((4,), U())), fn=_revolve_fn, label="5 steps, 2 carries")]


@spec(cf.Switch)
def _(cls):
    return [Case(arrays(((3, 4), U()), ((4,), U())), fn=_switch_fn, label="branch 1")]


@cu.custom_vjp
def _clip_gradient(x, y):
    return tnp.tanh(x) * y


def _clip_fwd(x, y):
    return _clip_gradient(x, y), (x, y)


def _clip_bwd(res, g):
    x, y = res
    t = tnp.tanh(x)
    return g * (1 - t * t) * y, tnp.sum(g * t, axis=0)


_clip_gradient.defvjp(_clip_fwd, _clip_bwd)


@spec(cu._CustomVJPFunction)
def _(cls):
    return [Case(arrays(((3, 4), U()), ((4,), U())), fn=_clip_gradient, label="tanh * y",
                 checks=("vmap", "jacrev", "vmap_grad", "fd"))]


class _OnceCube(Function):
    """x**3 with a backward that computes on NumPy arrays: once differentiable."""

    batch = importlib.import_module("tapegrad.ops._batching").elementwise

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x * x

    @staticmethod
    @cu.once_differentiable
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3.0 * x.numpy() ** 2


@spec(cu.OnceDifferentiableBackward)
def _(cls):
    # the rule as one primitive appears where a transform records the backward: vmap of grad
    return [Case(arrays(((3, 4), U()),), fn=lambda x: tg.grad(
        lambda v: tnp.sum(_OnceCube.apply(v)))(x), checks=("vmap",), label="cube")]


from tapegrad.transforms import custom_jvp as cj  # noqa: E402
from tapegrad.transforms import debug as dbg  # noqa: E402
from tapegrad.transforms import implicit as im  # noqa: E402


@cj.custom_jvp
def _softplus_times(x, y):
    return tnp.log1p(tnp.exp(x)) * y


@_softplus_times.defjvp
def _softplus_times_jvp(primals, tangents):
    (x, y), (xt, yt) = primals, tangents
    return _softplus_times(x, y), xt * y / (1.0 + tnp.exp(-x)) + tnp.log1p(tnp.exp(x)) * yt


@spec(cj.RuleFunction)
def _(cls):  # the primitive of a custom_jvp function (made per function, at run time)
    return [Case(arrays(((3, 4), U()), ((4,), U())), fn=_softplus_times, label="softplus * y")]


def _newton(f, x):
    for _ in range(40):
        x = x - f(x) / tg.grad(lambda v: tnp.sum(f(v)))(x)
    return x


def _cubic_roots(theta):  # x^3 + theta x - 1 = 0, elementwise
    return tg.custom_root(lambda x: x**3 + theta * x - 1.0, tnp.ones_like(theta), _newton,
                          lambda g, y: y / g(tnp.ones_like(y)))


@spec(im.CustomRoot)
def _(cls):
    return [Case(arrays(((3,), U(0.5, 2.0)),), fn=_cubic_roots, label="newton")]


def _dense(matvec, b):
    return tnp.linalg.solve(tg.jacfwd(matvec)(b), b)


def _solve_with(a, b):
    return tg.custom_linear_solve(lambda v: a @ v, b, _dense, _dense)


@spec(im.CustomLinearSolve)
def _(cls):
    def make(rng):
        return (rng.uniform(-1, 1, (3, 3)) + 3 * np.eye(3), rng.uniform(-1, 1, (3,)))

    return [Case(make, fn=_solve_with, label="dense")]


def _printed_twice(x):
    dbg.callback(lambda v: None, x)
    return x * 2.0


@spec(dbg.DebugCallback)
def _(cls):  # no outputs: what it is checked for is leaving the computation unchanged
    return [Case(arrays(((3,), U()),), fn=_printed_twice, label="identity computation")]


# scipy (the host-computed linear algebra is slow: 2 x 2 matrices in the fast profile)
N = 3 if LONG else 2
from tapegrad.scipy import _base as sb  # noqa: E402
from tapegrad.scipy import integrate as si  # noqa: E402
from tapegrad.scipy import linalg as sl  # noqa: E402
from tapegrad.scipy import signal as ss  # noqa: E402
from tapegrad.scipy import special as sp  # noqa: E402
from tapegrad.scipy.stats import _util as su  # noqa: E402

SPECS[sb.Elementwise] = Abstract("base of the scipy.special primitives")
SPECS[sl._MatrixFunction] = Abstract("base of expm, logm and sqrtm")

#: Domains of the scipy.special primitives, one sampler per argument; ``None`` marks an
#: argument that is not differentiated (an order), with its sampler after it.
SPECIAL_DOMAINS: dict = {
    sp.Gamma: (U(0.5, 3),), sp.Gammaln: (U(0.5, 3),), sp.Digamma: (U(0.5, 3),),
    sp.Polygamma: (INT(0, 3), U(0.5, 3)), sp.Rgamma: (U(0.5, 3),),
    sp.Multigammaln: (U(2.0, 4.0),),
    sp.Beta: (U(0.5, 3), U(0.5, 3)), sp.Betaln: (U(0.5, 3), U(0.5, 3)),
    sp.BetaincPartial: (U(0.5, 3), U(0.5, 3), U(0.1, 0.9)),
    sp.Betainc: (U(0.5, 3), U(0.5, 3), U(0.1, 0.9)),
    sp.GammaincPartial: (U(0.5, 3), U(0.1, 3)),
    sp.Gammainc: (U(0.5, 3), U(0.1, 3)), sp.Gammaincc: (U(0.5, 3), U(0.1, 3)),
    sp.Erfinv: (U(-0.9, 0.9),), sp.Erfcinv: (U(0.1, 1.9),), sp.Logit: (U(0.1, 0.9),),
    sp.Ndtr: (U(-2, 2),), sp.LogNdtr: (U(-2, 2),), sp.Ndtri: (U(0.1, 0.9),),
    sp.Xlogy: (U(-2, 2), U(0.2, 3)), sp.Xlog1py: (U(-2, 2), U(-0.8, 3)),
    sp.Entr: (U(0.1, 2),),
    sp.I0: (U(-2, 2),), sp.I0e: (AWAY(0.2, 2),), sp.I1: (U(-2, 2),), sp.I1e: (AWAY(0.2, 2),),
    sp.Iv: (U(0.5, 2.5), U(0.5, 2)), sp.Ive: (U(0.5, 2.5), U(0.5, 2)),
    sp.J0: (U(0.5, 3),), sp.J1: (U(0.5, 3),), sp.Jn: (INT(0, 3), U(0.5, 3)),
    sp.Y0: (U(0.5, 3),), sp.Y1: (U(0.5, 3),), sp.Yn: (INT(0, 3), U(0.5, 3)),
    sp.Gammasgn: (U(-2.5, 3),),
}
SPECIAL_PARAMS: dict = {sp.Multigammaln: {"d": 3}, sp.BetaincPartial: {"i": 1, "j": 0},
                        sp.GammaincPartial: {"k": 1}}


def _special_cases(cls):
    doms = SPECIAL_DOMAINS[cls]
    params = SPECIAL_PARAMS.get(cls, {})
    diff = tuple(i for i, d in enumerate(cls.derivs) if not isinstance(d, sb.NoDerivative))
    slow = cls in (sp.BetaincPartial, sp.Betainc, sp.GammaincPartial, sp.Gammainc,
                   sp.Gammaincc)
    shapes = [((2, 3), (3,), (2, 1)) if slow and not LONG else ((3, 4), (4,), (3, 1)),
              ((1, 4), (3, 1), ()), ((), (3,), (3,)), ((3, 0), (1,), (0,))]
    cases = []
    for sh in shapes:
        make = arrays(*[(s, d) for s, d in zip(sh, doms)])
        cases.append(Case(make, params, label=str(sh[:len(doms)]),
                          fn=_with_argnums(cls, diff, params)))
    return pick(cases, (0,) if slow else (0, 1))


def _with_argnums(cls, diff, params):
    """The primitive, with the arguments it has no derivative in marked for check_rule."""

    def fn(*a):
        return cls.apply(*a, **params)

    fn.argnums = diff
    return fn


for _c in SPECIAL_DOMAINS:
    SPECS[_c] = _special_cases


@spec(si.ODEInt)
def _(cls):
    def f(y, t, k):
        return -k * y + tnp.sin(t)

    def fn(y0, k):
        return si.odeint(f, y0, tnp.asarray([0.0, 0.3, 0.7][:N]), k, rtol=1e-10, atol=1e-10)

    return [Case(arrays(((N,), U(0.5, 1.5)), ((N,), U(0.5, 1.5))), fn=fn, label="decay",
                 checks=FIRST_ORDER, tol=(1e-6, 1e-5))]


def _triangular(lower, batch=()):
    def sample(rng, shape):
        m = rng.uniform(-1, 1, batch + (N, N)) + 3 * np.eye(N)
        return np.tril(m) if lower else np.triu(m)

    return sample


@spec(sl.SolveTriangular)
def _(cls):
    grid = [(False, 0, False, (3,)), (True, 1, False, (3, 2)), (True, 1, True, (3,)),
            (False, 0, True, (3, 2))]
    cases = [Case(arrays((None, _triangular(lo)), (bs[:1] and (N,) + bs[1:], U())),
                  {"lower": lo, "trans": tr, "unit_diagonal": ud},
                  label=f"lower={lo} trans={tr} unit={ud} {bs}")
             for lo, tr, ud, bs in grid]
    cases.append(Case(lambda rng: (_triangular(True)(rng, None) * (1 + 0.5j),
                                   U()(rng, (N,)) + 0j),
                      fn=lambda a, b: sl.solve_triangular(a, b, trans="C", lower=True),
                      label="public, trans C, complex"))
    return pick(cases, (0, 1, 2, 4))


def _band(lower, upper, m):
    """A diagonally dominant band matrix in LAPACK band storage, ``(lower + upper + 1, m)``."""

    def make(rng, shape=None):
        ab = rng.uniform(-0.5, 0.5, (lower + upper + 1, m))
        ab[upper] += 3.0  # the diagonal
        return ab

    return make


@spec(sl.SolveBanded)
def _(cls):
    grid = [(1, 1, (4,)), (0, 2, (4, 2)), (2, 0, (4,)), (1, 0, (4, 3))]
    return pick([Case(arrays((None, _band(lo, up, 4)), (bs, U())),
                      {"lower": lo, "upper": up}, label=f"l={lo} u={up} b{bs}")
                 for lo, up, bs in grid], (0, 1))


@spec(sl.CholeskyFactor)
def _(cls):
    return [Case(arrays((None, SPD(N))), {"lower": lo}, label=f"lower={lo}")
            for lo in (False, True)] + [
        Case(arrays((None, NONSYM_PD(N))), fn=lambda a: sl.cholesky(a, lower=True),
             label="public, non-symmetric")]


@spec(sl.SolveSylvester)
def _(cls):
    return [Case(arrays((None, SQ(N)), (None, SQ(N)), ((N, N), U())), label="square"),
            Case(arrays((None, SQ(2)), (None, SQ(3)), ((2, 3), U())), label="2x3")]


@spec(sl.Expm)
def _(cls):
    return [Case(arrays(((N, N), U(-0.5, 0.5))), label="square"),
            Case(arrays(((2, N, N), U(-0.5, 0.5))), label="batch")][: 2 if LONG else 1]


@spec(sl.Logm, sl.Sqrtm)
def _(cls):
    return [Case(arrays((None, SPD(N))), label="spd"),
            Case(arrays((None, NONSYM_PD(N))), label="non-symmetric")][: 2 if LONG else 1]


@spec(ss.Convolve, ss.Correlate)
def _(cls):
    grid = [((5,), (3,), "full"), ((5,), (3,), "valid"), ((3, 4), (2, 2), "same"),
            ((3,), (5,), "full")]
    return pick([Case(arrays((a, U()), (b, U())), {"mode": m}, label=f"{a}{b}{m}")
                 for a, b, m in grid], (0, 1, 2))


@spec(su.CheckValues)
def _(cls):
    def pos(v):
        return v > 0

    return [Case(arrays(((3, 4), U()), ((4,), U(0.5, 1))), fn=lambda x, y: su.CheckValues.apply(
        x, y, preds=(None, pos), messages=("", "y must be positive")), label="passes"),
        Case(arrays(((3, 4), U()), ((4,), U(-1, -0.5))), fn=lambda x, y: su.CheckValues.apply(
            x, y, preds=(None, pos), messages=("", "y must be positive")), label="raises",
            raises=ValueError)]


# -- the tests -------------------------------------------------------------------------------
def _is_module_level(cls) -> bool:
    """Defined at module level (not made at run time, such as a ``custom_vjp`` function or a
    named ``CheckValues``, which are instances of their base's rules)."""
    import sys

    return getattr(sys.modules.get(cls.__module__), cls.__name__, None) is cls


PRIMITIVES = [c for c in all_primitives() if _is_module_level(c)]


def test_every_primitive_has_a_spec():
    """A primitive added without conformance cases fails here (and never passes silently)."""
    missing = [qualname(c) for c in PRIMITIVES if c not in SPECS and not hasattr(c, "row")]
    assert not missing, ("primitives with no conformance spec in "
                         f"property_tests/test_rule_conformance.py: {missing}")
    empty = [qualname(c) for c in PRIMITIVES
             if not isinstance(SPECS.get(c), Abstract) and not _cases(c)]
    assert not empty, f"primitives whose spec gives no case: {empty}"
    abstract_leaves = [qualname(c) for c in PRIMITIVES if isinstance(SPECS.get(c), Abstract)
                       and not c.__subclasses__()]
    assert not abstract_leaves, f"marked abstract but never subclassed: {abstract_leaves}"


def _params():
    out = []
    for cls in sorted(PRIMITIVES, key=qualname):
        for i, case in enumerate(_cases(cls)):
            out.append(pytest.param(cls, case, id=f"{qualname(cls)}-{i}-{case.label}"))
    return out


@pytest.mark.parametrize("cls, case", _params())
def test_rules_agree(cls, case):
    rng = np.random.default_rng(zlib.crc32(f"{qualname(cls)}{case.label}".encode()))
    args = case.make(rng)
    examples = [args, case.make(rng)]
    fn = cls if case.fn is None else case.fn
    check_rule(fn, args, case.params if case.fn is None else {}, checks=case.checks,
               argnums=getattr(fn, "argnums", None), examples=examples, raises=case.raises,
               atol=case.tol[0], rtol=case.tol[1])


# -- drawn shapes and axes for the ops whose parameters are axes -----------------------------
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tapegrad.testing.strategies import shapes  # noqa: E402

AXIS_OPS = {  # class -> extra static parameters; each takes axis= and keepdims=
    rd.Sum: {}, rd.Mean: {}, rd.Max: {}, rd.Min: {}, rd.LogSumExp: {}, rd.Var: {"ddof": 0},
    rd.Prod: {}, rd.Norm2: {},
}


@st.composite
def axes_for(draw, ndim):
    """None, an int (positive or negative) or a tuple of distinct axes of an ndim-d array."""
    if ndim == 0 or draw(st.booleans()) and draw(st.booleans()):
        return None
    picked = draw(st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim, unique=True))
    picked = [a - ndim if draw(st.booleans()) else a for a in picked]
    return picked[0] if len(picked) == 1 and draw(st.booleans()) else tuple(picked)


@pytest.mark.parametrize("cls", list(AXIS_OPS), ids=lambda c: c.__name__)
@given(data=st.data())
def test_reductions_on_drawn_shapes_and_axes(cls, data):
    shape = data.draw(shapes(max_dims=3, max_side=4))
    axis = data.draw(axes_for(len(shape)))
    keepdims = data.draw(st.booleans())
    params = {"axis": axis, "keepdims": keepdims, **AXIS_OPS[cls]}
    rng = np.random.default_rng(len(shape))
    make = arrays((shape, U(0.5, 1.5)))
    x = make(rng)
    try:
        cls.apply(tg.Tensor(x[0]), **params)
        raises = None
    except ValueError:  # a reduction over an empty axis: vmap must raise it too
        raises = ValueError
    check_rule(cls, x, params, examples=[x, make(rng)], raises=raises,
               checks=("vmap", "jacfwd", "jacrev", "jvp_vjp", "hessian", "vmap_grad"))


# -- forward mode: only a piecewise-constant operand moves -----------------------------------
def test_a_moving_piecewise_constant_operand_alone_gives_a_zero_tangent():
    """Forward mode calls an op's rule with ``None`` (a zero tangent) for an input traced at its
    level that does not move, such as ``sign(x)`` (a differentiable input of ``MinMaxGrad``
    when the maximum of ``abs(x)`` is differentiated twice in forward mode), whenever another
    input moves; when only operands in ``nondiff_argnums`` move (the output is piecewise
    constant in them), the output's tangent is zero. Checked for every primitive with such
    operands, on its first case, with each differentiable input traced but standing still."""
    checked = []
    for cls in PRIMITIVES:
        if not getattr(cls, "nondiff_argnums", ()) or isinstance(SPECS.get(cls), Abstract):
            continue
        case = _cases(cls)[0]
        args = case.make(np.random.default_rng(0))
        moving = [i for i in cls.nondiff_argnums
                  if isinstance(args[i], np.ndarray) and args[i].dtype.kind == "f"]
        if not moving:
            continue
        fn = cls.apply if case.fn is None else case.fn
        params = case.params if case.fn is None else {}

        def f(*xs, args=args, moving=moving, fn=fn, params=params):
            still = 0.0 * tnp.sign(tnp.sum(xs[0]))  # traced here, with no tangent
            a = [(tg.Tensor(v) + still if v.dtype.kind == "f" else tg.Tensor(v))
                 if isinstance(v, np.ndarray) else v for v in args]
            for i, x in zip(moving, xs):
                a[i] = x
            out = fn(*a, **params)
            return out[0] if isinstance(out, tuple) else out

        primals = tuple(tg.Tensor(args[i]) for i in moving)
        _, tangent = tg.jvp(f, primals, tuple(tg.Tensor(np.ones_like(args[i])) for i in moving))
        assert not np.any(tangent.numpy()), qualname(cls)
        checked.append(cls)
    assert ew.MinMaxGrad in checked and rd.ExtremumGrad in checked
