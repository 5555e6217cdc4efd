"""Run HIPS autograd's own test suite on tapegrad, through a shim package named ``autograd``.

The shim maps autograd's public names onto tapegrad's: ``autograd.grad`` onto
``tapegrad.grad``, ``autograd.numpy`` onto ``tapegrad.numpy`` (with ``numpy.random`` kept as
NumPy's own, as autograd's is), ``autograd.scipy.*`` onto ``tapegrad.scipy.*``,
``autograd.test_util.check_grads`` onto ``tapegrad.testing.check_grads`` and so on. It is
installed in ``sys.modules`` of this process only (nothing is written to disk and the real
autograd package, if installed, is never imported), then pytest runs on the given checkout of
autograd's ``tests/`` directory, unchanged. None of autograd's tests are copied here.

Get the tests of a release (1.9.1 here) and run::

    git clone --depth 1 --branch v1.9.1 https://github.com/HIPS/autograd /tmp/autograd
    PYTHONPATH=src python tools/autograd_suite.py /tmp/autograd/tests
    PYTHONPATH=src python tools/autograd_suite.py /tmp/autograd/tests -- -k test_numpy -x

It prints the number of tests that apply (those collected, less the xarray tests that skip
without xarray and the 15 tests of autograd's internals listed in ``INTERNAL``, which are
deselected), how many of them pass, and each failure's test id. Arguments after ``--`` go to
pytest (``-n 2`` runs it on two cores: each worker loads this module as a pytest plugin, which
installs the shim there too). The exit status is 0 when every test that applies passes, 1
otherwise. With autograd 1.9.1: 596 of 603 pass; docs/interop.md ("Coming from HIPS
autograd") says which 7 fail and why.

What the shim adapts, and why (a mapping of names and conventions; no tapegrad behaviour is
replaced):

- Transforms take autograd's ``argnum`` (an int, or a list/tuple of ints meaning one tuple
  argument) and return what autograd's do: ``make_vjp`` returns ``(vjp_fn, value)``,
  ``make_jvp(f)(x)(v)`` returns ``(value, tangent)``; ``grad_and_aux``, ``holomorphic_grad``,
  ``deriv``, ``make_hvp``, ``hessian_tensor_product``, ``tensor_jacobian_product`` and
  ``make_ggnvp`` are written with tapegrad's transforms.
- The differentiated arguments' Python floats become float64 arrays, the dtype NumPy (and so
  autograd) gives them; tapegrad's own rule makes them float32.
- ``autograd.extend.primitive``/``defvjp``/``defjvp`` become a :class:`tapegrad.Function`
  per primitive: the vjp makers receive Tensors, and a missing rule raises
  ``NotImplementedError`` as in autograd.
- ``check_grads(f, argnum, modes, order)(*args)`` checks the derivatives in the selected
  arguments only (the others fixed), as autograd's does, with tapegrad's finite-difference
  check (float64, Richardson-extrapolated, autograd's step of 1e-6) at each order, and order
  ``k + 1`` on ``(x, v) -> vjp(f, x)(v)`` (and the jvp) in both arguments, as autograd
  recurses; a failure names the function as autograd's message does (``(VJP) check of
  vjp_foo failed``).
- ``check_equivalent`` compares structure, shapes, real/complex kind and values (to autograd's
  tolerance): the exact float dtype is not compared (the float32 rule above).
- ``autograd.numpy.random`` is NumPy's ``numpy.random`` (autograd's wraps it; its samples are
  data, not differentiated), and the distributions' ``rvs`` are SciPy's, as autograd's are.
- ``autograd.scipy.integrate.odeint(func, y0, t, args=())`` calls tapegrad's
  ``odeint(func, y0, t, *args)``.
- ``autograd.numpy.linalg`` also has autograd's two helpers ``T`` (``matrix_transpose``) and
  ``_dot`` (``matmul``), which its linalg tests use.
- ``autograd.builtins``' ``isinstance``, ``list``, ``tuple`` and ``dict`` are Python's:
  tapegrad has no boxes to see through.
- The names the internal tests import (``vspace``, ``const_graph``, ``primitive_vjps``,
  ``quick_grad_check``) exist so that their modules import; calling them raises.
"""

from __future__ import annotations

import argparse
import builtins
import functools
import itertools
import pathlib
import sys
import types

import numpy as onp

