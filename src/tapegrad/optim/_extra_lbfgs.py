"""L-BFGS: Optax's pure ``lbfgs`` with its zoom line search, and the algorithm of PyTorch's
``torch.optim.LBFGS`` (run by the stateful :class:`~tapegrad.optim.LBFGS`).

The pure form is three transformations in a chain (Optax's design):
:func:`scale_by_lbfgs` (the two-loop recursion with the last ``memory_size`` pairs of
parameter and gradient differences), a scale by ``-1`` (or ``-learning_rate``), and
:func:`scale_by_zoom_linesearch`, which evaluates the objective along the direction and needs
it: ``update(grads, state, params, value=loss, grad=grads, value_fn=loss_fn)``. The line
search keeps the value and gradient at the accepted point in its state, and
:func:`value_and_grad_from_state` reuses them at the next step.

Example:
    >>> import numpy as np
    >>> import tapegrad as tg
    >>> import tapegrad.numpy as tnp
    >>> from tapegrad import optim
    >>> def f(p):                                      # minimum at (1, -2)
    ...     return tnp.sum(tnp.square(p["w"] - tg.Tensor(np.array([1.0, -2.0]))))
    >>> params = {"w": tg.Tensor(np.zeros(2))}
    >>> tx = optim.lbfgs()
    >>> state = tx.init(params)
    >>> value_and_grad = optim.value_and_grad_from_state(f)
    >>> for _ in range(3):
    ...     value, grad = value_and_grad(params, state=state)
    ...     updates, state = tx.update(grad, state, params, value=value, grad=grad, value_fn=f)
    ...     params = optim.apply_updates(params, updates)
    >>> params["w"].numpy().round(6).tolist()
    [1.0, -2.0]
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import Any

import attrs
import numpy as np

from tapegrad import numpy as tnp
from tapegrad.core._keywords import strict_all
from tapegrad.core.tensor import Tensor
from tapegrad.core.tree import tree_leaves, tree_unflatten
from tapegrad.optim.transforms import (
    GradientTransformation,
    Identity,
    Scale,
    ScaleByLearningRate,
    Schedule,
    _check_bool,
    _check_lr,
    _check_match,
    _check_nonneg,
    _check_number,
    _choice,
    _count,
    _find_dicts,
    _leaves,
    _like_leaf,
    _next_count,
    _traced,
    chain,
    tree_zeros_like,
)
from tapegrad.transforms.reverse import value_and_grad as _value_and_grad

__all__ = [
    "ScaleByLBFGS",
    "ScaleByZoomLinesearch",
    "scale_by_lbfgs",
    "scale_by_zoom_linesearch",
    "lbfgs",
    "value_and_grad_from_state",
]


# -- scalar helpers (0-d float64 Tensors: under tg.jit a decision on them is a guard) -----------
def _f64(x, device=None) -> Tensor:
    """``x`` as a 0-d float64 Tensor (a Python number on ``device``)."""
    x = _traced(x)
    if isinstance(x, Tensor):
        return tnp.astype(x, np.float64)
    return tnp.asarray(x, dtype=np.float64, device=device)


def _vdot(a: list, b: list) -> Tensor:
    """Sum over leaves of ``<a_i, b_i>``, in float64 (0-d)."""
    total = None
    for x, y in zip(a, b):
        part = tnp.sum(tnp.multiply(tnp.astype(x, np.float64), tnp.astype(y, np.float64)))
        total = part if total is None else tnp.add(total, part)
    return tnp.zeros((), dtype=np.float64) if total is None else total


def _axpy(alpha, x: list, y: list) -> list:
    """``y + alpha * x`` leafwise (``alpha`` cast to each leaf's dtype)."""
    return [tnp.add(yi, tnp.multiply(xi, _like_leaf(alpha, xi))) for xi, yi in zip(x, y)]


def _scaled(alpha, x: list) -> list:
    return [tnp.multiply(xi, _like_leaf(alpha, xi)) for xi in x]


def _select(cond, a, b):
    """``a`` if ``cond`` else ``b``, for a Python bool or a bool Tensor (``tnp.where``)."""
    if isinstance(cond, Tensor):
        return tnp.where(cond, a, b)
    return a if cond else b


# -- L-BFGS preconditioner (Optax's scale_by_lbfgs) ----------------------------------------------
@attrs.frozen
class ScaleByLBFGS(GradientTransformation):
    """Optax's ``scale_by_lbfgs``: multiply the updates by the L-BFGS approximation of the
    inverse Hessian; see :func:`scale_by_lbfgs`.

    State ``{"count": int, "params": ..., "updates": ..., "diff_params_memory": ...,
    "diff_updates_memory": ..., "weights_memory": ...}``: the previous parameters and updates,
    and per leaf a Tensor of shape ``(memory_size, *leaf.shape)`` holding the last differences
    (oldest first), with their weights ``1 / <s_i, y_i>`` (float64, shape ``(memory_size,)``).
    """

    memory_size: int = 10
    scale_init_precond: bool = True

    def __attrs_post_init__(self):
        _lbfgs_block_args("ScaleByLBFGS", self.memory_size, self.scale_init_precond)

    def init(self, params):
        leaves, treedef = _leaves("scale_by_lbfgs", params, "params")
        m = self.memory_size
        stacked = tree_unflatten(treedef, [tnp.zeros((m, *p.shape), dtype=p.dtype,
                                                     device=p.device) for p in leaves])
        return {
            "count": 0,
            "params": tree_zeros_like(params),
            "updates": tree_zeros_like(params),
            "diff_params_memory": stacked,
            "diff_updates_memory": stacked,
            "weights_memory": tnp.zeros((m,), dtype=np.float64,
                                        device=leaves[0].device if leaves else None),
        }

    def update(self, grads, state, params=None):
        where = "scale_by_lbfgs"
        if params is None:
            raise ValueError(f"{where}: needs params; call update(grads, state, params).")
        keys = {"count", "params", "updates", "diff_params_memory", "diff_updates_memory",
                "weights_memory"}
        if not isinstance(state, dict) or set(state) != keys:
            raise TypeError(f"{where}: state must be the dict from init with keys {sorted(keys)}")
        _check_match(where, grads, "grads", params, "params")
        _check_match(where, grads, "grads", state["params"], "state['params']")
        u, treedef = _leaves(where, grads, "grads")
        p, _ = _leaves(where, params, "params")
        prev_p = tree_leaves(state["params"])
        prev_u = tree_leaves(state["updates"])
        mem_s = tree_leaves(state["diff_params_memory"])
        mem_y = tree_leaves(state["diff_updates_memory"])
        weights = _f64(state["weights_memory"])
        count = _traced(state["count"])
        first = tnp.equal(count, 0) if isinstance(count, Tensor) else count == 0
        m = self.memory_size

        # 1. the newest pair (zero at the first step, where there is no previous point)
        s = [tnp.subtract(a, b) for a, b in zip(p, prev_p)]
        y = [tnp.subtract(a, b) for a, b in zip(u, prev_u)]
        if first is True:
            s = [tnp.zeros_like(x) for x in s]
            y = [tnp.zeros_like(x) for x in y]
        elif isinstance(first, Tensor):
            s = [tnp.where(first, tnp.zeros_like(x), x) for x in s]
            y = [tnp.where(first, tnp.zeros_like(x), x) for x in y]
        sy = _vdot(y, s)
        zero = tnp.equal(sy, 0.0)
        w = tnp.where(zero, 0.0, tnp.divide(1.0, tnp.where(zero, 1.0, sy)))
        mem_s = [tnp.concatenate([ms[1:], tnp.expand_dims(si, 0)], axis=0)
                 for ms, si in zip(mem_s, s)]
        mem_y = [tnp.concatenate([my[1:], tnp.expand_dims(yi, 0)], axis=0)
                 for my, yi in zip(mem_y, y)]
        weights = tnp.concatenate([weights[1:], tnp.reshape(w, (1,))])

        # 2. the initial inverse Hessian gamma * I
        if self.scale_init_precond:
            yy = _vdot(y, y)
            gamma = tnp.where(tnp.greater(yy, 0.0),
                              tnp.divide(sy, tnp.where(tnp.greater(yy, 0.0), yy, 1.0)), 1.0)
            norm = tnp.sqrt(_vdot([tnp.stop_gradient(x) for x in u],
                                  [tnp.stop_gradient(x) for x in u]))
            capped = tnp.minimum(1.0, tnp.divide(1.0, norm))
            gamma = _select(first, capped, gamma)
        else:
            gamma = 1.0

        # 3. the two-loop recursion, newest pair first, then oldest first
        q = list(u)
        alphas = []
        for i in reversed(range(m)):
            si = [x[i] for x in mem_s]
            yi = [x[i] for x in mem_y]
            a = tnp.multiply(weights[i], _vdot(si, q))
            q = _axpy(tnp.negative(a), yi, q)
            alphas.append(a)
        alphas.reverse()
        q = _scaled(gamma, q)
        for i in range(m):
            si = [x[i] for x in mem_s]
            yi = [x[i] for x in mem_y]
            b = tnp.multiply(weights[i], _vdot(yi, q))
            q = _axpy(tnp.subtract(alphas[i], b), si, q)
        return tree_unflatten(treedef, [tnp.astype(x, ui.dtype) for x, ui in zip(q, u)]), {
            "count": _next_count(state["count"]),
            "params": tree_unflatten(treedef, p),
            "updates": tree_unflatten(treedef, u),
            "diff_params_memory": tree_unflatten(treedef, mem_s),
            "diff_updates_memory": tree_unflatten(treedef, mem_y),
            "weights_memory": weights,
        }


def _lbfgs_block_args(where, memory_size, scale_init_precond) -> tuple:
    return (_count(where, "memory_size", memory_size, 1),
            _check_bool(where, "scale_init_precond", scale_init_precond))


def scale_by_lbfgs(memory_size: int = 10, scale_init_precond: bool = True) -> ScaleByLBFGS:
    """Precondition the updates (gradients) by L-BFGS (Optax's ``scale_by_lbfgs``).

    With ``s_i = p_{i+1} - p_i`` and ``y_i = g_{i+1} - g_i`` the last ``memory_size``
    differences of the parameters and gradients seen by ``update`` and ``rho_i = 1 / <s_i,
    y_i>`` (0 where that is 0), the update is ``H g`` by the two-loop recursion (Nocedal and
    Wright, Algorithm 7.4), starting from ``H_0 = gamma I`` with ``gamma = <s, y> / <y, y>`` of
    the newest pair (or ``min(1, 1 / ||g||)`` at the first step; 1 without
    ``scale_init_precond``). The memory is updated first with the pair ending at the current
    point, so the preconditioner changes once per accepted step when this is chained with a
    line search. The update is *not* negated: follow it with ``scale(-1)`` (as
    :func:`lbfgs` does).

    Args:
        memory_size: Number of pairs kept (an int ``>= 1``).
        scale_init_precond: Scale the initial inverse Hessian as above.

    Returns:
        A :class:`ScaleByLBFGS` transformation; ``update`` needs ``params``.

    Raises:
        TypeError / ValueError: if ``memory_size`` is not an int ``>= 1`` or
            ``scale_init_precond`` not a bool.

    References:
        Nocedal and Wright, *Numerical Optimization*, 2nd ed., Springer, 2006, Algorithms 7.4
        and 7.5; Liu and Nocedal, "On the limited memory BFGS method for large scale
        optimization", Mathematical Programming 45, 1989.
    """
    return ScaleByLBFGS(*_lbfgs_block_args("scale_by_lbfgs", memory_size, scale_init_precond))


# -- zoom line search (Optax's scale_by_zoom_linesearch) -----------------------------------------
def _cubicmin(a, fa, fpa, b, fb, c, fc):
    """The critical point of the cubic through ``(a, fa)`` (slope ``fpa``), ``(b, fb)`` and
    ``(c, fc)`` (NaN if it has none)."""
    db, dc = b - a, c - a
    denom = (db * dc) ** 2 * (db - dc)
    e1, e2 = fb - fa - fpa * db, fc - fa - fpa * dc
    big_a = (dc**2 * e1 - db**2 * e2) / denom
    big_b = (-(dc**3) * e1 + db**3 * e2) / denom
    radical = big_b * big_b - 3.0 * big_a * fpa
    return a + (-big_b + tnp.sqrt(radical)) / (3.0 * big_a)


def _quadmin(a, fa, fpa, b, fb):
    """The critical point of the parabola through ``(a, fa)`` (slope ``fpa``) and ``(b, fb)``."""
    db = b - a
    big_b = (fb - fa - fpa * db) / (db**2)
    return a - fpa / (2.0 * big_b)


def _nan_to_inf(x):
    return tnp.where(tnp.isnan(x), math.inf, x)


@attrs.frozen
class ScaleByZoomLinesearch(GradientTransformation):
    """Optax's ``scale_by_zoom_linesearch``; see :func:`scale_by_zoom_linesearch`.

    State ``{"learning_rate": the accepted step size, "value": the objective there, "grad":
    its gradient there, "info": {"num_linesearch_steps", "decrease_error",
    "curvature_error"}}`` (numbers: 0-d Tensors after the first step).
    """

    max_linesearch_steps: int
    max_learning_rate: float | None = None
    tol: float = 0.0
    increase_factor: float = 2.0
    slope_rtol: float = 1e-4
    curv_rtol: float = 0.9
    approx_dec_rtol: float | None = 1e-6
    stepsize_precision: float = 1e-5
    initial_guess_strategy: str = "keep"

    def __attrs_post_init__(self):
        _zoom_args("ScaleByZoomLinesearch", *attrs.astuple(self, recurse=False))

    def init(self, params):
        return {
            "learning_rate": 1.0,
            "value": math.inf,
            "grad": tree_zeros_like(params),
            "info": {"num_linesearch_steps": 0, "decrease_error": math.inf,
                     "curvature_error": math.inf},
        }

    # the two criteria ---------------------------------------------------------------------
    def _decrease_error(self, stepsize, value, slope, value_init, slope_init):
        err = value - value_init - self.slope_rtol * stepsize * slope_init
        if self.approx_dec_rtol is not None:  # Hager and Zhang's approximate Wolfe condition
            approx = slope - (2.0 * self.slope_rtol - 1.0) * slope_init
            delta = value - value_init - self.approx_dec_rtol * tnp.abs(value_init)
            err = tnp.minimum(tnp.maximum(approx, delta), err)
        return _nan_to_inf(tnp.maximum(err, 0.0))

    def _curvature_error(self, slope, slope_init):
        err = tnp.abs(slope) - self.curv_rtol * tnp.abs(slope_init)
        return _nan_to_inf(tnp.maximum(err, 0.0))

    def update(self, grads, state, params=None, *, value=None, grad=None, value_fn=None,
               **extra_args):
        where = "scale_by_zoom_linesearch"
        if params is None:
            raise ValueError(f"{where}: needs params; call update(updates, state, params, "
                             "value=loss, grad=grads, value_fn=loss_fn).")
        if value is None or grad is None or value_fn is None:
            missing = [n for n, v in (("value", value), ("grad", grad), ("value_fn", value_fn))
                       if v is None]
            raise TypeError(
                f"{where}: update needs {', '.join(missing)}: call update(updates, state, params, "
                "value=loss, grad=grads, value_fn=loss_fn) (the loss and its gradient at params, "
                "and the loss function, which the line search evaluates along the updates)."
            )
        if not callable(value_fn):
            raise TypeError(f"{where}: value_fn must be callable, got {type(value_fn).__name__}")
        keys = {"learning_rate", "value", "grad", "info"}
        if not isinstance(state, dict) or set(state) != keys:
            raise TypeError(f"{where}: state must be the dict from init with keys {sorted(keys)}")
        fn_kwargs = _kwargs_for(where, value_fn, extra_args)
        _check_match(where, grads, "updates", params, "params")
        _check_match(where, grad, "grad", params, "params")
        d, treedef = _leaves(where, grads, "updates")
        x, _ = _leaves(where, params, "params")
        g0 = _leaves(where, grad, "grad")[0]
        value_and_grad = _value_and_grad(value_fn)

        def evaluate(stepsize):
            point = tree_unflatten(treedef, _axpy(stepsize, d, x))
            val, gr = value_and_grad(point, **fn_kwargs)
            val = _scalar_loss(where, val)
            gl = _leaves(where, gr, "the gradient of value_fn")[0]
            return _f64(val), gl, _vdot(gl, d)

        slope_init = _vdot(d, g0)
        value_init = _f64(_scalar_loss(where, value), slope_init.device)
        guess = 1.0 if self.initial_guess_strategy == "one" else state["learning_rate"]
        ls = _LineSearchRun(self, evaluate, value_init, slope_init, g0,
                            _f64(guess, slope_init.device))
        ls.run()
        rate = ls.stepsize
        out = [tnp.multiply(di, _like_leaf(rate, di)) for di in d]
        return tree_unflatten(treedef, out), {
            "learning_rate": rate,
            "value": ls.value,
            "grad": tree_unflatten(treedef, ls.grad),
            "info": {"num_linesearch_steps": ls.count, "decrease_error": ls.decrease_error,
                     "curvature_error": ls.curvature_error},
        }


class _LineSearchRun:
    """One run of the zoom line search (Nocedal and Wright, Algorithms 3.5 and 3.6, with Hager
    and Zhang's approximate decrease condition), as Optax's ``zoom_linesearch``: every value a
    0-d float64 Tensor, every decision a Python ``if`` on one (a guard under ``tg.jit``)."""

    def __init__(self, tx: ScaleByZoomLinesearch, evaluate, value_init, slope_init, grad, guess):
        self.tx, self.evaluate = tx, evaluate
        self.value_init, self.slope_init = value_init, slope_init
        self.guess = guess
        zero, inf = _f64(0.0, slope_init.device), _f64(math.inf, slope_init.device)
        self.count = 0
        self.stepsize, self.value, self.grad, self.slope = zero, value_init, grad, slope_init
        self.decrease_error = self.curvature_error = self.error = inf
        self.interval_found = self.done = self.failed = False
        self.low = self.high = self.cubic_ref = zero
        self.value_low = self.value_high = self.value_cubic_ref = value_init
        self.slope_low = self.slope_high = slope_init
        self.safe_stepsize, self.safe_value, self.safe_grad = zero, value_init, grad

    def run(self) -> None:
        while not (self.done or self.failed):
            if self.interval_found:
                self._zoom()
            else:
                self._search_interval()
            if self.failed:
                self._safe_step()

    def _errors(self, stepsize, value, slope):
        dec = self.tx._decrease_error(stepsize, value, slope, self.value_init, self.slope_init)
        curv = self.tx._curvature_error(slope, self.slope_init)
        return dec, curv, tnp.maximum(dec, curv)

    def _search_interval(self) -> None:
        tx = self.tx
        new = self.guess if self.count == 0 else tx.increase_factor * self.stepsize
        max_reached = False
        if tx.max_learning_rate is not None:
            max_reached = bool(new >= tx.max_learning_rate)
            new = tnp.minimum(new, tx.max_learning_rate)
        value, grad, slope = self.evaluate(new)
        dec, curv, err = self._errors(new, value, slope)
        if bool(dec <= tx.tol):  # a sufficient decrease: kept in case curvature never holds
            self.safe_stepsize, self.safe_value, self.safe_grad = new, value, grad
        set_high = bool(dec > 0.0) or (self.count > 0 and bool(value >= self.value))
        set_low = bool(slope >= 0.0) and not set_high
        prev = (self.stepsize, self.value, self.slope)
        if set_low:
            (self.low, self.value_low, self.slope_low) = (new, value, slope)
            (self.high, self.value_high, self.slope_high) = prev
        else:
            (self.low, self.value_low, self.slope_low) = prev
            (self.high, self.value_high, self.slope_high) = (new, value, slope)
        self.cubic_ref, self.value_cubic_ref = self.low, self.value_low
        good = bool(err <= tx.tol)
        self.interval_found = set_high or set_low or good
        self.done = good or (max_reached and not self.interval_found)
        self.failed = (self.count + 1 >= tx.max_linesearch_steps) and not self.done
        self.count += 1
        self.stepsize, self.value, self.grad, self.slope = new, value, grad, slope
        self.decrease_error, self.curvature_error, self.error = dec, curv, err

    def _zoom(self) -> None:
        tx = self.tx
        low, high = self.low, self.high
        delta = tnp.abs(high - low)
        left, right = tnp.minimum(high, low), tnp.maximum(high, low)
        too_small = bool(delta <= tx.stepsize_precision)
        cubic = _cubicmin(low, self.value_low, self.slope_low, high, self.value_high,
                          self.cubic_ref, self.value_cubic_ref)
        quad = _quadmin(low, self.value_low, self.slope_low, high, self.value_high)
        if bool(cubic > left + 0.2 * delta) and bool(cubic < right - 0.2 * delta):
            middle = cubic
        elif bool(quad > left + 0.1 * delta) and bool(quad < right - 0.1 * delta):
            middle = quad
        else:
            middle = (low + high) / 2.0
        value, grad, slope = self.evaluate(middle)
        dec, curv, err = self._errors(middle, value, slope)
        if bool(dec <= tx.tol) and bool(value < self.safe_value):
            self.safe_stepsize, self.safe_value, self.safe_grad = middle, value, grad
        self.done = bool(err <= tx.tol)
        high_to_middle = bool(dec > 0.0) or bool(value >= self.value_low)
        high_to_low = (not high_to_middle) and bool(slope * (high - low) >= 0.0)
        old_low = (self.low, self.value_low, self.slope_low)
        old_high = (self.high, self.value_high)
        if high_to_middle:
            (self.high, self.value_high, self.slope_high) = (middle, value, slope)
        elif high_to_low:
            (self.high, self.value_high, self.slope_high) = old_low
        if not high_to_middle:
            (self.low, self.value_low, self.slope_low) = (middle, value, slope)
        if high_to_middle or high_to_low:
            self.cubic_ref, self.value_cubic_ref = old_high
        else:
            self.cubic_ref, self.value_cubic_ref = old_low[:2]
        presumably = (self.count + 1 >= tx.max_linesearch_steps) or (
            too_small and bool(self.safe_stepsize > 0.0))
        self.failed = presumably and not self.done
        self.count += 1
        self.stepsize, self.value, self.grad, self.slope = middle, value, grad, slope
        self.decrease_error, self.curvature_error, self.error = dec, curv, err

    def _safe_step(self) -> None:
        """Out of steps: take the best point with a sufficient decrease, if any."""
        if bool(self.safe_stepsize > 0.0) or bool(tnp.isinf(self.decrease_error)):
            self.stepsize, self.value, self.grad = (self.safe_stepsize, self.safe_value,
                                                    self.safe_grad)


def _scalar_loss(where: str, value):
    value = _traced(value)
    if isinstance(value, Tensor):
        if value.shape != () or value.dtype.kind not in "iuf":
            raise ValueError(f"{where}: the loss must be a real scalar, got shape {value.shape} "
                             f"and dtype {value.dtype}")
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{where}: the loss must be a number or a 0-d Tensor, got "
                        f"{type(value).__name__}")
    return value


