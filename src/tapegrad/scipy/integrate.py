"""``tapegrad.scipy.integrate``: ``odeint``, an ODE solver differentiable by the adjoint method.

``odeint(func, y0, t, *args)`` integrates ``dy/dt = func(y, t, *args)`` with an adaptive
Dormand-Prince 5(4) Runge-Kutta method written with :mod:`tapegrad.numpy`, and returns the
solution at the times ``t``, as ``jax.experimental.ode.odeint`` (same arguments: ``rtol``,
``atol``, ``mxstep``, ``hmax``). Gradients with respect to ``y0``, ``t`` and every array in
``args`` come from the adjoint method (Chen et al. 2018): the augmented adjoint system is
integrated backwards in time with the same solver, so memory does not grow with the number
of steps. Forward mode integrates the forward sensitivity equations alongside the solution.
Both rules are themselves ``odeint`` solves, so derivatives of every order follow, and a
``vmap`` over ``odeint`` solves each example in turn.

References:
    R. T. Q. Chen, Y. Rubanova, J. Bettencourt and D. Duvenaud, "Neural Ordinary
    Differential Equations", NeurIPS 2018 (the adjoint method, Algorithm 1).
    J. R. Dormand and P. J. Prince, "A family of embedded Runge-Kutta formulae", J. Comp.
    Appl. Math. 6(1), 1980. E. Hairer, S. P. Norsett and G. Wanner, "Solving Ordinary
    Differential Equations I", 2nd ed., Springer 1993, sec. II.4 (initial step size) and
    II.6 (dense output). Step-size control and dense output as JAX's ``odeint``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

import tapegrad.numpy as tnp
from tapegrad.core.function import Function
from tapegrad.core.tensor import Tensor
from tapegrad.core.tree import tree_flatten, tree_unflatten
from tapegrad.transforms.forward import jvp as _jvp
from tapegrad.transforms.reverse import vjp as _vjp

__all__ = ["odeint"]

# Dormand-Prince 5(4) tableau.
_ALPHA = [1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0, 1.0]
_BETA = [
    [1 / 5],
    [3 / 40, 9 / 40],
    [44 / 45, -56 / 15, 32 / 9],
    [19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729],
    [9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656],
    [35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84],
]
_C_SOL = [35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0.0]
_C_ERR = [35 / 384 - 1951 / 21600, 0.0, 500 / 1113 - 22642 / 50085, 125 / 192 - 451 / 720,
          -2187 / 6784 + 12231 / 42400, 11 / 84 - 649 / 6300, -1.0 / 60.0]
_C_MID = [6025192743 / 30085553152 / 2, 0.0, 51252292925 / 65400821598 / 2,
          -2691868925 / 45128329728 / 2, 187940372067 / 1594534317056 / 2,
          -1776094331 / 19743644256 / 2, 11237099 / 235043384 / 2]


def _combo(coeffs, ks):
    """``sum_j coeffs[j] ks[j]`` over the nonzero coefficients."""
    out = None
    for c, k in zip(coeffs, ks):
        if c:
            out = c * k if out is None else out + c * k
    return out


def _rk_step(func, y0, f0, t0, dt, dty=None):
    """One Dormand-Prince step: ``(y1, f1, error estimate, stages)``. ``dty``: the step in the
    state's dtype (default ``dt``), for the state's arithmetic; ``dt`` advances the time."""
    dty = dt if dty is None else dty
    ks = [f0]
    for i in range(6):
        yi = y0 + dty * _combo(_BETA[i], ks)
        ks.append(func(yi, t0 + dt * _ALPHA[i]))
    y1 = y0 + dty * _combo(_C_SOL, ks)
    err = dty * _combo(_C_ERR, ks)
    return y1, ks[-1], err, ks


def _interp_fit(y0, y1, ks, dt):
    """Coefficients ``(a, b, c, d, e)`` of the quartic dense output on the step (Hairer et
    al. II.6), evaluated as ``a s**4 + b s**3 + c s**2 + d s + e`` at ``s`` in [0, 1]."""
    y_mid = y0 + dt * _combo(_C_MID, ks)
    dy0, dy1 = dt * ks[0], dt * ks[-1]
    a = -2.0 * dy0 + 2.0 * dy1 - 8.0 * y0 - 8.0 * y1 + 16.0 * y_mid
    b = 5.0 * dy0 - 3.0 * dy1 + 18.0 * y0 + 14.0 * y1 - 32.0 * y_mid
    c = -4.0 * dy0 + dy1 - 11.0 * y0 - 5.0 * y1 + 16.0 * y_mid
    return (a, b, c, dy0, y0)


def _polyval(coeffs, s):
    out = coeffs[0]
    for c in coeffs[1:]:
        out = out * s + c
    return out


def _rms(v) -> float:
    return float(tnp.sqrt(tnp.mean(v * v))) if v.size else 0.0


def _initial_step(func, t0, y0, f0, rtol, atol, order=4):
    """Hairer, Norsett and Wanner, sec. II.4."""
    scale = atol + tnp.abs(y0) * rtol
    d0 = float(tnp.linalg.norm(y0 / scale)) if y0.size else 0.0
    d1 = float(tnp.linalg.norm(f0 / scale)) if y0.size else 0.0
    h0 = 1e-6 if (d0 < 1e-5 or d1 < 1e-5) else 0.01 * d0 / d1
    f1 = func(y0 + h0 * f0, t0 + h0)
    d2 = (float(tnp.linalg.norm((f1 - f0) / scale)) if y0.size else 0.0) / h0
    if d1 <= 1e-15 and d2 <= 1e-15:
        h1 = max(1e-6, h0 * 1e-3)
    else:
        h1 = (0.01 / max(d1, d2)) ** (1.0 / (order + 1.0))
    return min(100.0 * h0, h1)


def _optimal_step(dt, ratio, safety=0.9, ifactor=10.0, dfactor=0.2, order=5.0):
    if ratio == 0:
        return dt * ifactor
    dfactor = 1.0 if ratio < 1 else dfactor
    return dt * min(ifactor, max(ratio ** (-1.0 / order) * safety, dfactor))


_CLOSURE = ("func uses a Tensor that an enclosing transform differentiates without receiving "
            "it as an argument (a closure); pass it to odeint through *args")


def _solve(fn, y0, ts, rtol, atol, mxstep, hmax):
    """The solution at the times ``ts`` (level-0 Tensors), shape ``(len(ts), n)``; ``fn(y,
    t)`` gets the time as a 0-d Tensor of ``ts``'s dtype.

    One :func:`~tapegrad.scan` over the output times; the adaptive steps between two of them
    are a :func:`~tapegrad.while_loop` (its body, a Dormand-Prince step with its error control,
    traced once and compiled); a step that fails its tolerance is retried with a smaller one
    inside the loop. A failure (too many steps, a step size that fell to zero, NaN) stops the
    loops and is raised after them, naming the interval."""
    from tapegrad.transforms.control import scan, while_loop

    dtype, ydt = ts.dtype, y0.dtype
    f64 = np.float64

    def func(y, t):
        return fn(y, t.astype(dtype) if isinstance(t, Tensor) else Tensor(np.asarray(t, dtype)))

    times = [float(v) for v in ts.numpy()]
    f0 = func(y0, times[0])
    if f0.is_traced:
        raise ValueError(_CLOSURE)
    dt = min(max(_initial_step(func, times[0], y0, f0, rtol, atol), 0.0), hmax)
    zero = y0 * 0.0

    def scalar(v, dt: Any = f64):
        return Tensor(np.asarray(v, dt))

    def running(c):
        return (c["t"] < c["target"]) & (c["status"] == 0)

    def step(c):
        y, f, t, dt, steps = c["y"], c["f"], c["t"], c["dt"], c["steps"]
        bad = tnp.where(steps >= mxstep, 1, tnp.where(dt > 0, 0, 2))
        y1, f1, err, ks = _rk_step(func, y, f, t, dt, dt.astype(ydt))
        tol = atol + rtol * tnp.maximum(tnp.abs(y), tnp.abs(y1))
        v = err / tol
        ratio = (tnp.sqrt(tnp.mean(v * v)) if v.size else zero.sum()).astype(f64)
        inv = tnp.where(ratio == 0, 1.0, ratio)
        grow = dt * tnp.minimum(10.0, tnp.maximum(inv ** (-1.0 / 5.0) * 0.9,
                                                  tnp.where(ratio < 1, 1.0, 0.2)))
        new_dt = tnp.minimum(tnp.maximum(tnp.where(ratio == 0, dt * 10.0, grow), 0.0), hmax)
        accept = (ratio <= 1.0) & (bad == 0)
        status = tnp.where(bad != 0, bad, tnp.where(tnp.isnan(ratio), 3, 0)).astype(np.int64)
        fit = _interp_fit(y, y1, ks, dt.astype(ydt))
        go = status == 0
        return dict(
            y=tnp.where(accept, y1, y), f=tnp.where(accept, f1, f),
            t=tnp.where(accept, t + dt, t), dt=tnp.where(go, new_dt, dt),
            last_t=tnp.where(accept, t, c["last_t"]),
            coeffs=tuple(tnp.where(accept, a, b) for a, b in zip(fit, c["coeffs"])),
            steps=tnp.where(go, steps + 1.0, steps), status=status, target=c["target"])

    def interval(prev, target):  # the steps up to the next output time, and the output there
        c: Any = while_loop(running, step, dict(prev, steps=scalar(0.0), target=target))
        t, last_t = c["t"], c["last_t"]
        frac = ((target - last_t) / tnp.where(t == last_t, 1.0, t - last_t)).astype(ydt)
        return c, (_polyval(c["coeffs"], frac), c["status"], t, c["dt"])

    init = dict(y=y0, f=f0, t=scalar(times[0]), dt=scalar(dt), last_t=scalar(times[0]),
                coeffs=(zero,) * 4 + (y0,), steps=scalar(0.0), status=scalar(0, np.int64),
                target=scalar(times[0]))
    out: Any = scan(interval, init, Tensor(np.asarray(times[1:], f64)))
    ys, status, reached, dts = out[1]
    bad = np.flatnonzero(status.numpy())
    if bad.size:
        k = int(bad[0])
        prev, target, t = times[k], times[k + 1], float(reached[k])
        code = int(status[k])
        if code == 1:
            raise RuntimeError(
                f"odeint: more than mxstep={mxstep} steps between t={prev:g} and "
                f"t={target:g} (reached t={t:g}); raise mxstep or loosen rtol/atol (the "
                "problem may be stiff)"
            )
        if code == 2:
            raise RuntimeError(
                f"odeint: the step size fell to {float(dts[k]):g} at t={t:g} before "
                f"t={target:g}; the solution may blow up there, or rtol/atol are too tight"
            )
        raise RuntimeError(f"odeint: func returned NaN or inf near t={t:g}")
    return tnp.concatenate([tnp.reshape(y0, (1,) + tuple(y0.shape)), ys])


# -- flattening pytrees to one state vector ---------------------------------------------------
def _ravel(leaves, dtype):
    parts = [tnp.reshape(v, (-1,)).astype(dtype) for v in leaves]
    if not parts:
        return tnp.zeros((0,), dtype=dtype)
    return tnp.concatenate(parts) if len(parts) > 1 else parts[0]


def _unravel(vec, specs):
    """Split ``vec`` (``(..., n)``) into leaves of the given ``(shape, dtype)`` specs."""
    out, start = [], 0
    lead = vec.shape[:-1]
    for shape, dtype in specs:
        size = int(np.prod(shape))
        part = vec[..., start:start + size].reshape(lead + tuple(shape))
        out.append(part if part.dtype == dtype else part.astype(dtype))
        start += size
    return out


class _Flat:
    """The user's ``func`` on flat vectors: ``fn(y (n,), t, *arg_leaves) -> (n,)``."""

    def __init__(self, func, y_tree, y_specs, arg_tree, arg_kinds, static, dtype):
        self.func, self.y_tree, self.y_specs = func, y_tree, y_specs
        self.arg_tree, self.arg_kinds, self.static, self.dtype = (arg_tree, arg_kinds, static,
                                                                  dtype)

    def __call__(self, y, t, *arg_leaves):
        y = tree_unflatten(self.y_tree, _unravel(y, self.y_specs))
        it, st = iter(arg_leaves), iter(self.static)
        leaves = [next(it) if k else next(st) for k in self.arg_kinds]
        args = tree_unflatten(self.arg_tree, leaves)
        out = self.func(y, t, *args)
        out_leaves, out_tree = tree_flatten(out)
        if out_tree != self.y_tree:
            raise TypeError(
                f"func must return the structure of y0 ({self.y_tree}), got {out_tree}"
            )
        for o, (shape, _) in zip(out_leaves, self.y_specs):
            if tuple(np.shape(o)) != tuple(shape):
                raise ValueError(
                    f"func returned a leaf of shape {tuple(np.shape(o))} where y0 has "
                    f"shape {tuple(shape)}"
                )
        return _ravel([o if isinstance(o, Tensor) else tnp.asarray(o) for o in out_leaves],
                      self.dtype)

    def __repr__(self) -> str:
        return f"<odeint func {getattr(self.func, '__name__', self.func)!r}>"