import tapegrad as tg
import tapegrad.numpy as tnp
import tapegrad.scipy  # noqa: F401  (loads tapegrad.scipy's submodules)
from tapegrad.core.tree import tree_flatten, tree_map, tree_unflatten
from tapegrad.testing import check_grads as tg_check_grads

# Tests of autograd's internals: they test autograd's own objects, not differentiation.
INTERNAL = {
    "test_vspaces.py::test_array_vspace": "autograd's VSpace objects",
    "test_vspaces.py::test_array_vspace_0_dim": "autograd's VSpace objects",
    "test_vspaces.py::test_array_vspace_complex": "autograd's VSpace objects",
    "test_vspaces.py::test_list_vspace": "autograd's VSpace objects",
    "test_vspaces.py::test_tuple_vspace": "autograd's VSpace objects",
    "test_vspaces.py::test_dict_vspace": "autograd's VSpace objects",
    "test_vspaces.py::test_mixed_vspace": "autograd's VSpace objects",
    "test_wrappers.py::test_deprecated_defgrad_wrapper": "a deprecated autograd wrapper",
    "test_wrappers.py::test_deprecated_defvjp_wrapper": "a deprecated autograd wrapper",
    "test_wrappers.py::test_deprecated_defvjp_is_zero_wrapper": "a deprecated autograd wrapper",
    "test_wrappers.py::test_deprecated_quick_grad_check_wrapper": "a deprecated autograd wrapper",
    "test_wrappers.py::test_wrapped_name_and_docs": "autograd's exact docstrings",
    "test_misc.py::test_const_graph": "autograd.misc.const_graph (its tracing cache)",
    "test_misc.py::test_const_graph_args": "autograd.misc.const_graph (its tracing cache)",
    "test_logic.py::test_unimplemented_falseyness": "autograd's rule table (primitive_vjps)",
}


# -- argnum and transforms ----------------------------------------------------------------------
def _as_numpy_scalar(v):
    """A Python float or complex as NumPy makes it (float64, complex128), as autograd sees it."""
    if isinstance(v, (float, complex)) and not isinstance(v, (onp.generic, bool)):
        return onp.asarray(v)
    return v


def _select(fun, argnum, args, kwargs):
    """``(x, f)``: the argument(s) ``argnum`` selects and ``f(x)`` calling ``fun`` with the
    others fixed; a list or tuple ``argnum`` selects a tuple of arguments (autograd's rule).
    Python floats in ``x`` become float64 (NumPy's type for them, which autograd uses)."""
    if isinstance(argnum, (list, tuple)):
        nums = [a % len(args) for a in argnum]
        x = tree_map(_as_numpy_scalar, tuple(args[i] for i in nums))

        def f(xs):
            full = list(args)
            for i, v in zip(nums, xs):
                full[i] = v
            return fun(*full, **kwargs)

        return x, f
    i = argnum % len(args)

    def f1(v):
        full = list(args)
        full[i] = v
        return fun(*full, **kwargs)

    return tree_map(_as_numpy_scalar, args[i]), f1


def _name(fun):
    return getattr(fun, "__name__", type(fun).__name__)


def unary_to_nary(unary_operator):
    """Turn ``op(fun, x, *op_args)`` into ``op(fun, argnum=0, *op_args)(*args, **kwargs)``."""

    @functools.wraps(unary_operator)
    def nary_operator(fun, argnum=0, *nary_op_args, **nary_op_kwargs):
        @functools.wraps(fun)
        def nary_f(*args, **kwargs):
            x, f = _select(fun, argnum, args, kwargs)
            f.__name__ = _name(fun)  # pyright: ignore[reportAttributeAccessIssue]
            return unary_operator(f, x, *nary_op_args, **nary_op_kwargs)

        return nary_f

    return nary_operator


def _vjp1(f, x):
    out, vjp_fn = tg.vjp(f, x)
    return (lambda g: vjp_fn(g)[0]), out


@unary_to_nary
def make_vjp(fun, x):
    """autograd's ``make_vjp(fun, argnum)(*args) -> (vjp_fn, value)``."""
    return _vjp1(fun, x)


@unary_to_nary
def make_jvp(fun, x):
    """autograd's ``make_jvp(fun, argnum)(*args)(v) -> (value, tangent)``."""

    def jvp(v):
        return tg.jvp(fun, (x,), (v,))

    return jvp


@unary_to_nary
def grad(fun, x):
    return tg.grad(fun)(x)