def _kwargs_for(where: str, value_fn, extra_args: dict) -> dict:
    """The keyword arguments of ``extra_args`` that ``value_fn`` takes (all, with
    ``**kwargs``); any other is a TypeError (Optax's rule)."""
    if not extra_args:
        return {}
    try:
        params = inspect.signature(value_fn).parameters.values()
    except (TypeError, ValueError):
        return dict(extra_args)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return dict(extra_args)
    names = {p.name for p in params}
    unused = sorted(k for k in extra_args if k not in names)
    if unused:
        raise TypeError(
            f"{where}: keyword arguments {unused} are not arguments of value_fn; the extra "
            "arguments of update are the data value_fn takes besides the parameters."
        )
    return dict(extra_args)


def _zoom_args(where, max_linesearch_steps, max_learning_rate, tol, increase_factor, slope_rtol,
               curv_rtol, approx_dec_rtol, stepsize_precision, initial_guess_strategy) -> tuple:
    n = _count(where, "max_linesearch_steps", max_linesearch_steps, 1)
    if max_learning_rate is not None:
        max_learning_rate = _check_number(where, "max_learning_rate", max_learning_rate)
        if not (math.isfinite(max_learning_rate) and max_learning_rate > 0):
            raise ValueError(f"{where}: max_learning_rate must be None or a finite number > 0, "
                             f"got {max_learning_rate!r}")
    increase_factor = _check_number(where, "increase_factor", increase_factor)
    if not (math.isfinite(increase_factor) and increase_factor > 1.0):
        raise ValueError(f"{where}: increase_factor must be a finite number > 1, got "
                         f"{increase_factor!r}")
    slope_rtol = _check_number(where, "slope_rtol", slope_rtol)
    if not 0.0 <= slope_rtol < 1.0:
        raise ValueError(f"{where}: slope_rtol must be in [0, 1), got {slope_rtol!r}")
    curv_rtol = _check_number(where, "curv_rtol", curv_rtol)
    if not curv_rtol >= 0.0:  # inf: no curvature condition (a backtracking search)
        raise ValueError(f"{where}: curv_rtol must be a number >= 0 (inf allowed), got "
                         f"{curv_rtol!r}")
    if approx_dec_rtol is not None:
        approx_dec_rtol = _check_nonneg(where, "approx_dec_rtol", approx_dec_rtol)
    _choice(where, "initial_guess_strategy", initial_guess_strategy, ("one", "keep"))
    return (int(n), max_learning_rate, _check_nonneg(where, "tol", tol), increase_factor,
            slope_rtol, curv_rtol, approx_dec_rtol,
            _check_nonneg(where, "stepsize_precision", stepsize_precision),
            initial_guess_strategy)