class _Adjoint:
    """Dynamics of the augmented adjoint state ``(y, a, t_bar, args_bar)`` in negated time
    (Chen et al. 2018, Algorithm 1; the layout of JAX's ``_odeint_rev``)."""

    def __init__(self, fn, n, arg_specs):
        self.fn, self.n, self.arg_specs = fn, n, arg_specs

    def __call__(self, aug, s, *args):
        n = self.n
        y, a = aug[:n], aug[n:2 * n]
        y_dot, pull = _vjp(lambda y_, t_, *a_: self.fn(y_, t_, *a_), y, -s, *args)
        cts = pull(a)
        dtype = aug.dtype
        parts = [-y_dot, cts[0], tnp.reshape(cts[1], (1,))] + [c for c in cts[2:]]
        return _ravel(parts, dtype)

    def __repr__(self) -> str:
        return "<odeint adjoint dynamics>"


class _Sensitivity:
    """Dynamics of ``(y, s)`` with the forward sensitivity ``s' = J_y f s + J_args f dargs``."""

    def __init__(self, fn, n, nargs):
        self.fn, self.n, self.nargs = fn, n, nargs

    def __call__(self, state, t, *rest):
        n, k = self.n, self.nargs
        y, s = state[:n], state[n:]
        args, targs = rest[:k], rest[k:]
        out, tout = _jvp(lambda y_, *a_: self.fn(y_, t, *a_), (y, *args), (s, *targs))
        return tnp.concatenate([out, tout])

    def __repr__(self) -> str:
        return "<odeint sensitivity dynamics>"