@unary_to_nary
def value_and_grad(fun, x):
    return tg.value_and_grad(fun)(x)


@unary_to_nary
def grad_and_aux(fun, x):
    return tg.grad(fun, has_aux=True)(x)


@unary_to_nary
def holomorphic_grad(fun, x):
    return tg.grad(fun, holomorphic=True)(x)


@unary_to_nary
def elementwise_grad(fun, x):
    return tg.elementwise_grad(fun)(x)


@unary_to_nary
def deriv(fun, x):
    return tg.jvp(fun, (x,), (tnp.ones_like(x),))[1]


@unary_to_nary
def jacobian(fun, x):
    return tg.jacobian(fun)(x)


@unary_to_nary
def hessian(fun, x):
    return tg.hessian(fun)(x)


@unary_to_nary
def make_hvp(fun, x):
    """``(hvp_fn, gradient)``: the vjp of the gradient."""
    return _vjp1(tg.grad(fun), x)


def hessian_tensor_product(fun, argnum=0):
    """``f(*args, V)``: the Hessian of ``fun`` in argument ``argnum`` contracted with ``V``."""
    fun_grad = grad(fun, argnum)

    def vector_dot_grad(*args, **kwargs):
        args, vector = args[:-1], args[-1]
        return tnp.tensordot(fun_grad(*args, **kwargs), vector, onp.ndim(vector))

    return grad(vector_dot_grad, argnum)


hessian_vector_product = hessian_tensor_product


def tensor_jacobian_product(fun, argnum=0):
    """``f(*args, V)``: ``V`` contracted with the leading axes of ``fun``'s Jacobian."""

    def vector_dot_fun(*args, **kwargs):
        args, vector = args[:-1], args[-1]
        return tnp.tensordot(vector, fun(*args, **kwargs), axes=onp.ndim(vector))

    return jacobian(vector_dot_fun, argnum)


vector_jacobian_product = tensor_jacobian_product


def make_ggnvp(f, g=lambda x: 0.5 * tnp.sum(x**2, axis=-1), f_argnum=0):
    """Generalized Gauss-Newton product ``J^T H_g J v`` of ``g(f(x))``."""

    def ggnvp_maker(*args, **kwargs):
        x, fx = _select(f, f_argnum, args, kwargs)
        f_vjp, y = _vjp1(fx, x)
        g_hvp, _ = make_hvp(g)(y)

        def ggnvp(v):
            return f_vjp(g_hvp(tg.jvp(fx, (x,), (v,))[1]))

        return ggnvp

    return ggnvp_maker


def grad_named(fun, argname):
    import inspect

    return grad(fun, list(inspect.signature(fun).parameters).index(argname))


def multigrad_dict(fun):
    import inspect

    sig = inspect.signature(fun)

    def gradfun(*args, **kwargs):
        bound = sig.bind(*args, **kwargs)
        names = list(bound.arguments)

        def f(vals):
            return fun(**dict(zip(names, vals)))

        g = tg.grad(f)(tuple(bound.arguments.values()))
        return dict(zip(names, g))

    return gradfun


def checkpoint(fun):
    return lambda *args: tg.checkpoint(fun, *args)


# -- primitives ---------------------------------------------------------------------------------
class Primitive:
    """autograd's ``primitive``: a function with rules set by ``defvjp``/``defjvp``."""

    def __init__(self, fun):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.vjps = {}
        self.jvps = {}
        prim = self

        def backward(ctx, g):
            *args, ans = ctx.saved_tensors
            kwargs = dict(ctx.kwargs)
            res = []
            for i, need in enumerate(ctx.needs_input_grad):
                if not need:
                    res.append(None)
                    continue
                maker = prim.vjps.get(i)
                if maker is None:
                    raise NotImplementedError(
                        f"VJP of {_name(fun)} wrt argnum {i} not defined"
                    )
                res.append(maker(ans, *args, **kwargs)(g))
            return tuple(res)

        def forward(ctx, *args, kwargs):
            out = onp.asarray(fun(*args, **dict(kwargs)))
            ctx.save_for_backward(*args, out)
            ctx.kwargs = kwargs
            return out

        def jvp(ctx, *ts):
            *args, ans = ctx.saved_tensors
            kwargs = dict(ctx.kwargs)
            out = None
            for i, t in enumerate(ts):
                if t is None:
                    continue
                maker = prim.jvps.get(i)
                if maker is None:
                    raise NotImplementedError(f"JVP of {_name(fun)} wrt argnum {i} not defined")
                term = maker(t, ans, *args, **kwargs)
                out = term if out is None else out + term
            return out

        self.cls = type(_name(fun), (tg.Function,), {
            "oper": _name(fun),
            "forward": staticmethod(forward),
            "backward": staticmethod(backward),
            "jvp": staticmethod(jvp),
        })

    def __call__(self, *args, **kwargs):
        if not any(isinstance(a, tg.Tensor) and a.is_traced for a in args):
            return self.fun(*args, **kwargs)
        return self.cls.apply(*args, kwargs=tuple(sorted(kwargs.items())))

    def defvjp(self, *vjpmakers, **kwargs):
        raise NotImplementedError("deprecated autograd wrapper")