def scale_by_zoom_linesearch(
    max_linesearch_steps: int,
    max_learning_rate: float | None = None,
    tol: float = 0.0,
    increase_factor: float = 2.0,
    slope_rtol: float = 1e-4,
    curv_rtol: float = 0.9,
    approx_dec_rtol: float | None = 1e-6,
    stepsize_precision: float = 1e-5,
    initial_guess_strategy: str = "keep",
) -> ScaleByZoomLinesearch:
    """A line search for the strong Wolfe conditions (Optax's ``scale_by_zoom_linesearch``).

    ``update(updates, state, params, value=f(params), grad=grad_f(params), value_fn=f,
    **data)`` searches a step size ``eta`` along the direction ``u = updates`` with

    - sufficient decrease: ``f(p + eta u) <= f(p) + slope_rtol * eta <u, grad f(p)> + tol``,
      or, near a minimum (``f(p + eta u) <= f(p) + approx_dec_rtol |f(p)|``), Hager and
      Zhang's approximate form ``<grad f(p + eta u), u> <= (2 slope_rtol - 1) <grad f(p), u>``;
    - small curvature: ``|<grad f(p + eta u), u>| <= curv_rtol |<grad f(p), u>| + tol``;

    first growing ``eta`` (from the initial guess, by ``increase_factor``) until an interval
    holding such a step is found, then narrowing it by cubic, quadratic or bisection steps
    (Nocedal and Wright, Algorithms 3.5 and 3.6). After ``max_linesearch_steps`` evaluations
    (or an interval below ``stepsize_precision``) it takes the best step with a sufficient
    decrease found, if any. The updates are ``eta * u``. Keyword arguments beyond ``value``,
    ``grad`` and ``value_fn`` are passed to ``value_fn`` (its data); one it does not take is a
    TypeError. The value and gradient at the accepted point are kept in the state (see
    :func:`value_and_grad_from_state`).

    The search is Optax's, decision for decision. Under ``tg.jit`` each decision is a guard:
    a step whose search takes another path records a new program (the last few are kept).

    Args:
        max_linesearch_steps: Most evaluations of ``value_fn`` per step (an int ``>= 1``).
        max_learning_rate: ``None`` or the largest step size (``> 0``).
        tol: Tolerance added to both conditions (``>= 0``).
        increase_factor: Growth of the step size while searching the interval (``> 1``).
        slope_rtol: The sufficient-decrease constant ``c1`` in ``[0, 1)``.
        curv_rtol: The curvature constant ``c2 >= 0`` (``math.inf``: no curvature condition).
        approx_dec_rtol: ``None`` (Armijo's condition only) or the relative tolerance
            ``>= 0`` of the approximate condition.
        stepsize_precision: The interval size below which a step with sufficient decrease is
            accepted (``>= 0``).
        initial_guess_strategy: ``"keep"`` (start at the last step size) or ``"one"``.

    Returns:
        A :class:`ScaleByZoomLinesearch` transformation.

    Raises:
        TypeError / ValueError: on arguments of the wrong type or out of range; ``update``
            raises TypeError without ``value``, ``grad`` or ``value_fn``.

    References:
        Nocedal and Wright, *Numerical Optimization*, 2nd ed., 2006, Algorithms 3.5 and 3.6;
        Hager and Zhang, "Algorithm 851: CG_DESCENT", ACM TOMS 32(1), 2006.
    """
    return ScaleByZoomLinesearch(*_zoom_args(
        "scale_by_zoom_linesearch", max_linesearch_steps, max_learning_rate, tol,
        increase_factor, slope_rtol, curv_rtol, approx_dec_rtol, stepsize_precision,
        initial_guess_strategy))