class ODEInt(Function):
    """The solution of ``y' = fn(y, t, *args)`` at the times ``t`` (primitive of
    :func:`odeint`, on flat state vectors): output ``(len(t), n)``."""

    oper = "odeint"

    @staticmethod
    def forward(ctx, y0, t, *args, fn, rtol, atol, mxstep, hmax):
        if t.ndim != 1 or t.shape[0] == 0:
            raise ValueError(f"t must be a non-empty 1-D array of times, got shape {t.shape}")
        tv = np.asarray(t if isinstance(t, np.ndarray) else t.get())
        if np.any(~np.isfinite(tv)) or np.any(np.diff(tv) <= 0):
            raise ValueError(f"t must be finite and strictly increasing, got {tv}")
        y0c = Tensor(y0)
        ys = _solve(lambda y, s: fn(y, s, *[Tensor(a) for a in args]), y0c, Tensor(t), rtol,
                    atol, mxstep, hmax)
        out = ctx.backend.asarray(ys.numpy())
        ctx.params = dict(fn=fn, rtol=rtol, atol=atol, mxstep=mxstep, hmax=hmax)
        ctx.save_for_backward(out, t, *args)
        return out

    @staticmethod
    def backward(ctx, g):
        ys, t, *args = ctx.saved_tensors
        p = ctx.params
        fn = p["fn"]
        n = ys.shape[1]
        arg_specs = [(a.shape, a.dtype) for a in args]
        aug_fn = _Adjoint(fn, n, arg_specs)
        dtype = ys.dtype
        y_bar = g[-1]
        t0_bar = tnp.zeros((), dtype=dtype)
        args_bar = [tnp.zeros_like(a) for a in args]
        ts_bar = []
        for i in range(t.shape[0] - 1, 0, -1):
            t_bar = tnp.sum(fn(ys[i], t[i], *args) * g[i])
            t0_bar = t0_bar - t_bar
            aug0 = _ravel([ys[i], y_bar, tnp.reshape(t0_bar, (1,)), *args_bar], dtype)
            span = tnp.stack([-t[i], -t[i - 1]])
            out = ODEInt.apply(aug0, span, *args, **{**p, "fn": aug_fn})[1]
            parts = _unravel(out, [((n,), dtype), ((n,), dtype), ((1,), dtype), *arg_specs])
            y_bar = parts[1] + g[i - 1]
            t0_bar = parts[2].reshape(())
            args_bar = parts[3:]
            ts_bar.append(t_bar)
        t_cot = tnp.stack([t0_bar] + ts_bar[::-1]).astype(t.dtype)
        return (y_bar, t_cot, *args_bar)

    @staticmethod
    def jvp(ctx, ty0, tt, *targs):
        ys, t, *args = ctx.saved_tensors
        p = dict(ctx.params)
        fn = p["fn"]
        n = ys.shape[1]
        f0 = fn(ys[0], t[0], *args)
        s0 = tnp.zeros_like(ys[0]) if ty0 is None else ty0
        if tt is not None:
            s0 = s0 - f0 * tt[0]
        targs = [tnp.zeros_like(a) if ta is None else ta for a, ta in zip(args, targs)]
        sens = _Sensitivity(fn, n, len(args))
        p["fn"] = sens
        out = ODEInt.apply(tnp.concatenate([ys[0], s0]), t, *args, *targs, **p)[:, n:]
        if tt is not None:  # moving t_i moves y(t_i) by f(y_i, t_i) dt_i (row 0: undoes s0's)
            rows = [f0 * tt[0]] + [fn(ys[i], t[i], *args) * tt[i] for i in range(1, t.shape[0])]
            out = out + tnp.stack(rows)
        return out

    @staticmethod
    def batch(args, batched, size, **params):
        y0, t = args[0], args[1]
        if size == 0:
            return tnp.zeros((0, t.shape[-1], y0.shape[-1]), dtype=y0.dtype)
        rows = [ODEInt.apply(*[a[i] if b else a for a, b in zip(args, batched)], **params)
                for i in range(size)]
        return tnp.stack(rows)

    @classmethod
    def output_shape(cls, y0, t, *args, **params):
        return (t[0], y0[0])

    @classmethod
    def output_dtype(cls, y0, t, *args, **params):
        return y0