def primitive(fun):
    return Primitive(fun)


def defvjp(prim, *vjpmakers, argnums=None):
    for i, maker in zip(argnums or itertools.count(), vjpmakers):
        if maker is not None:
            prim.vjps[i] = maker


def defjvp(prim, *jvpfuns, argnums=None):
    for i, maker in zip(argnums or itertools.count(), jvpfuns):
        if maker is not None:
            prim.jvps[i] = maker


def odeint(func, y0, t, args=(), **kwargs):
    """autograd's (SciPy's) ``odeint(func, y0, t, args=())``: tapegrad's takes ``*args``."""
    from tapegrad.scipy.integrate import odeint as tg_odeint

    return tg_odeint(func, y0, t, *args, **kwargs)


def _internal(what):
    def unavailable(*args, **kwargs):
        raise NotImplementedError(f"{what} is internal to autograd; the shim does not map it")

    return unavailable


def isbox(x):
    return isinstance(x, tg.Tensor) and x.is_traced


def getval(x):
    return tg.stop_gradient(x) if isinstance(x, tg.Tensor) else x


# -- test utilities -----------------------------------------------------------------------------
TOL = 1e-6
RTOL = 1e-6
EPS = 1e-6  # autograd's finite-difference step (tapegrad's default, 1e-4, is for float32 too)


def scalar_close(a, b):
    a, b = complex(a), complex(b)
    return abs(a - b) < TOL or abs(a - b) / abs(a + b) < RTOL


def _leaves(x):
    leaves, treedef = tree_flatten(x)
    return [onp.asarray(v) for v in leaves], treedef


def check_equivalent(x, y):
    """Assert ``x`` and ``y`` have one structure, shapes, real/complex kinds and values."""
    xs, xt = _leaves(x)
    ys, yt = _leaves(y)
    assert len(xs) == len(ys), f"Structure mismatch:\nx: {x}\ny: {y}"
    for a, b in zip(xs, ys):
        assert a.shape == b.shape, f"Shape mismatch:\nx: {a.shape}\ny: {b.shape}"
        assert (a.dtype.kind == "c") == (b.dtype.kind == "c"), (
            f"Kind mismatch:\nx: {a.dtype}\ny: {b.dtype}")
        v = onp.random.randn(*a.shape)
        assert scalar_close(onp.vdot(a, v), onp.vdot(b, v)), f"Value mismatch:\nx: {x}\ny: {y}"


def _check(f, x, modes, order, name):
    """autograd's recursion: check ``f`` at ``x`` in each mode, then (``order > 1``) the
    function ``(x, v) -> vjp(f, x)(v)`` (and ``jvp``) in both arguments, one order lower."""
    for mode in modes:
        if mode not in ("fwd", "rev"):
            raise ValueError(f"check_grads: unknown mode {mode!r}")
    x = tree_map(lambda v: onp.asarray(v, onp.result_type(onp.asarray(v), onp.float64))
                 if isinstance(v, (float, complex, onp.ndarray, onp.generic)) else v, x)
    for mode in ("fwd", "rev"):
        if mode not in modes:
            continue
        try:
            tg_check_grads(f, (x,), order=1, modes=(mode,), eps=EPS)
        except AssertionError as e:
            kind = "VJP" if mode == "rev" else "JVP"
            raise AssertionError(f"Derivative ({kind}) check of {name} failed:\n{e}") from e
    if order > 1:
        rng = onp.random.default_rng(0)
        if "fwd" in modes:
            t = tree_map(lambda v: _randn_like(rng, onp.asarray(v)), x)
            _check(lambda xv: tg.jvp(f, (xv[0],), (xv[1],))[1], (x, t), modes, order - 1,
                   f"jvp_{name}")
        if "rev" in modes:
            out = f(x)
            leaves, treedef = tree_flatten(out)
            u = tree_unflatten(treedef, [_randn_like(rng, onp.asarray(o)).astype(o.dtype)
                                         for o in leaves])
            _check(lambda xv: _vjp1(f, xv[0])[0](xv[1]), (x, u), modes, order - 1,
                   f"vjp_{name}")