_DEFAULT_LINESEARCH = ScaleByZoomLinesearch(20, initial_guess_strategy="one")


def lbfgs(
    learning_rate: float | Schedule | None = None,
    memory_size: int = 10,
    scale_init_precond: bool = True,
    linesearch: GradientTransformation | None = _DEFAULT_LINESEARCH,
) -> GradientTransformation:
    """L-BFGS with a zoom line search (Optax's ``lbfgs``, same defaults).

    ``chain(scale_by_lbfgs(memory_size, scale_init_precond), scale(-1) or
    scale_by_learning_rate(learning_rate), linesearch)``: the L-BFGS direction ``-H g``, then
    the line search along it. The default line search is
    ``scale_by_zoom_linesearch(max_linesearch_steps=20, initial_guess_strategy="one")``, whose
    ``update`` needs the loss: call ``tx.update(grads, state, params, value=loss, grad=grads,
    value_fn=loss_fn)`` (and ``value_and_grad_from_state(loss_fn)`` reuses the value and
    gradient the search computed at the new point). With ``linesearch=None`` the step is the
    direction times the learning rate.

    For PyTorch's ``torch.optim.LBFGS`` (several iterations per ``step(closure)``, its own
    strong-Wolfe search) use :class:`~tapegrad.optim.LBFGS`.

    Args:
        learning_rate: ``None`` (1, the line search sets the step) or a number/schedule.
        memory_size: Pairs kept (an int ``>= 1``).
        scale_init_precond: Scale the initial inverse Hessian (see :func:`scale_by_lbfgs`).
        linesearch: A transformation run last (``None``: none).

    Returns:
        The chain.

    Raises:
        TypeError / ValueError: on arguments of the wrong type or out of range.

    References:
        Liu and Nocedal, "On the limited memory BFGS method for large scale optimization",
        Mathematical Programming 45, 1989; Nocedal and Wright, *Numerical Optimization*, 2006.
    """
    where = "lbfgs"
    block = ScaleByLBFGS(*_lbfgs_block_args(where, memory_size, scale_init_precond))
    scaling = Scale(-1.0) if learning_rate is None else ScaleByLearningRate(
        _check_lr(where, learning_rate))
    if linesearch is not None and not isinstance(linesearch, GradientTransformation):
        raise TypeError(f"{where}: linesearch must be a gradient transformation or None, got "
                        f"{type(linesearch).__name__}")
    return chain(block, scaling, Identity() if linesearch is None else linesearch)


