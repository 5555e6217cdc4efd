"""Shared machinery of ``tapegrad.scipy``: elementwise primitives on SciPy's functions.

:class:`Elementwise` is the base of every elementwise primitive here (``gamma``, ``betainc``,
``iv``, ...): its forward calls the SciPy function on the backend arrays (``scipy.special``
for NumPy, ``cupyx.scipy.special`` for CuPy where it has the function, else a round trip
through host memory), so values are SciPy's own; its backward and forward-mode rules come from
one table of partial derivatives per argument, each written with tapegrad operations (most
often with the other functions of this package: ``gamma' = gamma * digamma``,
``digamma' = polygamma(1, .)``), so derivatives of every order follow. Inputs broadcast like a
ufunc, so the batching rule (``vmap``) is the elementwise one.

Complex inputs follow JAX's convention for holomorphic functions: the cotangent of ``z`` is
``g * f'(z)`` (no conjugate) and the tangent ``f'(z) * t``.
"""

from __future__ import annotations

import numpy as np

from tapegrad.core.function import Function, Traits
from tapegrad.core.tensor import Tensor
from tapegrad.ops import MulNoNan
from tapegrad.ops._batching import elementwise
from tapegrad.ops._registry import tensor_arg

__all__ = ["Elementwise", "special_module", "on_host", "operands", "NoDerivative", "fit_dtype"]


def special_module(xp):
    """``scipy.special`` for NumPy arrays; for CuPy arrays ``cupyx.scipy.special``, where a
    function it lacks (``ive``, ``jn``, ...) is SciPy's, run on host copies
    (:func:`on_host`)."""
    if xp is np:
        import scipy.special

        return scipy.special
    return _DeviceSpecial(xp)  # pragma: no cover - GPU only


class _DeviceSpecial:  # pragma: no cover - GPU only
    """``cupyx.scipy.special`` with SciPy's functions on the host for the names it lacks."""

    def __init__(self, xp):
        import cupyx.scipy.special  # pyright: ignore[reportMissingImports]

        self._xp, self._mod = xp, cupyx.scipy.special

    def __getattr__(self, name):
        xp = self._xp
        fn = getattr(self._mod, name, None)
        if fn is not None:
            return fn
        import scipy.special

        host = getattr(scipy.special, name)
        return lambda *args, **kw: on_host(xp, lambda *a: host(*a, **kw), *args)


def on_host(xp, fn, *args):
    """``fn(*args)`` on NumPy copies of backend arrays, the result moved back to ``xp``.

    NumPy arrays pass through untouched (no copy). For CuPy arrays this is the fallback of
    functions that ``cupyx.scipy`` does not have: correct, at the price of two transfers.
    """
    if xp is np:
        return fn(*args)
    host = [a.get() if hasattr(a, "get") else a for a in args]  # pragma: no cover - GPU only
    out = fn(*host)  # pragma: no cover - GPU only
    if isinstance(out, tuple):  # pragma: no cover - GPU only
        return tuple(xp.asarray(o) for o in out)
    return xp.asarray(out)  # pragma: no cover - GPU only


def fit_dtype(xp, out, args):
    """``out`` as a backend array whose dtype follows tapegrad's rule: SciPy's result dtype,
    except that single-precision inputs (float32/complex64, no 64-bit floating input) give a
    single-precision result even where SciPy computes in double (``polygamma``, ``logm``)."""
    out = xp.asarray(out)
    kinds = [a.dtype for a in args if hasattr(a, "dtype") and a.dtype.kind in "fc"]
    if kinds and all(d.itemsize <= (4 if d.kind == "f" else 8) for d in kinds):
        if out.dtype == np.float64:
            return out.astype(np.float32)
        if out.dtype == np.complex128:
            return out.astype(np.complex64)
    return out


def operands(*xs):
    """Operands of an elementwise function: Tensors pass, Python numbers stay weakly typed
    (NumPy's NEP 50 promotion against the Tensor operands), anything else becomes a Tensor;
    when every operand is a Python number the first becomes a Tensor (float32 for a float, as
    everywhere in tapegrad)."""
    out = []
    for x in xs:
        if isinstance(x, Tensor) or (isinstance(x, (int, float, complex))
                                     and not isinstance(x, bool)):
            out.append(x)
        else:
            out.append(tensor_arg(x))
    if not any(isinstance(x, Tensor) for x in out):
        out[0] = tensor_arg(out[0])
    return out