def _randn_like(rng, a):
    v = rng.standard_normal(a.shape)
    if a.dtype.kind == "c":
        v = v + 1j * rng.standard_normal(a.shape)
    return v.astype(onp.result_type(a.dtype, onp.float64))


def check_grads(f, argnum=0, modes=("fwd", "rev"), order=2):
    """autograd's ``check_grads(f, argnum, modes, order)(*args, **kwargs)``."""

    def checker(*args, **kwargs):
        x, fx = _select(f, argnum, args, kwargs)
        _check(fx, x, tuple(modes), order, _name(f))

    return checker


def combo_check(fun, *args, **kwargs):
    """Check gradients at every combination of the given arguments and keyword values."""

    def _combo_check(*arglists, **kwarglists):
        kv = [[(k, v) for v in vs] for k, vs in kwarglists.items()]
        for a in itertools.product(*arglists):
            for kw in itertools.product(*kv):
                check_grads(fun, *args, **kwargs)(*a, **dict(kw))

    return _combo_check


# -- the shim modules ---------------------------------------------------------------------------
class _Forward(types.ModuleType):
    """A module forwarding unknown attributes to ``target`` (and failing where it fails)."""

    def __init__(self, name, target, **extra):
        super().__init__(name)
        self.__dict__["_target"] = target
        self.__dict__.update(extra)

    def __getattr__(self, attr):
        return getattr(self.__dict__["_target"], attr)


def _module(name, package=False, **attrs):
    m = types.ModuleType(name)
    m.__dict__.update(attrs)
    if package:
        m.__path__ = []
    return m


def build_shim() -> dict:
    """The shim's modules, by name (``autograd``, ``autograd.numpy``, ...)."""
    import tapegrad.numpy.fft as tfft
    import tapegrad.numpy.linalg as tlinalg

    mods = {}
    npmod = _Forward("autograd.numpy", tnp, random=onp.random, linalg=tlinalg, fft=tfft)
    npmod.__path__ = []
    mods["autograd.numpy"] = npmod
    mods["autograd.numpy.random"] = onp.random
    linalg_mod = _Forward("autograd.numpy.linalg", tlinalg, T=tnp.matrix_transpose,
                          _dot=tnp.matmul)  # (two helpers autograd's linalg tests use)
    npmod.__dict__["linalg"] = linalg_mod
    mods["autograd.numpy.linalg"] = linalg_mod
    mods["autograd.numpy.fft"] = tfft
    scipy_mod = _Forward("autograd.scipy", tg_scipy())
    scipy_mod.__path__ = []
    mods["autograd.scipy"] = scipy_mod
    for sub in ("linalg", "signal", "special", "stats"):
        mods[f"autograd.scipy.{sub}"] = _Forward(f"autograd.scipy.{sub}",
                                                 getattr(tg_scipy(), sub))
    mods["autograd.scipy.integrate"] = _module("autograd.scipy.integrate", odeint=odeint)
    import scipy.stats

    for dist in tg_scipy().stats.__all__:  # samplers are SciPy's, as autograd's are
        mods[f"autograd.scipy.stats.{dist}"] = _Forward(
            f"autograd.scipy.stats.{dist}", getattr(tg_scipy().stats, dist),
            rvs=getattr(scipy.stats, dist).rvs)
    builtins_mod = _module("autograd.builtins", isinstance=builtins.isinstance,
                           type=builtins.type, list=builtins.list, tuple=builtins.tuple,
                           dict=builtins.dict)
    mods["autograd.builtins"] = builtins_mod
    ops = dict(
        grad=grad, value_and_grad=value_and_grad, grad_and_aux=grad_and_aux,
        holomorphic_grad=holomorphic_grad, elementwise_grad=elementwise_grad, deriv=deriv,
        jacobian=jacobian, hessian=hessian, make_hvp=make_hvp, make_vjp=make_vjp,
        make_jvp=make_jvp, hessian_tensor_product=hessian_tensor_product,
        hessian_vector_product=hessian_vector_product,
        tensor_jacobian_product=tensor_jacobian_product,
        vector_jacobian_product=vector_jacobian_product, make_ggnvp=make_ggnvp,
        grad_named=grad_named, multigrad_dict=multigrad_dict, checkpoint=checkpoint,
    )
    mods["autograd.differential_operators"] = _module("autograd.differential_operators", **ops)
    top = _module("autograd", package=True, primitive=primitive, numpy=npmod,
                  scipy=scipy_mod, builtins=builtins_mod, **ops,
                  isinstance=builtins.isinstance, type=builtins.type, list=builtins.list,
                  tuple=builtins.tuple, dict=builtins.dict)
    mods["autograd"] = top
    mods["autograd.core"] = _module("autograd.core", make_vjp=lambda f, x: _vjp1(f, x),
                                    make_jvp=lambda f, x: make_jvp(f)(x), primitive=primitive,
                                    vspace=_internal("autograd.core.vspace"),
                                    primitive_vjps={})
    mods["autograd.extend"] = _module("autograd.extend", primitive=primitive, defvjp=defvjp,
                                      defjvp=defjvp)
    mods["autograd.tracer"] = _module("autograd.tracer", primitive=primitive, isbox=isbox,
                                      getval=getval)
    mods["autograd.wrap_util"] = _module("autograd.wrap_util", unary_to_nary=unary_to_nary)
    mods["autograd.misc"] = _module("autograd.misc", package=True,
                                    flatten=tg.flatten,
                                    const_graph=_internal("autograd.misc.const_graph"))
    mods["autograd.test_util"] = _module(
        "autograd.test_util", check_grads=check_grads, check_equivalent=check_equivalent,
        scalar_close=scalar_close, combo_check=combo_check)
    mods["autograd.util"] = _module(
        "autograd.util", quick_grad_check=_internal("autograd.util.quick_grad_check"))
    for name, m in mods.items():
        if "." in name:
            parent, _, child = name.rpartition(".")
            if parent in mods and mods[parent].__name__.startswith("autograd"):
                mods[parent].__dict__[child] = m  # (tapegrad's own modules stay untouched)
    return mods