def _find_value_and_grad(state):
    """The ``(value, grad)`` a line search keeps in ``state``: the unique dict with both
    keys, searched through dicts, tuples and lists."""
    found = _find_dicts(state, lambda d: "value" in d and "grad" in d)
    if len(found) != 1:
        raise ValueError(
            "value_and_grad_from_state: the state must hold exactly one line-search state (a "
            f"dict with 'value' and 'grad'), found {len(found)}; use it with optim.lbfgs() or a "
            "chain ending in scale_by_zoom_linesearch."
        )
    return found[0]["value"], found[0]["grad"]


def value_and_grad_from_state(value_fn: Callable[..., Any]) -> Callable[..., tuple]:
    """Like ``tg.value_and_grad(value_fn)``, but reusing the value and gradient a line search
    computed at the current point (Optax's ``value_and_grad_from_state``).

    The returned function is called as ``fn(params, *args, state=opt_state, **kwargs)``. It
    returns the ``(value, grad)`` kept in ``state`` by :func:`scale_by_zoom_linesearch` (the
    line search's last accepted point, which is ``params`` after ``apply_updates``); where
    that value is not finite (the first step), it computes
    ``tg.value_and_grad(value_fn)(params, *args, **kwargs)``. Use it for deterministic
    objectives only: with a new batch at every step the stored values are stale.

    Raises:
        TypeError: if ``value_fn`` is not callable.
        ValueError: if ``state`` holds no line-search state (or several).
    """
    if not callable(value_fn):
        raise TypeError(f"value_and_grad_from_state: value_fn must be callable, got "
                        f"{type(value_fn).__name__}")
    compute = _value_and_grad(value_fn)

    def fn(params, *args, state, **kwargs):
        value, grad = _find_value_and_grad(state)
        v = _traced(value)
        finite = bool(tnp.isfinite(v)) if isinstance(v, Tensor) else math.isfinite(float(v))
        if finite:
            return value, grad
        return compute(params, *args, **kwargs)

    return fn