def odeint(func, y0, t, *args, rtol=1.4e-8, atol=1.4e-8, mxstep=math.inf, hmax=math.inf):
    """Solve ``dy/dt = func(y, t, *args)`` from ``y(t[0]) = y0`` and return ``y`` at the
    times ``t`` (``jax.experimental.ode.odeint``'s interface).

    Args:
        func: ``func(y, t, *args)`` returning ``dy/dt`` with ``y``'s structure, written with
            tapegrad operations. It must not close over Tensors that an enclosing transform
            differentiates: pass them through ``args``.
        y0: Initial state: a Tensor, array or pytree of them, real floating (float32 or
            float64; the state is computed in their promoted dtype).
        t: 1-D Tensor of strictly increasing times; ``t[0]`` is the initial time.
        *args: Extra arguments for ``func``, pytrees whose floating Tensor/array leaves are
            differentiable inputs (other leaves are constants).
        rtol, atol: Relative and absolute tolerance of the local error estimate
            (``err <= atol + rtol * max(|y_n|, |y_{n+1}|)`` in root-mean-square).
        mxstep: Maximum number of steps between two consecutive times.
        hmax: Maximum step size.

    Returns:
        A pytree of ``y0``'s structure whose leaves have a leading axis of ``len(t)``:
        ``result[i] ~ y(t[i])`` (``result[0]`` is ``y0``).

    Raises:
        ValueError: if ``t`` is not 1-D, finite and strictly increasing, ``func`` returns
            another structure or shape than ``y0``, or ``func`` closes over a traced Tensor.
        TypeError: for complex or integer ``y0``, or a ``func`` that is not callable.
        RuntimeError: if more than ``mxstep`` steps are needed between two times, the step
            size underflows, or ``func`` returns NaN.

    Derivatives: reverse mode by the adjoint method (Chen et al. 2018): the adjoint
    ``a(t) = dL/dy(t)`` obeys ``a' = -a^T df/dy`` and the parameter gradient accumulates
    ``-int a^T df/dargs dt``; the augmented system ``(y, a, dL/dt0, dL/dargs)`` is solved
    backwards between consecutive times with this solver, and ``dL/dt_i = a(t_i)^T f(y_i,
    t_i)`` (JAX's layout). Forward mode solves the sensitivity equations
    ``s' = df/dy s + df/dargs dargs``. Both are accurate to the solver tolerances, not exact
    derivatives of the discrete forward solve; both are ``odeint`` solves again, so every
    order is available.

    Example:
        >>> import tapegrad as tg, tapegrad.numpy as tnp
        >>> from tapegrad.scipy.integrate import odeint
        >>> t = tnp.linspace(0.0, 1.0, 3, dtype="float64")
        >>> ys = odeint(lambda y, t, k: -k * y, tnp.asarray([1.0], dtype="float64"), t, 2.0)
        >>> [round(float(v), 6) for v in ys[:, 0]]
        [1.0, 0.367879, 0.135335]
    """
    if not callable(func):
        raise TypeError(f"odeint: func must be callable, func(y, t, *args) -> dy/dt, got "
                        f"{type(func).__name__}")
    y_leaves, y_tree = tree_flatten(y0)
    y_leaves = [v if isinstance(v, Tensor) else tnp.asarray(v) for v in y_leaves]
    for v in y_leaves:
        if v.dtype.kind != "f":
            raise TypeError(
                f"odeint: y0 must hold real floating arrays (float32 or float64), got a leaf "
                f"of dtype {v.dtype} and shape {v.shape}"
            )
    if not y_leaves:
        raise ValueError("odeint: y0 has no leaves")
    dtype = np.result_type(*[v.dtype for v in y_leaves])
    t = t if isinstance(t, Tensor) else tnp.asarray(t)
    if t.ndim != 1:
        raise ValueError(f"odeint: t must be a 1-D array of times, got shape {t.shape}")
    t = t.astype(dtype) if t.dtype != dtype else t
    a_leaves, a_tree = tree_flatten(tuple(args))
    kinds = [isinstance(v, (Tensor, np.ndarray)) and np.dtype(v.dtype).kind == "f"
             for v in a_leaves]
    dyn = [v if isinstance(v, Tensor) else tnp.asarray(v)
           for v, k in zip(a_leaves, kinds) if k]
    static = tuple(v for v, k in zip(a_leaves, kinds) if not k)
    specs = [(v.shape, v.dtype) for v in y_leaves]
    fn = _Flat(func, y_tree, specs, a_tree, tuple(kinds), static, dtype)
    flat_y0 = _ravel(y_leaves, dtype)
    ys = ODEInt.apply(flat_y0, t, *dyn, fn=fn, rtol=float(rtol), atol=float(atol),
                      mxstep=mxstep, hmax=float(hmax))
    return tree_unflatten(y_tree, _unravel(ys, specs))
