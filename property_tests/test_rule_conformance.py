"""Every primitive's rules against each other: ``tapegrad.testing.check_rule`` over every
:class:`~tapegrad.Function` subclass tapegrad defines, found by walking the class tree (not a
list), on a grid of static parameters and shapes.

For each op and case: ``vmap`` over each argument (leading, non-leading and last
``in_axes``, and all together) equals the Python loop; ``jacfwd``, ``jacrev`` and ``hessian``
equal loops of ``jvp``/``vjp``; the forward-mode rule agrees with the backward rule;
``vmap(grad)`` equals the loop of ``grad``; and first derivatives agree with finite
differences. A primitive with no entry in :data:`SPECS` fails
:func:`test_every_primitive_has_a_spec`: a new op cannot go untested by accident.

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
from tapegrad.function import Function
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
    from tapegrad.custom import _CustomVJPFunction

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


class Abstract(NamedTuple):
    """A base class with no rules of its own: its subclasses are checked."""

    reason: str


NO_FD = ("vmap", "jacfwd", "jacrev", "jvp_vjp", "hessian", "vmap_grad")
FIRST_ORDER = ("vmap", "jacfwd", "jacrev", "jvp_vjp", "vmap_grad", "fd")


def U(lo=-1.0, hi=1.0):
    """Uniform floats in ``[lo, hi)``."""
    return lambda rng, shape: rng.uniform(lo, hi, shape)


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
]


def reduction_cases(sample=U(), fast=(0, 1, 2, 3), checks=None, extra=None, nonempty=False,
                    tol=(1e-8, 1e-6)):
    cases = []
    for shape, axis, keepdims in AXES_GRID:
        params = {"axis": axis, "keepdims": keepdims, **(extra or {})}
        cases.append(Case(arrays((shape, sample)), params, checks=checks, tol=tol,
                          label=f"{shape}-{axis}-{keepdims}"))
    return pick(cases, fast)


SINGLE_AXIS = [((3, 4), 1), ((3, 4), -1), ((2, 3, 4), 0), ((2, 3, 4), -2), ((1, 4), 0),
               ((3, 0), 1), ((4,), 0), ((3, 4), -2)]


def axis_cases(sample=U(), fast=(0, 1, 3), checks=None, extra=None, key="axis",
               tol=(1e-8, 1e-6)):
    cases = [Case(arrays((shape, sample)), {key: axis, **(extra or {})}, checks=checks,
                  tol=tol, label=f"{shape}-{axis}") for shape, axis in SINGLE_AXIS]
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
from tapegrad import ops  # noqa: E402
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

    return [Case(make, {"greater": g, "wrt": w}, label=f"{g}-{w}")
            for g in (True, False) for w in (0, 1)][: 4 if LONG else 2]


@spec(ew.UnaryGrad)
def _(cls):
    rows = [ew.Sin.row, ew.Log.row, ew.Sqrt.row, ew.Tanh.row, ew.Floor.row]

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
@spec(rd.Sum, rd.Mean, rd.Prod, rd.LogSumExp, rd.Norm2, rd.Any, rd.All)
def _(cls):
    return reduction_cases()


@spec(rd.NormP)
def _(cls):
    return reduction_cases(AWAY(), extra={"p": 3.0}, fast=(0, 2))


@spec(rd.Max, rd.Min)
def _(cls):
    return reduction_cases()


@spec(rd.Var, rd.Std)
def _(cls):
    return reduction_cases(fast=(0, 1, 2)) + [
        Case(arrays(((3, 4), U())), {"axis": 1, "ddof": 1}, label="ddof")]


@spec(rd.ArgMax, rd.ArgMin)
def _(cls):
    return axis_cases(fast=(0, 1, 3)) + [Case(arrays(((3, 4), U())), {"axis": None,
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