# -- PyTorch's L-BFGS (the algorithm of torch.optim.LBFGS.step) ----------------------------------
def _cubic_interpolate(x1, f1, g1, x2, f2, g2, bounds=None) -> float:
    """The minimizer of the cubic through two points with their slopes, clamped to
    ``bounds`` (the bracket's ends by default); the midpoint if the cubic has none."""
    lo, hi = bounds if bounds is not None else ((x1, x2) if x1 <= x2 else (x2, x1))
    d1 = g1 + g2 - 3.0 * (f1 - f2) / (x1 - x2)
    d2_square = d1 * d1 - g1 * g2
    if d2_square >= 0:
        d2 = math.sqrt(d2_square)
        if x1 <= x2:
            pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2.0 * d2))
        else:
            pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2.0 * d2))
        return min(max(pos, lo), hi)
    return (lo + hi) / 2.0


def _dot(a: Tensor, b: Tensor) -> float:
    return float(tnp.dot(a, b))


def _strong_wolfe(evaluate, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9, max_ls=25):
    """PyTorch's strong-Wolfe line search along ``d`` from step ``t`` (``evaluate(t) -> (loss,
    flat gradient)``): a bracketing phase, then a zoom by safeguarded cubic interpolation.

    Returns ``(loss, flat gradient, t, evaluations)`` at the accepted step.

    References:
        Nocedal and Wright, *Numerical Optimization*, 2006, Algorithms 3.5 and 3.6; Schmidt,
        minFunc (the safeguards).
    """
    d_norm = float(tnp.max(tnp.abs(d)))
    f_new, g_new = evaluate(t)
    evals = 1
    gtd_new = _dot(g_new, d)
    t_prev, f_prev, g_prev, gtd_prev = 0.0, f, g, gtd
    done = False
    it = 0
    bracket: list = []
    bracket_f: list = []
    bracket_g: list = []
    bracket_gtd: list = []
    while it < max_ls:  # bracketing
        if f_new > f + c1 * t * gtd or (it > 1 and f_new >= f_prev):
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new], [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, bracket_f, bracket_g, bracket_gtd = [t], [f_new], [g_new], [gtd_new]
            done = True
            break
        if gtd_new >= 0:
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new], [gtd_prev, gtd_new]
            break
        lo, hi = t + 0.01 * (t - t_prev), t * 10.0
        prev_t = t
        t = _cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, bounds=(lo, hi))
        t_prev, f_prev, g_prev, gtd_prev = prev_t, f_new, g_new, gtd_new
        f_new, g_new = evaluate(t)
        evals += 1
        gtd_new = _dot(g_new, d)
        it += 1
    if it == max_ls:  # no bracket: between 0 and the last step
        bracket, bracket_f, bracket_g = [0.0, t], [f, f_new], [g, g_new]
        bracket_gtd = [gtd, gtd_new]
    insuf_progress = False
    low, high = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and it < max_ls:  # zoom
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = _cubic_interpolate(bracket[0], bracket_f[0], bracket_gtd[0], bracket[1],
                               bracket_f[1], bracket_gtd[1])
        top, bottom = max(bracket), min(bracket)
        eps = 0.1 * (top - bottom)
        if min(top - t, t - bottom) < eps:  # too close to an end: move away from it
            if insuf_progress or t >= top or t <= bottom:
                t = top - eps if abs(t - top) < abs(t - bottom) else bottom + eps
                insuf_progress = False
            else:
                insuf_progress = True
        else:
            insuf_progress = False
        f_new, g_new = evaluate(t)
        evals += 1
        gtd_new = _dot(g_new, d)
        it += 1
        if f_new > f + c1 * t * gtd or f_new >= bracket_f[low]:
            bracket[high], bracket_f[high], bracket_g[high] = t, f_new, g_new
            bracket_gtd[high] = gtd_new
            low, high = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high] - bracket[low]) >= 0:
                bracket[high], bracket_f[high] = bracket[low], bracket_f[low]
                bracket_g[high], bracket_gtd[high] = bracket_g[low], bracket_gtd[low]
            bracket[low], bracket_f[low], bracket_g[low] = t, f_new, g_new
            bracket_gtd[low] = gtd_new
    return bracket_f[low], bracket_g[low], bracket[low], evals