class NoDerivative:
    """A partial-derivative entry meaning "no derivative with respect to this argument":
    requesting one raises ``NotImplementedError`` with ``reason``."""

    def __init__(self, reason: str):
        self.reason = reason


def _plus(a, b):
    if a is None:
        return b
    return a if b is None else a + b


class Elementwise(Function):
    """Base of the elementwise primitives of ``tapegrad.scipy``.

    Subclasses set ``oper``, ``argnames`` (one name per positional input, for error messages),
    ``fn(sp, *arrays, **params)`` (the SciPy computation; ``sp`` is ``scipy.special`` or
    CuPy's; ``params`` the op's static keyword parameters; by default the function of
    ``sp`` named ``oper``) and ``derivs``: one entry per input,
    a function ``d(*args, out, **params) -> Tensor`` (the partial derivative, written with
    tapegrad ops on the saved inputs and output), ``None`` (the
    output does not depend on that input, or is piecewise constant in it), or a
    :class:`NoDerivative` (requesting it raises ``NotImplementedError``). With ``nonan`` the
    products with a derivative are NaN-safe (0 wherever the cotangent is 0, even where the
    derivative is infinite).
    """

    batch = elementwise  # vmap: broadcast like a ufunc
    traits = Traits(fresh=True)
    argnames: tuple = ("x",)
    derivs: tuple = ()
    nonan: bool = False
    host_only: bool = False  # no CuPy implementation: compute on the host

    fn = None  # the SciPy computation ``fn(sp, *arrays, **params)``; None: ``sp.<oper>``

    @classmethod
    def _scipy(cls, sp, *args, **params):
        """``fn(sp, *args, **params)``, or SciPy's function named by ``oper`` without ``fn``."""
        if cls.fn is None:
            return getattr(sp, str(cls.oper))(*args, **params)
        return cls.fn(sp, *args, **params)

    @classmethod
    def compute(cls, xp, *args, **params):
        """The forward value on backend arrays (SciPy's own)."""
        if xp is np or cls.host_only:
            import scipy.special as sp

            out = on_host(xp, lambda *a: cls._scipy(sp, *a, **params), *args)
        else:  # pragma: no cover - GPU only
            out = cls._scipy(special_module(xp), *args, **params)
        return fit_dtype(xp, out, args)

    @classmethod
    def forward(cls, ctx, *args, **params):
        out = cls.compute(ctx.backend, *args, **params)
        ctx.params = params
        ctx.save_for_backward(*args, out)
        return out

    @classmethod
    def _partials(cls, ctx, needs):
        *args, out = ctx.saved_tensors
        params = ctx.params
        res = []
        for i, need in enumerate(needs):
            d = cls.derivs[i] if i < len(cls.derivs) else None
            if not need or d is None:
                res.append(None)
            elif isinstance(d, NoDerivative):
                raise NotImplementedError(
                    f"{cls._name()}: no derivative with respect to {cls.argnames[i]}: "
                    f"{d.reason}"
                )
            else:
                res.append(d(*args, out, **params))
        return res

    @classmethod
    def _times(cls, g, d):
        if d is None:
            return None
        if not isinstance(d, Tensor):
            d = tensor_arg(np.asarray(d, dtype=g.dtype))
        return MulNoNan.apply(g, d) if cls.nonan else g * d

    @classmethod
    def backward(cls, ctx, g):
        ds = cls._partials(ctx, ctx.needs_input_grad)
        res = tuple(cls._times(g, d) for d in ds)
        return res if len(res) > 1 else res[0]  # pyright: ignore[reportGeneralTypeIssues]

    @classmethod
    def jvp(cls, ctx, *ts):
        ds = cls._partials(ctx, tuple(t is not None for t in ts))
        out = None
        for t, d in zip(ts, ds):
            if t is not None:
                out = _plus(out, cls._times(t, d))
        return out

    @classmethod
    def output_dtype(cls, *dtypes, **params):
        """SciPy's result dtype on 0-d inputs of these dtypes (then tapegrad's float32 rule)."""
        ones = [np.ones((), d) if isinstance(d, np.dtype) else d for d in dtypes]
        with np.errstate(all="ignore"):
            return cls.compute(np, *ones, **params).dtype