def tg_scipy():
    import tapegrad.scipy as s

    return s


def install() -> None:
    """Put the shim in ``sys.modules`` (replacing any imported ``autograd``)."""
    for name in [n for n in sys.modules if n == "autograd" or n.startswith("autograd.")]:
        del sys.modules[name]
    sys.modules.update(build_shim())


# -- running ------------------------------------------------------------------------------------
def pytest_configure(config):
    """pytest hook (this module is loaded as a plugin, in xdist workers too): install the shim."""
    install()


def pytest_collection_modifyitems(config, items):
    """pytest hook: leave out the tests of autograd's internals (``INTERNAL``)."""
    keep, drop = [], []
    for item in items:
        key = f"{pathlib.Path(str(item.fspath)).name}::{item.name}"
        (drop if key in INTERNAL else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


class _Tally:
    """A pytest plugin counting outcomes (in the controlling process)."""

    def __init__(self):
        self.passed, self.failed, self.skipped = [], [], []

    def pytest_collectreport(self, report):
        if report.failed:
            self.failed.append(report.nodeid)

    def pytest_runtest_logreport(self, report):
        if report.skipped:
            self.skipped.append(report.nodeid)
        elif report.failed:
            self.failed.append(report.nodeid)
        elif report.when == "call":
            self.passed.append(report.nodeid)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("tests", type=pathlib.Path, help="autograd's tests/ directory")
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    ns = parser.parse_args(argv)
    import os

    import pytest

    here = str(pathlib.Path(__file__).resolve().parent)
    sys.path.insert(0, here)  # this module is the plugin, for xdist workers too
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (here, os.environ.get("PYTHONPATH")) if p)
    tally = _Tally()
    pytest.main([str(ns.tests), "-q", "-p", "no:cacheprovider", "-p", "autograd_suite",
                 "-W", "default", *ns.pytest_args], plugins=[tally])
    failed = sorted(set(tally.failed))
    applies = len(tally.passed) + len(failed)
    print(f"\nautograd suite on tapegrad: {len(tally.passed)} of {applies} tests that apply "
          f"pass; {len(tally.skipped)} skipped (xarray missing); {len(INTERNAL)} tests of "
          "autograd's internals not run (INTERNAL)")
    for nodeid in failed:
        print("FAILED", nodeid)
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