def torch_lbfgs_init() -> dict:
    """The state of :func:`torch_lbfgs_step` before the first step (PyTorch's names)."""
    return {"func_evals": 0, "n_iter": 0, "d": None, "t": None, "old_dirs": [], "old_stps": [],
            "ro": [], "H_diag": 1.0, "prev_flat_grad": None, "prev_loss": None}


def torch_lbfgs_step(evaluate, x: Tensor, state: dict, *, lr: float, max_iter: int,
                     max_eval: int, tolerance_grad: float, tolerance_change: float,
                     history_size: int, line_search_fn: str | None):
    """One ``step(closure)`` of PyTorch's L-BFGS on a flat parameter vector.

    Up to ``max_iter`` iterations: the two-loop direction from the last ``history_size``
    pairs (a pair is kept when ``<y, s> > 1e-10``), a step of ``lr`` (of ``min(1, 1/||g||_1)
    * lr`` at the very first iteration), or the strong-Wolfe step size with
    ``line_search_fn="strong_wolfe"``; it stops early when the gradient's largest element is
    at most ``tolerance_grad``, the step or the loss changes by less than
    ``tolerance_change``, the directional derivative is above ``-tolerance_change``, or
    ``max_eval`` evaluations are spent.

    Args:
        evaluate: ``x -> (loss as a float, flat gradient Tensor)`` (the closure at ``x``).
        x: The flat parameters (1-d floating Tensor).
        state: From :func:`torch_lbfgs_init` or the previous step (not modified).

    Returns:
        ``(new x, new state, the loss at the start)``.

    References:
        Nocedal and Wright, *Numerical Optimization*, 2006, Algorithm 7.4; PyTorch's
        ``torch.optim.LBFGS`` (after Schmidt's minFunc).
    """
    st = dict(state)
    st["old_dirs"], st["old_stps"], st["ro"] = list(st["old_dirs"]), list(st["old_stps"]), list(
        st["ro"])
    orig_loss, flat_grad = evaluate(x)
    loss = orig_loss
    evals = 1
    st["func_evals"] += 1
    if float(tnp.max(tnp.abs(flat_grad))) <= tolerance_grad:
        return x, st, orig_loss
    d, t = st["d"], st["t"]
    old_dirs, old_stps, ro, h_diag = st["old_dirs"], st["old_stps"], st["ro"], st["H_diag"]
    prev_flat_grad, prev_loss = st["prev_flat_grad"], st["prev_loss"]
    n_iter = 0
    while n_iter < max_iter:
        n_iter += 1
        st["n_iter"] += 1
        if st["n_iter"] == 1:
            d = tnp.negative(flat_grad)
            old_dirs, old_stps, ro, h_diag = [], [], [], 1.0
        else:
            y = tnp.subtract(flat_grad, prev_flat_grad)
            s = tnp.multiply(d, t)
            ys = _dot(y, s)
            if ys > 1e-10:  # keep the pair (curvature condition)
                if len(old_dirs) == history_size:
                    old_dirs.pop(0)
                    old_stps.pop(0)
                    ro.pop(0)
                old_dirs.append(y)
                old_stps.append(s)
                ro.append(1.0 / ys)
                h_diag = ys / _dot(y, y)
            al = [0.0] * len(old_dirs)
            q = tnp.negative(flat_grad)
            for i in range(len(old_dirs) - 1, -1, -1):
                al[i] = _dot(old_stps[i], q) * ro[i]
                q = tnp.subtract(q, tnp.multiply(old_dirs[i], al[i]))
            r = tnp.multiply(q, h_diag)
            for i in range(len(old_dirs)):
                be_i = _dot(old_dirs[i], r) * ro[i]
                r = tnp.add(r, tnp.multiply(old_stps[i], al[i] - be_i))
            d = r
        prev_flat_grad, prev_loss = flat_grad, loss
        if st["n_iter"] == 1:
            t = min(1.0, 1.0 / float(tnp.sum(tnp.abs(flat_grad)))) * lr
        else:
            t = lr
        gtd = _dot(flat_grad, d)
        if gtd > -tolerance_change:
            break
        ls_evals = 0
        if line_search_fn is not None:
            def along(step, base=x, direction=d):
                return evaluate(tnp.add(base, tnp.multiply(direction, step)))

            loss, flat_grad, t, ls_evals = _strong_wolfe(along, t, d, loss, flat_grad, gtd,
                                                         max_ls=max_eval - evals)
            x = tnp.add(x, tnp.multiply(d, t))
            opt_cond = float(tnp.max(tnp.abs(flat_grad))) <= tolerance_grad
        else:
            x = tnp.add(x, tnp.multiply(d, t))
            opt_cond = False
            if n_iter != max_iter:
                loss, flat_grad = evaluate(x)
                opt_cond = float(tnp.max(tnp.abs(flat_grad))) <= tolerance_grad
                ls_evals = 1
        evals += ls_evals
        st["func_evals"] += ls_evals
        if n_iter == max_iter or evals >= max_eval or opt_cond:
            break
        if float(tnp.max(tnp.abs(tnp.multiply(d, t)))) <= tolerance_change:
            break
        if abs(loss - prev_loss) < tolerance_change:
            break
    st.update(d=d, t=t, old_dirs=old_dirs, old_stps=old_stps, ro=ro, H_diag=h_diag,
              prev_flat_grad=prev_flat_grad, prev_loss=prev_loss)
    return x, st, orig_loss


strict_all(globals(), __all__)  # an unknown keyword is a TypeError naming the closest valid one
