"""More of Optax's gradient transformations and optimizers, and the blocks of PyTorch's
``NAdam``/``RAdam``.

Optimizers (Optax's names, signatures and defaults): :func:`nadam`, :func:`radam`,
:func:`adamax`, :func:`adadelta`, :func:`adabelief`, :func:`lamb`, :func:`lars`,
:func:`adafactor`, :func:`sm3`, :func:`novograd`, :func:`noisy_sgd`. Building blocks:
:func:`scale_by_radam`, :func:`scale_by_adamax`, :func:`scale_by_adadelta`,
:func:`scale_by_belief`, :func:`scale_by_trust_ratio`, :func:`scale_by_factored_rms`,
:func:`scale_by_sm3`, :func:`scale_by_novograd`, :func:`scale_by_schedule`,
:func:`scale_by_param_block_rms`, :func:`clip_by_block_rms`, :func:`centralize`,
:func:`zero_nans`, :func:`add_noise`, :func:`ema` (of the updates, as Optax's), and
:func:`parameter_ema` (of the parameters, as PyTorch's ``AveragedModel`` with an EMA), with
Optax's helpers :func:`incremental_update` and :func:`periodic_update`.

Every transformation here is a frozen ``attrs`` record with ``init``/``update`` like those of
:mod:`tapegrad.optim.transforms`: states are dicts of Python numbers (step counters; 0-d
Tensors under ``tg.jit``) and pytrees shaped like the parameters; updates keep each leaf's
dtype; the math is written with :mod:`tapegrad.numpy`, so a step is differentiable and runs
under ``tg.jit`` (with the counters as int64 Tensors, every step decision a ``tnp.where``).

Example:
    >>> import numpy as np
    >>> import tapegrad as tg
    >>> from tapegrad import optim
    >>> params = {"w": tg.Tensor(np.array([1.0, -2.0]))}
    >>> tx = optim.radam(0.1)
    >>> state = tx.init(params)
    >>> params, state = optim.apply_gradients(tx, {"w": tg.Tensor(np.array([0.5, 0.5]))},
    ...                                       state, params)
    >>> params["w"].numpy().round(6).tolist()      # the first steps are SGD with momentum
    [0.95, -2.05]
"""

from __future__ import annotations

import math
from typing import Any

import attrs
import numpy as np

from tapegrad import numpy as tnp
from tapegrad import random as _random
from tapegrad.core._keywords import strict_all
from tapegrad.core.tensor import Tensor
from tapegrad.core.tree import tree_leaves, tree_unflatten
from tapegrad.optim.combinators import add_decayed_weights
from tapegrad.optim.transforms import (
    AddDecayedWeights,
    GradientTransformation,
    Scale,
    ScaleByLearningRate,
    Schedule,
    Trace,
    _check_bool,
    _check_lr,
    _check_match,
    _check_nonneg,
    _check_number,
    _check_positive,
    _check_unit,
    _count,
    _leaves,
    _like_leaf,
    _next_count,
    _traced,
    _zeros,
    chain,
    tree_zeros_like,
)

__all__ = [
    "ScaleByOptaxAdam",
    "ScaleByRAdam",
    "ScaleByAdamax",
    "ScaleByAdaDelta",
    "ScaleByBelief",
    "ScaleByTrustRatio",
    "ScaleByFactoredRMS",
    "ClipByBlockRMS",
    "ScaleByParamBlockRMS",
    "ScaleBySM3",
    "ScaleByNovograd",
    "ScaleBySchedule",
    "Centralize",
    "ZeroNans",
    "AddNoise",
    "EMA",
    "ParameterEMA",
    "ScaleByTorchNAdam",
    "ScaleByTorchRAdam",
    "nadam",
    "radam",
    "adamax",
    "adadelta",
    "adabelief",
    "lamb",
    "lars",
    "adafactor",
    "sm3",
    "novograd",
    "noisy_sgd",
    "scale_by_radam",
    "scale_by_adamax",
    "scale_by_adadelta",
    "scale_by_belief",
    "scale_by_trust_ratio",
    "scale_by_factored_rms",
    "clip_by_block_rms",
    "scale_by_param_block_rms",
    "scale_by_sm3",
    "scale_by_novograd",
    "scale_by_schedule",
    "centralize",
    "zero_nans",
    "add_noise",
    "ema",
    "parameter_ema",
    "incremental_update",
    "periodic_update",
]


# -- helpers ------------------------------------------------------------------------------------
def _is_tensor(x) -> bool:
    return isinstance(x, Tensor)


def _pick(cond, a, b):
    """``a`` where ``cond`` else ``b``: a Python decision for a Python bool, ``tnp.where`` for
    a bool Tensor (a counter under ``tg.jit``)."""
    if _is_tensor(cond):
        return tnp.where(cond, a, b)
    return a if cond else b


def _eq(count, k: int):
    """``count == k`` as a Python bool, or a bool Tensor for a Tensor counter."""
    count = _traced(count)
    return tnp.equal(count, k) if _is_tensor(count) else count == k


def _float_count(t):
    """A step count for arithmetic: a Python int stays one; a Tensor becomes float64."""
    return tnp.astype(t, np.float64) if _is_tensor(t) else t


def _bias_corrected(x: Tensor, decay: float, t) -> Tensor:
    """``x / (1 - decay**t)`` (Optax's ``bias_correction``), the divisor cast to x's dtype."""
    c = 1.0 - decay ** _float_count(t)
    return tnp.divide(x, _like_leaf(c, x))


def _check_optional(where: str, name: str, value, check):
    return None if value is None else check(where, name, value)


def _check_finite(where: str, name: str, value) -> float:
    value = _check_number(where, name, value)
    if not math.isfinite(value):
        raise ValueError(f"{where}: {name} must be a finite number, got {value!r}")
    return value


def _need_params(where: str, params, grads) -> None:
    if params is None:
        raise ValueError(f"{where}: needs params; call update(grads, state, params).")
    _check_match(where, grads, "grads", params, "params")


def _safe_norm(t: Tensor, min_norm: float) -> Tensor:
    """``max(norm(t), min_norm)`` with a finite gradient where the norm is at most
    ``min_norm`` (Optax's ``numerics.safe_norm``)."""
    sq = tnp.sum(tnp.square(t))
    if min_norm <= 0.0:
        return tnp.sqrt(sq)
    small = tnp.less_equal(sq, min_norm * min_norm)
    return tnp.where(small, _like_leaf(min_norm, t), tnp.sqrt(tnp.where(small, 1.0, sq)))


def _rms(t: Tensor) -> Tensor:
    """Root mean square of a leaf (0 for a leaf without elements)."""
    if t.size == 0:
        return tnp.zeros((), dtype=t.dtype, device=t.device)
    return tnp.sqrt(tnp.mean(tnp.square(t)))


def _mu_hat(m: Tensor, g: Tensor, b1: float, t, nesterov: bool) -> Tensor:
    """The bias-corrected first moment; with ``nesterov`` Optax's NAdam look-ahead
    ``b1 * m / (1 - b1**(t+1)) + (1 - b1) * g / (1 - b1**t)`` (Dozat, 2016)."""
    if not nesterov:
        return _bias_corrected(m, b1, t)
    return tnp.add(
        tnp.multiply(_bias_corrected(m, b1, tnp.add(t, 1) if _is_tensor(t) else t + 1), b1),
        tnp.multiply(_bias_corrected(g, b1, t), 1.0 - b1),
    )


def _moment(g: Tensor, m: Tensor, decay: float) -> Tensor:
    """``(1 - decay) * g + decay * m`` (Optax's ``update_moment`` of order 1)."""
    return tnp.add(tnp.multiply(g, 1.0 - decay), tnp.multiply(m, decay))


def _moment2(g: Tensor, v: Tensor, decay: float) -> Tensor:
    """``(1 - decay) * g**2 + decay * v`` (order 2)."""
    return tnp.add(tnp.multiply(tnp.square(g), 1.0 - decay), tnp.multiply(v, decay))


def _state_dict(where: str, state, keys) -> dict:
    if not isinstance(state, dict) or not set(keys) <= set(state):
        raise TypeError(
            f"{where}: state must be the dict from init with keys {sorted(keys)}, got "
            f"{sorted(state) if isinstance(state, dict) else type(state).__name__}"
        )
    return state


def _moments(where: str, grads, state, *names):
    """``(grad leaves, treedef, [leaves of state[name] for each name])``, checked."""
    _state_dict(where, state, names)
    for name in names:
        _check_match(where, grads, "grads", state[name], f"state[{name!r}]")
    g, treedef = _leaves(where, grads, "grads")
    return g, treedef, [tree_leaves(state[n]) for n in names]


# -- Adam family ----------------------------------------------------------------------------
class _MuNu(GradientTransformation):
    """Base of the Adam-like blocks whose state is ``{"count": t, "mu": m, "nu": v}`` (Optax's
    ``ScaleByAdamState``): ``update`` checks the state against the gradients (errors name
    ``_where``), counts the step, computes once per step what ``_step(t, state)`` returns, and
    gives each leaf's new ``m``, new ``v`` and update from ``_leaf(g, m, v, t, step)``."""

    _where = ""

    def init(self, params):
        return {"count": 0, "mu": tree_zeros_like(params), "nu": tree_zeros_like(params)}

    def _step(self, t, state) -> Any:
        return None

    def _leaf(self, g: Tensor, m: Tensor, v: Tensor, t, step) -> tuple[Tensor, Tensor, Tensor]:
        raise NotImplementedError  # pragma: no cover - each block defines its own

    def _new_state(self, t, step, mu, nu) -> dict:
        return {"count": t, "mu": mu, "nu": nu}

    def update(self, grads, state, params=None):
        g, treedef, (mu, nu) = _moments(self._where, grads, state, "mu", "nu")
        t = _next_count(state["count"])
        step = self._step(t, state)
        new = [self._leaf(gi, mi, vi, t, step) for gi, mi, vi in zip(g, mu, nu)]
        return tree_unflatten(treedef, [u for _, _, u in new]), self._new_state(
            t, step, tree_unflatten(treedef, [m for m, _, _ in new]),
            tree_unflatten(treedef, [v for _, v, _ in new]))


@attrs.frozen
class ScaleByOptaxAdam(_MuNu):
    """Optax's ``scale_by_adam`` with ``eps_root`` and ``nesterov``:
    ``m_hat / (sqrt(v_hat + eps_root) + eps)``.

    ``m = (1 - b1) g + b1 m``, ``v = (1 - b2) g**2 + b2 v``, ``v_hat = v / (1 - b2**t)`` and
    ``m_hat = m / (1 - b1**t)``, or with ``nesterov`` (NAdam as Optax writes it)
    ``m_hat = b1 m / (1 - b1**(t+1)) + (1 - b1) g / (1 - b1**t)``. State
    ``{"count": t, "mu": m, "nu": v}``.

    References:
        Kingma and Ba, "Adam: A Method for Stochastic Optimization", ICLR 2015; Dozat,
        "Incorporating Nesterov Momentum into Adam", ICLR 2016 workshop.
    """

    b1: float = 0.9
    b2: float = 0.999
    eps: float = 1e-8
    eps_root: float = 0.0
    nesterov: bool = False

    def __attrs_post_init__(self):
        _adam_args("ScaleByOptaxAdam", self.b1, self.b2, self.eps, self.eps_root)
        _check_bool("ScaleByOptaxAdam", "nesterov", self.nesterov)

    _where = "scale_by_adam"

    def _leaf(self, g, m, v, t, step):
        m, v = _moment(g, m, self.b1), _moment2(g, v, self.b2)
        m_hat = _mu_hat(m, g, self.b1, t, self.nesterov)
        v_hat = _bias_corrected(v, self.b2, t)
        return m, v, tnp.divide(m_hat, tnp.add(tnp.sqrt(tnp.add(v_hat, self.eps_root)), self.eps))


def _adam_args(where, b1, b2, eps, eps_root) -> tuple[float, float, float, float]:
    return (_check_unit(where, "b1", b1), _check_unit(where, "b2", b2),
            _check_nonneg(where, "eps", eps), _check_nonneg(where, "eps_root", eps_root))


@attrs.frozen
class ScaleByRAdam(_MuNu):
    """Optax's ``scale_by_radam``: Adam with the variance rectification of RAdam.

    With ``rho_inf = 2 / (1 - b2) - 1`` and ``rho_t = rho_inf - 2 t b2**t / (1 - b2**t)``,
    the update is ``r_t m_hat / (sqrt(v_hat + eps_root) + eps)`` where ``rho_t >= threshold``
    and ``m_hat`` (SGD with momentum) before, with ``r_t = sqrt((rho_t - 4)(rho_t - 2)
    rho_inf / ((rho_inf - 4)(rho_inf - 2) rho_t))``. State ``{"count", "mu", "nu"}``.

    References:
        Liu et al., "On the Variance of the Adaptive Learning Rate and Beyond", ICLR 2020,
        Algorithm 2.
    """

    b1: float = 0.9
    b2: float = 0.999
    eps: float = 1e-8
    eps_root: float = 0.0
    threshold: float = 5.0
    nesterov: bool = False

    def __attrs_post_init__(self):
        _radam_args("ScaleByRAdam", self.b1, self.b2, self.eps, self.eps_root, self.threshold,
                    self.nesterov)

    _where = "scale_by_radam"

    def _step(self, t, state):
        """``(rectify, r)``: where the rectified step is taken, and ``r_t`` (``None``: nowhere)."""
        ft = _float_count(t)
        rho_inf = 2.0 / (1.0 - self.b2) - 1.0
        b2t = self.b2**ft
        rho = rho_inf - 2.0 * ft * b2t / (1.0 - b2t)
        rectify = tnp.greater_equal(rho, self.threshold) if _is_tensor(rho) else (
            rho >= self.threshold)
        r = None
        if _is_tensor(rectify) or rectify:
            num = (rho - 4.0) * (rho - 2.0) * rho_inf
            den = (rho_inf - 4.0) * (rho_inf - 2.0) * rho
            if _is_tensor(rectify):  # both branches computed: keep the unused one finite
                r = tnp.sqrt(tnp.where(rectify, tnp.divide(num, den), 1.0))
            else:  # IEEE arithmetic, as Optax: NaN where the ratio is negative
                with np.errstate(all="ignore"):
                    r = float(np.sqrt(np.divide(np.float64(num), np.float64(den))))
        return rectify, r

    def _leaf(self, g, m, v, t, step):
        rectify, r = step
        m, v = _moment(g, m, self.b1), _moment2(g, v, self.b2)
        m_hat = _mu_hat(m, g, self.b1, t, self.nesterov)
        if r is None:
            return m, v, m_hat
        v_hat = _bias_corrected(v, self.b2, t)
        rect = tnp.divide(tnp.multiply(m_hat, _like_leaf(r, m_hat)),
                          tnp.add(tnp.sqrt(tnp.add(v_hat, self.eps_root)), self.eps))
        return m, v, _pick(rectify, rect, m_hat)


def _radam_args(where, b1, b2, eps, eps_root, threshold, nesterov) -> tuple:
    return (*_adam_args(where, b1, b2, eps, eps_root), _check_finite(where, "threshold", threshold),
            _check_bool(where, "nesterov", nesterov))


@attrs.frozen
class ScaleByAdamax(_MuNu):
    """Optax's ``scale_by_adamax``: ``m_hat / u`` with the infinity-norm moment
    ``u = max(b2 u, |g| + eps)`` (no bias correction of ``u``). State
    ``{"count", "mu", "nu"}`` (``nu`` is ``u``).

    References:
        Kingma and Ba, "Adam: A Method for Stochastic Optimization", ICLR 2015, section 7.1
        (Algorithm 2).
    """

    b1: float = 0.9
    b2: float = 0.999
    eps: float = 1e-8

    def __attrs_post_init__(self):
        _adam_args("ScaleByAdamax", self.b1, self.b2, self.eps, 0.0)

    _where = "scale_by_adamax"

    def _leaf(self, g, m, v, t, step):
        m = _moment(g, m, self.b1)
        u = tnp.maximum(tnp.add(tnp.abs(g), self.eps), tnp.multiply(v, self.b2))
        return m, u, tnp.divide(_bias_corrected(m, self.b1, t), u)


@attrs.frozen
class ScaleByAdaDelta(GradientTransformation):
    """Optax's ``scale_by_adadelta`` (and PyTorch's ``Adadelta`` step before ``lr``).

    ``E[g2] = rho E[g2] + (1 - rho) g**2``, ``d = sqrt(E[dx2] + eps) / sqrt(E[g2] + eps) * g``,
    ``E[dx2] = rho E[dx2] + (1 - rho) d**2``; the update is ``d``. State
    ``{"e_g": E[g2], "e_x": E[dx2]}``.

    References:
        Zeiler, "ADADELTA: An Adaptive Learning Rate Method", arXiv:1212.5701, 2012,
        Algorithm 1.
    """

    rho: float = 0.9
    eps: float = 1e-6

    def __attrs_post_init__(self):
        _check_unit("ScaleByAdaDelta", "rho", self.rho, closed_high=True)
        _check_nonneg("ScaleByAdaDelta", "eps", self.eps)

    def init(self, params):
        return {"e_g": tree_zeros_like(params), "e_x": tree_zeros_like(params)}

    def update(self, grads, state, params=None):
        where = "scale_by_adadelta"
        g, treedef, (eg, ex) = _moments(where, grads, state, "e_g", "e_x")
        new_eg, new_ex, out = [], [], []
        for gi, egi, exi in zip(g, eg, ex):
            e_g = _moment2(gi, egi, self.rho)
            d = tnp.multiply(tnp.divide(tnp.sqrt(tnp.add(exi, self.eps)),
                                        tnp.sqrt(tnp.add(e_g, self.eps))), gi)
            new_eg.append(e_g)
            new_ex.append(_moment2(d, exi, self.rho))
            out.append(d)
        return tree_unflatten(treedef, out), {
            "e_g": tree_unflatten(treedef, new_eg), "e_x": tree_unflatten(treedef, new_ex)}


@attrs.frozen
class ScaleByBelief(_MuNu):
    """Optax's ``scale_by_belief`` (AdaBelief): Adam with the second moment of the
    prediction error ``g - m`` instead of ``g``.

    ``m = (1 - b1) g + b1 m``, ``s = (1 - b2)(g - m)**2 + b2 s + eps_root``, update
    ``m_hat / (sqrt(s_hat) + eps)`` with bias-corrected ``m_hat``, ``s_hat`` (``m_hat`` with
    Nesterov's look-ahead if ``nesterov``). State ``{"count", "mu", "nu"}`` (``nu`` is ``s``).

    References:
        Zhuang et al., "AdaBelief Optimizer: Adapting Stepsizes by the Belief in Observed
        Gradients", NeurIPS 2020, Algorithm 2.
    """

    b1: float = 0.9
    b2: float = 0.999
    eps: float = 1e-16
    eps_root: float = 1e-16
    nesterov: bool = False

    def __attrs_post_init__(self):
        _adam_args("ScaleByBelief", self.b1, self.b2, self.eps, self.eps_root)
        _check_bool("ScaleByBelief", "nesterov", self.nesterov)

    _where = "scale_by_belief"

    def _leaf(self, g, m, v, t, step):
        m = _moment(g, m, self.b1)
        s = tnp.add(_moment2(tnp.subtract(g, m), v, self.b2), self.eps_root)
        m_hat = _mu_hat(m, g, self.b1, t, self.nesterov)
        s_hat = _bias_corrected(s, self.b2, t)
        return m, s, tnp.divide(m_hat, tnp.add(tnp.sqrt(s_hat), self.eps))


@attrs.frozen
class ScaleByTorchNAdam(_MuNu):
    """PyTorch's NAdam step before the learning rate (``torch.optim.NAdam``), with Dozat's
    momentum schedule.

    With ``mu_t = b1 (1 - 0.5 * 0.96**(t * momentum_decay))``, ``P_t = mu_1 ... mu_t``,
    ``m = (1 - b1) g + b1 m``, ``v = (1 - b2) g**2 + b2 v`` and
    ``d = sqrt(v / (1 - b2**t)) + eps``, the update is
    ``(1 - mu_t) / (1 - P_t) * g / d + mu_{t+1} / (1 - P_t mu_{t+1}) * m / d``. State
    ``{"count", "mu_product", "mu", "nu"}``. (Optax's :func:`nadam` has no momentum schedule.)

    References:
        Dozat, "Incorporating Nesterov Momentum into Adam", ICLR 2016 workshop, Algorithm 2.
    """

    b1: float = 0.9
    b2: float = 0.999
    eps: float = 1e-8
    momentum_decay: float = 4e-3

    def __attrs_post_init__(self):
        _adam_args("ScaleByTorchNAdam", self.b1, self.b2, self.eps, 0.0)
        _check_nonneg("ScaleByTorchNAdam", "momentum_decay", self.momentum_decay)

    def init(self, params):
        return {"count": 0, "mu_product": 1.0, "mu": tree_zeros_like(params),
                "nu": tree_zeros_like(params)}

    _where = "NAdam"

    def update(self, grads, state, params=None):
        _state_dict(self._where, state, ("count", "mu_product"))
        return super().update(grads, state, params)

    def _step(self, t, state):
        """``(P_t, the coefficient of g, that of m, 1 - b2**t)``."""
        ft = _float_count(t)
        mom = self.b1 * (1.0 - 0.5 * 0.96 ** (ft * self.momentum_decay))
        mom_next = self.b1 * (1.0 - 0.5 * 0.96 ** ((ft + 1) * self.momentum_decay))
        prod = _traced(state["mu_product"]) * mom
        return prod, (1.0 - mom) / (1.0 - prod), mom_next / (1.0 - prod * mom_next), (
            1.0 - self.b2**ft)

    def _leaf(self, g, m, v, t, step):
        _, c_g, c_m, bc2 = step
        m, v = _moment(g, m, self.b1), _moment2(g, v, self.b2)
        d = tnp.add(tnp.sqrt(tnp.divide(v, _like_leaf(bc2, v))), self.eps)
        return m, v, tnp.add(tnp.multiply(tnp.divide(g, d), _like_leaf(c_g, g)),
                             tnp.multiply(tnp.divide(m, d), _like_leaf(c_m, m)))

    def _new_state(self, t, step, mu, nu) -> dict:
        return {"count": t, "mu_product": step[0], "mu": mu, "nu": nu}


@attrs.frozen
class ScaleByTorchRAdam(_MuNu):
    """PyTorch's RAdam step before the learning rate (``torch.optim.RAdam``).

    As :class:`ScaleByRAdam` but with PyTorch's details: the rectified step is taken when
    ``rho_t > 5`` (strictly) and is ``r_t m_hat sqrt(1 - b2**t) / (sqrt(v) + eps)`` (``eps``
    added to the uncorrected ``sqrt(v)``). State ``{"count", "mu", "nu"}``.

    References:
        Liu et al., "On the Variance of the Adaptive Learning Rate and Beyond", ICLR 2020.
    """

    b1: float = 0.9
    b2: float = 0.999
    eps: float = 1e-8

    def __attrs_post_init__(self):
        _adam_args("ScaleByTorchRAdam", self.b1, self.b2, self.eps, 0.0)

    _where = "RAdam"

    def _step(self, t, state):
        """``(rectify, r)``: where the rectified step is taken, and ``r_t sqrt(1 - b2**t)``
        (``None``: nowhere)."""
        ft = _float_count(t)
        bc2 = 1.0 - self.b2**ft
        rho_inf = 2.0 / (1.0 - self.b2) - 1.0
        rho = rho_inf - 2.0 * ft * self.b2**ft / bc2
        rectify = tnp.greater(rho, 5.0) if _is_tensor(rho) else rho > 5.0
        r = None
        if _is_tensor(rectify) or rectify:
            ratio = (rho - 4.0) * (rho - 2.0) * rho_inf / ((rho_inf - 4.0) * (rho_inf - 2.0) * rho)
            r = (tnp.sqrt(tnp.where(rectify, ratio, 1.0)) if _is_tensor(rectify)
                 else math.sqrt(ratio)) * (bc2**0.5)
        return rectify, r

    def _leaf(self, g, m, v, t, step):
        rectify, r = step
        m, v = _moment(g, m, self.b1), _moment2(g, v, self.b2)
        m_hat = _bias_corrected(m, self.b1, t)
        if r is None:
            return m, v, m_hat
        rect = tnp.multiply(m_hat, tnp.divide(_like_leaf(r, m_hat),
                                              tnp.add(tnp.sqrt(v), self.eps)))
        return m, v, _pick(rectify, rect, m_hat)


# -- layer-wise and factored -----------------------------------------------------------------
@attrs.frozen
class ScaleByTrustRatio(GradientTransformation):
    """Optax's ``scale_by_trust_ratio``: each leaf's update times
    ``trust_coefficient * ||p|| / (||u|| + eps)`` (1 where either norm is 0), norms floored
    at ``min_norm``. State ``{}``; ``update`` needs ``params``.

    References:
        You, Gitman and Ginsburg, "Large Batch Training of Convolutional Networks" (LARS),
        arXiv:1708.03888, 2017; You et al., "Large Batch Optimization for Deep Learning:
        Training BERT in 76 minutes" (LAMB), ICLR 2020.
    """

    min_norm: float = 0.0
    trust_coefficient: float = 1.0
    eps: float = 0.0

    def __attrs_post_init__(self):
        _trust_args("ScaleByTrustRatio", self.min_norm, self.trust_coefficient, self.eps)

    def init(self, params):
        return {}

    def update(self, grads, state, params=None):
        where = "scale_by_trust_ratio"
        _need_params(where, params, grads)
        g, treedef = _leaves(where, grads, "grads")
        p, _ = _leaves(where, params, "params")
        out = []
        for ui, pi in zip(g, p):
            pn = tnp.astype(_safe_norm(pi, self.min_norm), ui.dtype)
            un = _safe_norm(ui, self.min_norm)
            zero = tnp.logical_or(tnp.equal(pn, 0.0), tnp.equal(un, 0.0))
            ratio = tnp.divide(tnp.multiply(pn, self.trust_coefficient),
                               tnp.add(tnp.where(zero, 1.0, un), self.eps))
            out.append(tnp.multiply(ui, tnp.where(zero, 1.0, ratio)))
        return tree_unflatten(treedef, out), state


def _trust_args(where, min_norm, trust_coefficient, eps) -> tuple:
    return (_check_nonneg(where, "min_norm", min_norm),
            _check_nonneg(where, "trust_coefficient", trust_coefficient),
            _check_nonneg(where, "eps", eps))


def _factored_dims(shape: tuple, factored: bool, min_dim: int):
    """The two largest axes ``(second largest, largest)`` to factor over, or None."""
    if not factored or len(shape) < 2:
        return None
    order = np.argsort(shape, kind="stable")
    if shape[order[-2]] < min_dim:
        return None
    return int(order[-2]), int(order[-1])


@attrs.frozen
class ScaleByFactoredRMS(GradientTransformation):
    """Optax's ``scale_by_factored_rms``: Adafactor's rescaling by a factored estimate of the
    root mean square of the gradients.

    With ``beta_t = 1 - (max(t - step_offset, 0) + 1)**(-decay_rate)`` (``t`` counting from 0;
    Optax gives NaN for the steps before ``step_offset``, here they use the first step's) and
    ``g2 = g**2 + epsilon``: for a leaf whose second-largest axis ``d1`` has at least
    ``min_dim_size_to_factor`` elements (largest axis ``d0``), row and column statistics
    ``R = beta_t R + (1 - beta_t) mean(g2, d0)`` and ``C = beta_t C + (1 - beta_t) mean(g2, d1)``
    give the update ``g / sqrt(R / mean(R) outer C)``; other leaves keep the full
    ``v = beta_t v + (1 - beta_t) g2`` and get ``g / sqrt(v)``. State
    ``{"count", "v_row", "v_col", "v"}`` (unused entries are zeros of shape ``(1,)``).

    References:
        Shazeer and Stern, "Adafactor: Adaptive Learning Rates with Sublinear Memory Cost",
        ICML 2018, Algorithms 4 and 5.
    """

    factored: bool = True
    decay_rate: float = 0.8
    step_offset: int = 0
    min_dim_size_to_factor: int = 128
    epsilon: float = 1e-30

    def __attrs_post_init__(self):
        _factored_args("ScaleByFactoredRMS", self.factored, self.decay_rate, self.step_offset,
                       self.min_dim_size_to_factor, self.epsilon)

    def init(self, params):
        leaves, treedef = _leaves("scale_by_factored_rms", params, "params")
        rows, cols, full = [], [], []
        for p in leaves:
            dims = _factored_dims(p.shape, self.factored, self.min_dim_size_to_factor)
            one = tnp.zeros((1,), dtype=p.dtype, device=p.device)
            if dims is None:
                rows.append(one)
                cols.append(one)
                full.append(_zeros(p))
            else:
                d1, d0 = dims
                rows.append(tnp.zeros(p.shape[:d0] + p.shape[d0 + 1:], dtype=p.dtype,
                                      device=p.device))
                cols.append(tnp.zeros(p.shape[:d1] + p.shape[d1 + 1:], dtype=p.dtype,
                                      device=p.device))
                full.append(one)
        return {"count": 0, "v_row": tree_unflatten(treedef, rows),
                "v_col": tree_unflatten(treedef, cols), "v": tree_unflatten(treedef, full)}

    def update(self, grads, state, params=None):
        where = "scale_by_factored_rms"
        _need_params(where, params, grads)
        _state_dict(where, state, ("count", "v_row", "v_col", "v"))
        g, treedef = _leaves(where, grads, "grads")
        rows, cols, full = (tree_leaves(state[k]) for k in ("v_row", "v_col", "v"))
        count = _traced(state["count"])
        if _is_tensor(count):
            step = tnp.maximum(tnp.astype(count, np.float64) - self.step_offset, 0.0)
        else:
            step = float(max(count - self.step_offset, 0))
        beta = 1.0 - (step + 1.0) ** (-self.decay_rate)
        new_rows, new_cols, new_full, out = [], [], [], []
        for gi, ri, ci, vi in zip(g, rows, cols, full):
            b = _like_leaf(beta, gi)
            g2 = tnp.add(tnp.square(gi), self.epsilon)
            dims = _factored_dims(gi.shape, self.factored, self.min_dim_size_to_factor)
            if gi.size == 0:  # nothing to estimate
                new_rows.append(ri)
                new_cols.append(ci)
                new_full.append(vi)
                out.append(gi)
                continue
            if dims is None:
                v = tnp.add(tnp.multiply(vi, b), tnp.multiply(g2, 1.0 - b))
                new_rows.append(ri)
                new_cols.append(ci)
                new_full.append(v)
                out.append(tnp.multiply(gi, tnp.power(v, -0.5)))
                continue
            d1, d0 = dims
            r = tnp.add(tnp.multiply(ri, b), tnp.multiply(tnp.mean(g2, axis=d0), 1.0 - b))
            c = tnp.add(tnp.multiply(ci, b), tnp.multiply(tnp.mean(g2, axis=d1), 1.0 - b))
            reduced_d1 = d1 - 1 if d1 > d0 else d1
            row_factor = tnp.power(tnp.divide(r, tnp.mean(r, axis=reduced_d1, keepdims=True)),
                                   -0.5)
            col_factor = tnp.power(c, -0.5)
            out.append(tnp.multiply(tnp.multiply(gi, tnp.expand_dims(row_factor, d0)),
                                    tnp.expand_dims(col_factor, d1)))
            new_rows.append(r)
            new_cols.append(c)
            new_full.append(vi)
        return tree_unflatten(treedef, out), {
            "count": _next_count(state["count"]), "v_row": tree_unflatten(treedef, new_rows),
            "v_col": tree_unflatten(treedef, new_cols), "v": tree_unflatten(treedef, new_full)}


def _factored_args(where, factored, decay_rate, step_offset, min_dim, epsilon) -> tuple:
    return (_check_bool(where, "factored", factored),
            _check_nonneg(where, "decay_rate", decay_rate),
            _count(where, "step_offset" if where != "adafactor" else "decay_offset",
                       step_offset, 0),
            _count(where, "min_dim_size_to_factor", min_dim, 0),
            _check_nonneg(where, "epsilon" if where != "adafactor" else "eps", epsilon))


@attrs.frozen
class ClipByBlockRMS(GradientTransformation):
    """Optax's ``clip_by_block_rms``: each leaf divided by ``max(1, rms(u) / threshold)``.
    State ``{}``."""

    threshold: float

    def __attrs_post_init__(self):
        _check_positive("ClipByBlockRMS", "threshold", self.threshold)

    def init(self, params):
        return {}

    def update(self, grads, state, params=None):
        g, treedef = _leaves("clip_by_block_rms", grads, "grads")
        out = [tnp.divide(u, tnp.maximum(1.0, tnp.divide(_rms(u), self.threshold))) for u in g]
        return tree_unflatten(treedef, out), state


@attrs.frozen
class ScaleByParamBlockRMS(GradientTransformation):
    """Optax's ``scale_by_param_block_rms``: each leaf times ``max(rms(p), min_scale)``.
    State ``{}``; ``update`` needs ``params``."""

    min_scale: float = 1e-3

    def __attrs_post_init__(self):
        _check_nonneg("ScaleByParamBlockRMS", "min_scale", self.min_scale)

    def init(self, params):
        return {}

    def update(self, grads, state, params=None):
        where = "scale_by_param_block_rms"
        _need_params(where, params, grads)
        g, treedef = _leaves(where, grads, "grads")
        p, _ = _leaves(where, params, "params")
        out = [tnp.multiply(u, tnp.astype(tnp.maximum(_rms(pi), self.min_scale), u.dtype))
               for u, pi in zip(g, p)]
        return tree_unflatten(treedef, out), state


@attrs.frozen
class ScaleBySM3(GradientTransformation):
    """Optax's ``scale_by_sm3``: SM3-II's per-axis accumulators, then momentum.

    For a leaf of rank ``k >= 2`` with one accumulator ``a_i`` per axis ``i`` (shape
    ``(n_i,)``): ``nu = c g**2 + b2 min_i a_i`` (broadcast), ``a_i = max of nu over the other
    axes``; a leaf of rank 0 or 1 keeps ``nu`` itself (``a_0 = nu``). ``c = 1 - b2`` (1 when
    ``b2 = 1``, the paper's sum). The update is the momentum ``m = (1 - b1) g / sqrt(nu + eps)
    + b1 m`` (0 where ``nu = 0``). State ``{"mu": [[a_0, a_1, ...] per leaf], "nu": m}``.

    References:
        Anil, Gupta, Koren and Singer, "Memory-Efficient Adaptive Optimization", NeurIPS
        2019, Algorithm SM3-II.
    """

    b1: float = 0.9
    b2: float = 1.0
    eps: float = 1e-8

    def __attrs_post_init__(self):
        _check_unit("ScaleBySM3", "b1", self.b1, closed_high=True)
        _check_unit("ScaleBySM3", "b2", self.b2, closed_high=True)
        _check_nonneg("ScaleBySM3", "eps", self.eps)

    def init(self, params):
        leaves, treedef = _leaves("scale_by_sm3", params, "params")
        acc = []
        for p in leaves:
            if p.ndim == 0:
                acc.append([tnp.zeros((), dtype=p.dtype, device=p.device)])
            else:
                acc.append([tnp.zeros((n,), dtype=p.dtype, device=p.device) for n in p.shape])
        return {"mu": acc, "nu": tree_zeros_like(params)}

    def update(self, grads, state, params=None):
        where = "scale_by_sm3"
        _state_dict(where, state, ("mu", "nu"))
        _check_match(where, grads, "grads", state["nu"], "state['nu']")
        g, treedef = _leaves(where, grads, "grads")
        nu = tree_leaves(state["nu"])
        acc = state["mu"]
        if not isinstance(acc, list) or len(acc) != len(g):
            raise TypeError(f"{where}: state['mu'] must be the list from init, one list of "
                            "accumulators per leaf")
        c = 1.0 - self.b2 if self.b2 != 1.0 else 1.0
        new_acc, new_nu = [], []
        for gi, ai, mi in zip(g, acc, nu):
            if gi.ndim < 2:
                v = tnp.add(tnp.multiply(tnp.square(gi), c), tnp.multiply(ai[0], self.b2))
                new_a = [v]
            else:
                shaped = [tnp.reshape(a, tuple(n if j == i else 1 for j, n in
                                               enumerate(gi.shape)))
                          for i, a in enumerate(ai)]
                low = shaped[0]
                for s in shaped[1:]:
                    low = tnp.minimum(low, s)
                v = tnp.add(tnp.multiply(tnp.square(gi), c), tnp.multiply(low, self.b2))
                new_a = []
                for i, a in enumerate(ai):
                    others = tuple(j for j in range(gi.ndim) if j != i)
                    if gi.size == 0:
                        new_a.append(a)
                    else:
                        new_a.append(tnp.max(v, axis=others))
            inv = tnp.where(tnp.greater(v, 0.0),
                            tnp.divide(1.0, tnp.sqrt(tnp.add(tnp.where(tnp.greater(v, 0.0), v,
                                                                       1.0), self.eps))), 0.0)
            new_acc.append(new_a)
            new_nu.append(_moment(tnp.multiply(gi, inv), mi, self.b1))
        m = tree_unflatten(treedef, new_nu)
        return m, {"mu": new_acc, "nu": m}


@attrs.frozen
class ScaleByNovograd(GradientTransformation):
    """Optax's ``scale_by_novograd``: layer-wise second moments.

    Per leaf, with ``n = ||g||**2`` (one number per leaf): at the first step ``v = n`` and
    ``m = g / (sqrt(v + eps_root) + eps) + weight_decay * p``; later ``v = (1 - b2) n + b2 v``
    and ``m = b1 m + g / (sqrt(v + eps_root) + eps) + weight_decay * p``. The update is ``m``.
    State ``{"count", "mu": m, "nu": v}`` (``nu`` leaves are 0-d).

    References:
        Ginsburg et al., "Stochastic Gradient Methods with Layer-wise Adaptive Moments for
        Training of Deep Networks", arXiv:1905.11286, 2019, Algorithm 1.
    """

    b1: float = 0.9
    b2: float = 0.25
    eps: float = 1e-8
    eps_root: float = 0.0
    weight_decay: float = 0.0

    def __attrs_post_init__(self):
        _novograd_args("ScaleByNovograd", self.b1, self.b2, self.eps, self.eps_root,
                       self.weight_decay)

    def init(self, params):
        leaves, treedef = _leaves("scale_by_novograd", params, "params")
        return {"count": 0, "mu": tree_zeros_like(params),
                "nu": tree_unflatten(treedef, [tnp.zeros((), dtype=p.dtype, device=p.device)
                                               for p in leaves])}

    def update(self, grads, state, params=None):
        where = "scale_by_novograd"
        _state_dict(where, state, ("count", "mu", "nu"))
        _check_match(where, grads, "grads", state["mu"], "state['mu']")
        g, treedef = _leaves(where, grads, "grads")
        if self.weight_decay:
            _need_params(where, params, grads)
            p = _leaves(where, params, "params")[0]
        else:
            p = [None] * len(g)
        mu, nu = tree_leaves(state["mu"]), tree_leaves(state["nu"])
        first = _eq(state["count"], 0)
        new_mu, new_nu = [], []
        for gi, mi, vi, pi in zip(g, mu, nu, p):
            n = tnp.astype(tnp.sum(tnp.square(gi)), vi.dtype)
            v = _pick(first, n, tnp.add(tnp.multiply(n, 1.0 - self.b2),
                                         tnp.multiply(vi, self.b2)))
            step = tnp.divide(gi, tnp.add(tnp.sqrt(tnp.add(v, self.eps_root)), self.eps))
            if pi is not None:
                step = tnp.add(step, tnp.multiply(pi, self.weight_decay))
            new_mu.append(_pick(first, step, tnp.add(tnp.multiply(mi, self.b1), step)))
            new_nu.append(v)
        m = tree_unflatten(treedef, new_mu)
        return m, {"count": _next_count(state["count"]), "mu": m,
                   "nu": tree_unflatten(treedef, new_nu)}


def _novograd_args(where, b1, b2, eps, eps_root, weight_decay) -> tuple:
    return (*_adam_args(where, b1, b2, eps, eps_root),
            _check_nonneg(where, "weight_decay", weight_decay))


# -- generic blocks --------------------------------------------------------------------------
@attrs.frozen
class ScaleBySchedule(GradientTransformation):
    """Optax's ``scale_by_schedule``: updates times ``step_size_fn(count)``, ``count`` from 0.
    State ``{"count": int}``."""

    step_size_fn: Schedule

    def __attrs_post_init__(self):
        if not callable(self.step_size_fn):
            raise TypeError(f"ScaleBySchedule: step_size_fn must be callable (step -> number), "
                            f"got {type(self.step_size_fn).__name__}")

    def init(self, params):
        return {"count": 0}

    def update(self, grads, state, params=None):
        where = "scale_by_schedule"
        _state_dict(where, state, ("count",))
        count = _traced(state["count"])
        if _is_tensor(count):
            count = tnp.astype(count, np.int64)
        size = _traced(self.step_size_fn(count))
        if _is_tensor(size):
            if size.shape != () or size.dtype.kind not in "iuf":
                raise TypeError(f"{where}: step_size_fn returned a Tensor of shape {size.shape} "
                                f"and dtype {size.dtype}; it must return a real scalar")
        else:
            try:
                size = float(size)
            except (TypeError, ValueError):
                raise TypeError(f"{where}: step_size_fn returned {size!r:.60} at step "
                                f"{count!r}; it must return a number") from None
            if not math.isfinite(size):
                raise ValueError(f"{where}: step_size_fn returned {size} at step {count}; it "
                                 "must be finite")
        g, treedef = _leaves(where, grads, "grads")
        out = [tnp.multiply(u, _like_leaf(size, u)) for u in g]
        return tree_unflatten(treedef, out), {"count": _next_count(state["count"])}


@attrs.frozen
class Centralize(GradientTransformation):
    """Optax's ``centralize``: from every leaf of rank >= 2, its mean over all axes but the
    first (gradient centralization). Leaves of rank 0 and 1 pass unchanged. State ``{}``.

    References:
        Yong et al., "Gradient Centralization: A New Optimization Technique for Deep Neural
        Networks", ECCV 2020.
    """

    def init(self, params):
        return {}

    def update(self, grads, state, params=None):
        g, treedef = _leaves("centralize", grads, "grads")
        out = [tnp.subtract(u, tnp.mean(u, axis=tuple(range(1, u.ndim)), keepdims=True))
               if u.ndim > 1 and u.size else u for u in g]
        return tree_unflatten(treedef, out), state


@attrs.frozen
class ZeroNans(GradientTransformation):
    """Optax's ``zero_nans``: NaN elements of the updates become 0. State
    ``{"found_nan": <a 0-d bool Tensor per leaf, whether that leaf had a NaN>}``."""

    def init(self, params):
        leaves, treedef = _leaves("zero_nans", params, "params")
        return {"found_nan": tree_unflatten(treedef, [tnp.asarray(False, device=p.device)
                                                      for p in leaves])}

    def update(self, grads, state, params=None):
        g, treedef = _leaves("zero_nans", grads, "grads")
        nan = [tnp.isnan(u) for u in g]
        out = [tnp.where(n, tnp.zeros((), dtype=u.dtype, device=u.device), u)
               for n, u in zip(nan, g)]
        found = [tnp.any(n) for n in nan]
        return tree_unflatten(treedef, out), {"found_nan": tree_unflatten(treedef, found)}


def _check_key(where: str, key) -> Tensor:
    if not (isinstance(key, Tensor) and key.dtype == np.uint32 and key.shape == (2,)):
        raise TypeError(
            f"{where}: key must be a tapegrad.random key (a uint32 Tensor of shape (2,), from "
            f"tg.random.key(seed)), got {key!r:.60}. The key is explicit: Optax's seed "
            "argument has no counterpart."
        )
    return key


@attrs.frozen(eq=False)  # holds a key Tensor: compared by identity
class AddNoise(GradientTransformation):
    """Optax's ``add_noise``: adds Gaussian noise of variance ``eta / t**gamma`` at step
    ``t = 1, 2, ...`` to every element. State ``{"count": int, "rng_key": key}``; each step
    splits the key (the noise of the leaves comes from independent child keys)."""

    eta: float
    gamma: float
    key: Any

    def __attrs_post_init__(self):
        _noise_args("AddNoise", self.eta, self.gamma, self.key)

    def init(self, params):
        return {"count": 0, "rng_key": self.key}

    def update(self, grads, state, params=None):
        where = "add_noise"
        _state_dict(where, state, ("count", "rng_key"))
        g, treedef = _leaves(where, grads, "grads")
        t = _next_count(state["count"])
        std = (self.eta / _float_count(t) ** self.gamma) ** 0.5
        key, sample = _random.split(state["rng_key"], 2)
        keys = _random.split(sample, max(len(g), 1))
        out = [tnp.add(u, tnp.multiply(_random.normal(k, u.shape, dtype=u.dtype),
                                       _like_leaf(std, u))) for u, k in zip(g, keys)]
        return tree_unflatten(treedef, out), {"count": t, "rng_key": key}


def _noise_args(where, eta, gamma, key) -> tuple:
    return (_check_nonneg(where, "eta", eta), _check_nonneg(where, "gamma", gamma),
            _check_key(where, key))


def _check_dtype(where: str, name: str, dtype):
    if dtype is None:
        return None
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{where}: {name} must be a floating dtype (or None), got "
                        f"{dtype!r:.60}") from None
    if dt.kind != "f":
        raise TypeError(f"{where}: {name} must be a floating dtype, got {dt}")
    return dt


@attrs.frozen
class EMA(GradientTransformation):
    """Optax's ``ema``: the updates become their exponential moving average
    ``e = (1 - decay) u + decay e``, divided by ``1 - decay**t`` if ``debias``. State
    ``{"count", "ema"}`` (``ema`` in ``accumulator_dtype``, or each leaf's dtype)."""

    decay: float
    debias: bool = True
    accumulator_dtype: Any = None

    def __attrs_post_init__(self):
        _ema_args("EMA", self.decay, self.debias, self.accumulator_dtype)

    def init(self, params):
        leaves, treedef = _leaves("ema", params, "params")
        dt = _check_dtype("ema", "accumulator_dtype", self.accumulator_dtype)
        return {"count": 0, "ema": tree_unflatten(
            treedef, [tnp.zeros(p.shape, dtype=dt or p.dtype, device=p.device) for p in leaves])}

    def update(self, grads, state, params=None):
        where = "ema"
        g, treedef, (acc,) = _moments(where, grads, state, "ema")
        t = _next_count(state["count"])
        out, new = [], []
        for u, e in zip(g, acc):
            m = _moment(u, e, self.decay)
            new.append(tnp.astype(m, e.dtype))
            out.append(_bias_corrected(m, self.decay, t) if self.debias else m)
        return tree_unflatten(treedef, out), {"count": t, "ema": tree_unflatten(treedef, new)}


def _ema_args(where, decay, debias, dtype) -> tuple:
    return (_check_unit(where, "decay", decay, closed_high=True),
            _check_bool(where, "debias", debias), _check_dtype(where, "accumulator_dtype", dtype))


@attrs.frozen
class ParameterEMA(GradientTransformation):
    """A moving average of the parameters after each step; the updates pass unchanged.

    See :func:`parameter_ema`. State ``{"count": int, "ema_params": <params' pytree>}``.
    """

    decay: float = 0.999

    def __attrs_post_init__(self):
        _check_unit("ParameterEMA", "decay", self.decay, closed_high=True)

    def init(self, params):
        leaves, treedef = _leaves("parameter_ema", params, "params")
        return {"count": 0, "ema_params": tree_unflatten(treedef, leaves)}

    def update(self, grads, state, params=None):
        where = "parameter_ema"
        _need_params(where, params, grads)
        _state_dict(where, state, ("count", "ema_params"))
        _check_match(where, grads, "grads", state["ema_params"], "state['ema_params']")
        u, treedef = _leaves(where, grads, "grads")
        p, _ = _leaves(where, params, "params")
        avg = tree_leaves(state["ema_params"])
        first = _eq(state["count"], 0)
        new = []
        for ui, pi, ai in zip(u, p, avg):
            cur = tnp.add(pi, tnp.astype(ui, pi.dtype))
            moved = tnp.add(tnp.multiply(ai, self.decay), tnp.multiply(cur, 1.0 - self.decay))
            new.append(_pick(first, cur, moved))
        return grads, {"count": _next_count(state["count"]),
                       "ema_params": tree_unflatten(treedef, new)}


# -- factories: blocks ----------------------------------------------------------------------
def scale_by_radam(b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8, eps_root: float = 0.0,
                   threshold: float = 5.0, *, nesterov: bool = False) -> ScaleByRAdam:
    """RAdam's rectified rescaling without the learning rate (Optax's ``scale_by_radam``; see
    :class:`ScaleByRAdam`).

    Raises:
        TypeError: if a hyperparameter has the wrong type.
        ValueError: if ``b1``/``b2`` are outside ``[0, 1)``, ``eps``/``eps_root`` negative or
            ``threshold`` not finite.
    """
    return ScaleByRAdam(*_radam_args("scale_by_radam", b1, b2, eps, eps_root, threshold,
                                     nesterov))


def scale_by_adamax(b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8) -> ScaleByAdamax:
    """Adamax's rescaling without the learning rate (Optax's ``scale_by_adamax``; see
    :class:`ScaleByAdamax`).

    Raises:
        TypeError / ValueError: on hyperparameters of the wrong type or out of range.
    """
    return ScaleByAdamax(*_adam_args("scale_by_adamax", b1, b2, eps, 0.0)[:3])


def scale_by_adadelta(rho: float = 0.9, eps: float = 1e-6) -> ScaleByAdaDelta:
    """Adadelta's rescaling (Optax's ``scale_by_adadelta``; see :class:`ScaleByAdaDelta`).

    Raises:
        TypeError / ValueError: on hyperparameters of the wrong type or out of range
            (``rho`` in ``[0, 1]``, ``eps >= 0``).
    """
    where = "scale_by_adadelta"
    return ScaleByAdaDelta(_check_unit(where, "rho", rho, closed_high=True),
                           _check_nonneg(where, "eps", eps))


def scale_by_belief(b1: float = 0.9, b2: float = 0.999, eps: float = 1e-16,
                    eps_root: float = 1e-16, *, nesterov: bool = False) -> ScaleByBelief:
    """AdaBelief's rescaling without the learning rate (Optax's ``scale_by_belief``; see
    :class:`ScaleByBelief`).

    Raises:
        TypeError / ValueError: on hyperparameters of the wrong type or out of range.
    """
    where = "scale_by_belief"
    return ScaleByBelief(*_adam_args(where, b1, b2, eps, eps_root),
                         _check_bool(where, "nesterov", nesterov))


def scale_by_trust_ratio(min_norm: float = 0.0, trust_coefficient: float = 1.0,
                         eps: float = 0.0) -> ScaleByTrustRatio:
    """Scale each leaf's update by its trust ratio ``||p|| / ||u||`` (Optax's
    ``scale_by_trust_ratio``; see :class:`ScaleByTrustRatio`).

    Raises:
        TypeError / ValueError: on hyperparameters of the wrong type or negative.
    """
    return ScaleByTrustRatio(*_trust_args("scale_by_trust_ratio", min_norm, trust_coefficient,
                                          eps))


def scale_by_factored_rms(factored: bool = True, decay_rate: float = 0.8, step_offset: int = 0,
                          min_dim_size_to_factor: int = 128,
                          epsilon: float = 1e-30) -> ScaleByFactoredRMS:
    """Adafactor's factored rescaling (Optax's ``scale_by_factored_rms``; see
    :class:`ScaleByFactoredRMS`).

    Raises:
        TypeError / ValueError: on hyperparameters of the wrong type or out of range.
    """
    return ScaleByFactoredRMS(*_factored_args("scale_by_factored_rms", factored, decay_rate,
                                              step_offset, min_dim_size_to_factor, epsilon))


def clip_by_block_rms(threshold: float) -> ClipByBlockRMS:
    """Clip each leaf to root mean square ``threshold`` (Optax's ``clip_by_block_rms``).

    Raises:
        TypeError / ValueError: if ``threshold`` is not a positive finite number.
    """
    return ClipByBlockRMS(_check_positive("clip_by_block_rms", "threshold", threshold))


def scale_by_param_block_rms(min_scale: float = 1e-3) -> ScaleByParamBlockRMS:
    """Scale each leaf by its parameter's root mean square, at least ``min_scale`` (Optax's
    ``scale_by_param_block_rms``).

    Raises:
        TypeError / ValueError: if ``min_scale`` is not a finite number >= 0.
    """
    return ScaleByParamBlockRMS(_check_nonneg("scale_by_param_block_rms", "min_scale",
                                              min_scale))


def scale_by_sm3(b1: float = 0.9, b2: float = 1.0, eps: float = 1e-8) -> ScaleBySM3:
    """SM3's rescaling with momentum (Optax's ``scale_by_sm3``; see :class:`ScaleBySM3`).

    Raises:
        TypeError / ValueError: on hyperparameters of the wrong type or out of range.
    """
    where = "scale_by_sm3"
    return ScaleBySM3(_check_unit(where, "b1", b1, closed_high=True),
                      _check_unit(where, "b2", b2, closed_high=True),
                      _check_nonneg(where, "eps", eps))


def scale_by_novograd(b1: float = 0.9, b2: float = 0.25, eps: float = 1e-8,
                      eps_root: float = 0.0, weight_decay: float = 0.0) -> ScaleByNovograd:
    """NovoGrad's layer-wise rescaling (Optax's ``scale_by_novograd``; see
    :class:`ScaleByNovograd`).

    Raises:
        TypeError / ValueError: on hyperparameters of the wrong type or out of range.
    """
    return ScaleByNovograd(*_novograd_args("scale_by_novograd", b1, b2, eps, eps_root,
                                           weight_decay))


def scale_by_schedule(step_size_fn: Schedule) -> ScaleBySchedule:
    """Multiply the updates by ``step_size_fn(count)``, ``count = 0, 1, ...`` (Optax's
    ``scale_by_schedule``; no sign flip: a learning rate needs ``-rate``, or
    :func:`~tapegrad.optim.scale_by_learning_rate`).

    Raises:
        TypeError: if ``step_size_fn`` is not callable; at ``update``, if it returns something
            other than a real number.
        ValueError: at ``update``, if it returns a non-finite number.
    """
    if not callable(step_size_fn):
        raise TypeError(f"scale_by_schedule: step_size_fn must be callable (step -> number), "
                        f"got {type(step_size_fn).__name__}")
    return ScaleBySchedule(step_size_fn)


def centralize() -> Centralize:
    """Gradient centralization (Optax's ``centralize``; see :class:`Centralize`)."""
    return Centralize()


def zero_nans() -> ZeroNans:
    """Replace NaN updates with 0 and record which leaves had one (Optax's ``zero_nans``)."""
    return ZeroNans()


def add_noise(eta: float, gamma: float, key: Any = None) -> AddNoise:
    """Add annealed Gaussian noise to the updates (Optax's ``add_noise``; see
    :class:`AddNoise`).

    Args:
        eta: Initial variance (``>= 0``).
        gamma: Decay exponent of the variance, ``eta / t**gamma`` (``>= 0``).
        key: A :mod:`tapegrad.random` key (required: ``tg.random.key(seed)``).

    Raises:
        TypeError: if ``key`` is not a key or a hyperparameter not a number.
        ValueError: if ``eta`` or ``gamma`` is negative or not finite.
    """
    return AddNoise(*_noise_args("add_noise", eta, gamma, key))


def ema(decay: float, debias: bool = True, accumulator_dtype: Any = None) -> EMA:
    """Exponential moving average of the updates (Optax's ``ema``; see :class:`EMA`).

    This averages the *updates* (a momentum). For a moving average of the *parameters* (the
    weights evaluated at the end of training) use :func:`parameter_ema`.

    Raises:
        TypeError / ValueError: if ``decay`` is not in ``[0, 1]``, ``debias`` not a bool or
            ``accumulator_dtype`` not a floating dtype.
    """
    return EMA(*_ema_args("ema", decay, debias, accumulator_dtype))


def parameter_ema(decay: float = 0.999) -> ParameterEMA:
    """Keep an exponential moving average of the parameters in the optimizer state.

    Put it last in a :func:`~tapegrad.optim.chain`: it passes the updates through unchanged
    and averages the parameters they produce, ``p_t = params + updates``::

        ema_1 = p_1,    ema_t = decay * ema_{t-1} + (1 - decay) * p_t

    which is PyTorch's ``torch.optim.swa_utils.AveragedModel(model,
    multi_avg_fn=get_ema_multi_avg_fn(decay))`` with ``update_parameters(model)`` called
    after every optimizer step (its first call copies the parameters). The average is
    ``state[-1]["ema_params"]`` (a pytree like the parameters; before the first step, the
    initial parameters). Optax's :func:`ema` is something else: an average of the *updates*.

    Args:
        decay: Weight of the old average, in ``[0, 1]`` (0.999: a horizon of about 1000 steps).

    Returns:
        A :class:`ParameterEMA` transformation; ``update`` needs ``params``.

    Raises:
        TypeError / ValueError: if ``decay`` is not a number in ``[0, 1]``.

    Example:
        >>> import numpy as np
        >>> import tapegrad as tg
        >>> from tapegrad import optim
        >>> tx = optim.chain(optim.sgd(1.0), optim.parameter_ema(decay=0.5))
        >>> params = {"w": tg.Tensor(np.array([0.0]))}
        >>> state = tx.init(params)
        >>> for g in [-1.0, -1.0, -1.0]:             # the parameter goes 1, 2, 3
        ...     params, state = optim.apply_gradients(
        ...         tx, {"w": tg.Tensor(np.array([g]))}, state, params)
        >>> state[-1]["ema_params"]["w"].numpy().tolist()   # 0.5 * (0.5 * 1 + 0.5 * 2) + 1.5
        [2.25]
    """
    return ParameterEMA(_check_unit("parameter_ema", "decay", decay, closed_high=True))


def incremental_update(new_tensors, old_tensors, step_size):
    """``step_size * new + (1 - step_size) * old`` leafwise (Optax's ``incremental_update``:
    Polyak averaging, the target networks of reinforcement learning).

    Args:
        new_tensors: Pytree of floating Tensors/arrays.
        old_tensors: Pytree with the same structure and shapes.
        step_size: Number in ``[0, 1]`` or 0-d Tensor.

    Returns:
        A pytree of Tensors with ``old_tensors``' structure and dtypes.

    Raises:
        TypeError: on different structures or non-floating leaves.
        ValueError: on different shapes, or a number ``step_size`` outside ``[0, 1]``.
    """
    where = "incremental_update"
    if not _is_tensor(step_size):
        step_size = _check_unit(where, "step_size", step_size, closed_high=True)
    _check_match(where, new_tensors, "new_tensors", old_tensors, "old_tensors")
    new, treedef = _leaves(where, new_tensors, "new_tensors")
    old, _ = _leaves(where, old_tensors, "old_tensors")
    out = [tnp.astype(tnp.add(tnp.multiply(n, _like_leaf(step_size, n)),
                              tnp.multiply(o, _like_leaf(1.0 - step_size, o))), o.dtype)
           for n, o in zip(new, old)]
    return tree_unflatten(treedef, out)


def periodic_update(new_tensors, old_tensors, steps, update_period: int):
    """``new_tensors`` when ``steps % update_period == 0``, else ``old_tensors`` (Optax's
    ``periodic_update``).

    Args:
        new_tensors, old_tensors: Pytrees with the same structure and shapes.
        steps: The step count, an int or a 0-d integer Tensor (``tg.jit``: a ``tnp.where``).
        update_period: An int ``>= 1``.

    Raises:
        TypeError / ValueError: on different structures or shapes, or a bad period.
    """
    where = "periodic_update"
    period = _count(where, "update_period", update_period, 1)
    _check_match(where, new_tensors, "new_tensors", old_tensors, "old_tensors")
    steps = _traced(steps)
    if _is_tensor(steps):
        if steps.shape != () or steps.dtype.kind not in "iu":
            raise TypeError(f"{where}: steps must be an int or a 0-d integer Tensor, got shape "
                            f"{steps.shape} and dtype {steps.dtype}")
        new, treedef = _leaves(where, new_tensors, "new_tensors")
        old, _ = _leaves(where, old_tensors, "old_tensors")
        now = tnp.equal(tnp.remainder(steps, period), 0)
        return tree_unflatten(treedef, [tnp.where(now, n, o) for n, o in zip(new, old)])
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)):
        raise TypeError(f"{where}: steps must be an int, got {type(steps).__name__}")
    return new_tensors if steps % period == 0 else old_tensors


# -- factories: optimizers (Optax's aliases) -------------------------------------------------
def nadam(learning_rate: float | Schedule, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
          eps_root: float = 0.0) -> GradientTransformation:
    """NAdam as Optax writes it (``optax.nadam``): Adam with a Nesterov look-ahead moment.

    Per leaf, at step ``t = 1, 2, ...``, with ``m``, ``v`` starting at zero::

        m = (1 - b1) g + b1 m,   v = (1 - b2) g**2 + b2 v
        m_hat = b1 m / (1 - b1**(t+1)) + (1 - b1) g / (1 - b1**t)
        p = p - learning_rate * m_hat / (sqrt(v / (1 - b2**t) + eps_root) + eps)

    PyTorch's ``NAdam`` (:class:`~tapegrad.optim.NAdam`) also decays the momentum coefficient
    with Dozat's schedule ``b1 (1 - 0.5 * 0.96**(t * momentum_decay))``; the two differ.

    Args:
        learning_rate: Number ``>= 0`` or schedule ``step -> rate``.
        b1, b2: Decay rates of the moments, in ``[0, 1)``.
        eps: Added to the denominator (``>= 0``).
        eps_root: Added inside the square root (``>= 0``).

    Returns:
        ``chain(<Optax's scale_by_adam(nesterov=True)>, scale_by_learning_rate(learning_rate))``;
        the state's ``mu``, ``nu`` have the parameters' shapes and dtypes.

    Raises:
        TypeError / ValueError: on hyperparameters of the wrong type or out of range.

    References:
        Dozat, "Incorporating Nesterov Momentum into Adam", ICLR 2016 workshop.
    """
    where = "nadam"
    lr = _check_lr(where, learning_rate)
    return chain(ScaleByOptaxAdam(*_adam_args(where, b1, b2, eps, eps_root), True),
                 ScaleByLearningRate(lr))


def radam(learning_rate: float | Schedule, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
          eps_root: float = 0.0, threshold: float = 5.0, *,
          nesterov: bool = False) -> GradientTransformation:
    """Rectified Adam (``optax.radam``): SGD with momentum while the variance estimate is
    unreliable (``rho_t < threshold``), then Adam with the rectification factor ``r_t``.

    See :class:`ScaleByRAdam` for the formulas. PyTorch's ``RAdam``
    (:class:`~tapegrad.optim.RAdam`) switches at ``rho_t > 5`` and adds ``eps`` to the
    uncorrected ``sqrt(v)``; the steps differ slightly (by about ``eps``).

    Args:
        learning_rate: Number ``>= 0`` or schedule ``step -> rate``.
        b1, b2: Decay rates of the moments, in ``[0, 1)``.
        eps, eps_root: As in :func:`nadam`.
        threshold: Smallest ``rho_t`` for the adaptive step.
        nesterov: Use the Nesterov look-ahead moment (as :func:`nadam`).

    Returns:
        ``chain(scale_by_radam(...), scale_by_learning_rate(learning_rate))``.

    Raises:
        TypeError / ValueError: on hyperparameters of the wrong type or out of range.

    References:
        Liu et al., "On the Variance of the Adaptive Learning Rate and Beyond", ICLR 2020.
    """
    where = "radam"
    lr = _check_lr(where, learning_rate)
    return chain(ScaleByRAdam(*_radam_args(where, b1, b2, eps, eps_root, threshold, nesterov)),
                 ScaleByLearningRate(lr))


def adamax(learning_rate: float | Schedule, b1: float = 0.9, b2: float = 0.999,
           eps: float = 1e-8) -> GradientTransformation:
    """Adamax, Adam with the infinity norm (``optax.adamax``; PyTorch's ``Adamax`` gives the
    same steps)::

        m = (1 - b1) g + b1 m,   u = max(b2 u, |g| + eps)
        p = p - learning_rate * m / (1 - b1**t) / u

    Args:
        learning_rate: Number ``>= 0`` or schedule ``step -> rate``.
        b1, b2: Decay rates, in ``[0, 1)``.
        eps: Added to ``|g|`` (``>= 0``).

    Returns:
        ``chain(scale_by_adamax(b1, b2, eps), scale_by_learning_rate(learning_rate))``.

    Raises:
        TypeError / ValueError: on hyperparameters of the wrong type or out of range.

    References:
        Kingma and Ba, "Adam: A Method for Stochastic Optimization", ICLR 2015, section 7.1.
    """
    where = "adamax"
    lr = _check_lr(where, learning_rate)
    return chain(ScaleByAdamax(*_adam_args(where, b1, b2, eps, 0.0)[:3]), ScaleByLearningRate(lr))


def adadelta(learning_rate: float | Schedule | None = None, rho: float = 0.9, eps: float = 1e-6,
             weight_decay: float = 0.0, weight_decay_mask: Any = None) -> GradientTransformation:
    """Adadelta (``optax.adadelta``, and PyTorch's ``Adadelta`` with ``lr=learning_rate``)::

        g = g + weight_decay * p            (on the leaves weight_decay_mask selects)
        E[g2] = rho E[g2] + (1 - rho) g**2
        d = sqrt(E[dx2] + eps) / sqrt(E[g2] + eps) * g
        E[dx2] = rho E[dx2] + (1 - rho) d**2
        p = p - learning_rate * d

    ``learning_rate=None`` means 1 (Zeiler's method has no learning rate). Optax's
    ``adadelta(learning_rate=None)`` skips the learning-rate block and with it the sign flip,
    so its updates *ascend*; here ``None`` descends, as the paper and PyTorch do.

    Args:
        learning_rate: ``None`` (1), a number ``>= 0`` or a schedule ``step -> rate``.
        rho: Decay rate of both averages, in ``[0, 1]``.
        eps: Added inside both square roots (``> 0`` in practice: at 0 the first step is 0).
        weight_decay: L2 coefficient ``>= 0`` added to the gradient.
        weight_decay_mask: Which leaves get the weight decay (see
            :func:`~tapegrad.optim.add_decayed_weights`); ``None``: all.

    Returns:
        ``chain(add_decayed_weights(weight_decay, weight_decay_mask), scale_by_adadelta(rho,
        eps), scale_by_learning_rate(learning_rate))``.

    Raises:
        TypeError / ValueError: on hyperparameters of the wrong type or out of range.

    References:
        Zeiler, "ADADELTA: An Adaptive Learning Rate Method", arXiv:1212.5701, 2012.
    """
    where = "adadelta"
    lr = 1.0 if learning_rate is None else _check_lr(where, learning_rate)
    block = ScaleByAdaDelta(_check_unit(where, "rho", rho, closed_high=True),
                            _check_nonneg(where, "eps", eps))
    wd = _check_nonneg(where, "weight_decay", weight_decay)
    return chain(_decay(where, wd, weight_decay_mask), block, ScaleByLearningRate(lr))


def _decay(where: str, weight_decay: float, mask) -> GradientTransformation:
    """``add_decayed_weights(weight_decay, mask)``, errors naming ``where``."""
    if mask is None or mask is True:
        return AddDecayedWeights(weight_decay)
    try:
        return add_decayed_weights(weight_decay, mask=mask)
    except TypeError as e:
        raise TypeError(f"{where}: {e}") from None


def adabelief(learning_rate: float | Schedule, b1: float = 0.9, b2: float = 0.999,
              eps: float = 1e-16, eps_root: float = 1e-16, *,
              nesterov: bool = False) -> GradientTransformation:
    """AdaBelief (``optax.adabelief``): Adam whose second moment tracks the squared
    prediction error ``(g - m)**2`` (see :class:`ScaleByBelief`)::

        m = (1 - b1) g + b1 m,   s = (1 - b2) (g - m)**2 + b2 s + eps_root
        p = p - learning_rate * m_hat / (sqrt(s_hat) + eps)

    Args:
        learning_rate: Number ``>= 0`` or schedule ``step -> rate``.
        b1, b2: Decay rates, in ``[0, 1)``.
        eps, eps_root: ``>= 0``; Optax's (and the paper's) tiny defaults.
        nesterov: Use the Nesterov look-ahead moment.

    Returns:
        ``chain(scale_by_belief(...), scale_by_learning_rate(learning_rate))``.

    Raises:
        TypeError / ValueError: on hyperparameters of the wrong type or out of range.

    References:
        Zhuang et al., "AdaBelief Optimizer: Adapting Stepsizes by the Belief in Observed
        Gradients", NeurIPS 2020.
    """
    where = "adabelief"
    lr = _check_lr(where, learning_rate)
    return chain(ScaleByBelief(*_adam_args(where, b1, b2, eps, eps_root),
                               _check_bool(where, "nesterov", nesterov)), ScaleByLearningRate(lr))


def lamb(learning_rate: float | Schedule, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-6,
         eps_root: float = 0.0, weight_decay: float = 0.0,
         mask: Any = None) -> GradientTransformation:
    """LAMB (``optax.lamb``): Adam's step plus decoupled weight decay, rescaled per leaf by
    the trust ratio ``||p|| / ||step||``::

        r = m_hat / (sqrt(v_hat + eps_root) + eps) + weight_decay * p
        p = p - learning_rate * ||p|| / ||r|| * r        (per leaf; ratio 1 if a norm is 0)

    Args:
        learning_rate: Number ``>= 0`` or schedule ``step -> rate``.
        b1, b2: Decay rates, in ``[0, 1)``.
        eps, eps_root: ``>= 0``.
        weight_decay: Decoupled weight decay ``>= 0``.
        mask: Which leaves get the weight decay (a pytree of bools or a callable, as
            :func:`~tapegrad.optim.add_decayed_weights`); ``None``: all.

    Returns:
        ``chain(scale_by_adam(b1, b2, eps, eps_root), add_decayed_weights(weight_decay, mask),
        scale_by_trust_ratio(), scale_by_learning_rate(learning_rate))``.

    Raises:
        TypeError / ValueError: on hyperparameters of the wrong type or out of range.

    References:
        You et al., "Large Batch Optimization for Deep Learning: Training BERT in 76
        minutes", ICLR 2020, Algorithm 2.
    """
    where = "lamb"
    lr = _check_lr(where, learning_rate)
    return chain(ScaleByOptaxAdam(*_adam_args(where, b1, b2, eps, eps_root), False),
                 _decay(where, _check_nonneg(where, "weight_decay", weight_decay), mask),
                 ScaleByTrustRatio(), ScaleByLearningRate(lr))


def lars(learning_rate: float | Schedule, weight_decay: float = 0.0, weight_decay_mask: Any = True,
         trust_coefficient: float = 0.001, eps: float = 0.0, trust_ratio_mask: Any = True,
         momentum: float = 0.9, nesterov: bool = False) -> GradientTransformation:
    """LARS (``optax.lars``): SGD with momentum on layer-wise trust-ratio-scaled gradients::

        g = g + weight_decay * p                                   (weight_decay_mask leaves)
        g = trust_coefficient * ||p|| / (||g|| + eps) * g          (trust_ratio_mask leaves)
        b = -learning_rate * g + momentum * b;   p = p + b          (Nesterov: p + (-lr g) + mu b)

    The learning rate is applied before the momentum (Optax's order), so a changing rate
    scales only the new gradients.

    Args:
        learning_rate: Number ``>= 0`` or schedule ``step -> rate``.
        weight_decay: L2 coefficient ``>= 0``.
        weight_decay_mask: Leaves that get the decay: True (all), a pytree of bools or a
            callable.
        trust_coefficient: ``>= 0`` (the paper's ``eta``).
        eps: Added to the gradient norm (``>= 0``).
        trust_ratio_mask: Leaves that get the trust ratio (True: all; commonly False for
            biases and normalization parameters).
        momentum: In ``[0, 1]``.
        nesterov: Nesterov momentum.

    Returns:
        ``chain(add_decayed_weights(...), masked(scale_by_trust_ratio(...), trust_ratio_mask),
        scale_by_learning_rate(learning_rate), trace(momentum, nesterov))``.

    Raises:
        TypeError / ValueError: on hyperparameters of the wrong type or out of range.

    References:
        You, Gitman and Ginsburg, "Large Batch Training of Convolutional Networks",
        arXiv:1708.03888, 2017, Algorithm 1.
    """
    where = "lars"
    lr = _check_lr(where, learning_rate)
    wd = _check_nonneg(where, "weight_decay", weight_decay)
    trust = ScaleByTrustRatio(0.0, _check_nonneg(where, "trust_coefficient", trust_coefficient),
                              _check_nonneg(where, "eps", eps))
    mom = _check_unit(where, "momentum", momentum, closed_high=True)
    nest = _check_bool(where, "nesterov", nesterov)
    if trust_ratio_mask is not True:
        from tapegrad.optim.combinators import masked

        try:
            trust = masked(trust, trust_ratio_mask)
        except TypeError as e:
            raise TypeError(f"{where}: trust_ratio_mask: {e}") from None
    return chain(_decay(where, wd, weight_decay_mask), trust, ScaleByLearningRate(lr),
                 Trace(mom, nest))


def adafactor(learning_rate: float | Schedule | None = None, min_dim_size_to_factor: int = 128,
              decay_rate: float = 0.8, decay_offset: int = 0,
              multiply_by_parameter_scale: bool = True, clipping_threshold: float | None = 1.0,
              momentum: float | None = None, dtype_momentum: Any = np.float32,
              weight_decay_rate: float | None = None, eps: float = 1e-30, factored: bool = True,
              weight_decay_mask: Any = None) -> GradientTransformation:
    """Adafactor (``optax.adafactor``): a factored second-moment estimate, update clipping and
    relative step sizes.

    The chain, each part present when its argument says so::

        u = g / sqrt(v_hat)                          scale_by_factored_rms (see ScaleByFactoredRMS)
        u = u / max(1, rms(u) / clipping_threshold)  clipping_threshold is not None
        u = learning_rate * u                        learning_rate is not None
        u = max(rms(p), 1e-3) * u                    multiply_by_parameter_scale
        u = (1 - momentum) u + momentum u_prev        momentum is not None (state in dtype_momentum)
        u = u + weight_decay_rate * p                weight_decay_rate is not None
        p = p - u

    Args:
        learning_rate: ``None`` (relative steps only), a number ``>= 0`` or a schedule.
        min_dim_size_to_factor: Factor a leaf only if its second-largest axis has at least
            this many elements (an int ``>= 0``).
        decay_rate: Exponent of the second-moment decay ``1 - t**-decay_rate`` (``>= 0``).
        decay_offset: Steps before the decay starts (an int ``>= 0``).
        multiply_by_parameter_scale: Scale by the parameters' root mean square.
        clipping_threshold: ``None`` or ``> 0``.
        momentum: ``None`` or in ``[0, 1]``.
        dtype_momentum: Floating dtype of the momentum state (Optax's float32 default).
        weight_decay_rate: ``None`` or ``>= 0``.
        eps: Added to the squared gradients (``>= 0``).
        factored: Use the factored estimate for leaves of rank >= 2.
        weight_decay_mask: Leaves that get the weight decay (``None``: all).

    Returns:
        The chain above (a :class:`~tapegrad.optim.transforms.Chain`).

    Raises:
        TypeError / ValueError: on hyperparameters of the wrong type or out of range.

    References:
        Shazeer and Stern, "Adafactor: Adaptive Learning Rates with Sublinear Memory Cost",
        ICML 2018.
    """
    where = "adafactor"
    lr = None if learning_rate is None else _check_lr(where, learning_rate)
    parts: list = [ScaleByFactoredRMS(*_factored_args(where, factored, decay_rate, decay_offset,
                                                      min_dim_size_to_factor, eps))]
    clip = _check_optional(where, "clipping_threshold", clipping_threshold, _check_positive)
    mom = _check_optional(where, "momentum", momentum,
                          lambda w, n, v: _check_unit(w, n, v, closed_high=True))
    dt = _check_dtype(where, "dtype_momentum", dtype_momentum)
    wd = _check_optional(where, "weight_decay_rate", weight_decay_rate, _check_nonneg)
    scale_p = _check_bool(where, "multiply_by_parameter_scale", multiply_by_parameter_scale)
    if clip is not None:
        parts.append(ClipByBlockRMS(clip))
    if lr is not None:
        parts.append(ScaleByLearningRate(lr, flip_sign=False))
    if scale_p:
        parts.append(ScaleByParamBlockRMS())
    if mom is not None:
        parts.append(EMA(mom, False, dt))
    if wd is not None:
        parts.append(_decay(where, wd, weight_decay_mask))
    parts.append(Scale(-1.0))
    return chain(*parts)


def sm3(learning_rate: float | Schedule, momentum: float = 0.9) -> GradientTransformation:
    """SM3 (``optax.sm3``): memory-efficient Adagrad with one accumulator per axis, plus
    momentum (see :class:`ScaleBySM3`, with ``b1=momentum`` and ``b2=1``).

    Args:
        learning_rate: Number ``>= 0`` or schedule ``step -> rate`` (Optax takes a number).
        momentum: In ``[0, 1]``.

    Returns:
        ``chain(scale_by_sm3(momentum), scale_by_learning_rate(learning_rate))``.

    Raises:
        TypeError / ValueError: on hyperparameters of the wrong type or out of range.

    References:
        Anil, Gupta, Koren and Singer, "Memory-Efficient Adaptive Optimization", NeurIPS 2019.
    """
    where = "sm3"
    lr = _check_lr(where, learning_rate)
    return chain(ScaleBySM3(_check_unit(where, "momentum", momentum, closed_high=True)),
                 ScaleByLearningRate(lr))


def novograd(learning_rate: float | Schedule, b1: float = 0.9, b2: float = 0.25, eps: float = 1e-6,
             eps_root: float = 0.0, weight_decay: float = 0.0) -> GradientTransformation:
    """NovoGrad (``optax.novograd``): layer-wise normalized gradients with momentum (see
    :class:`ScaleByNovograd`).

    Args:
        learning_rate: Number ``>= 0`` or schedule ``step -> rate``.
        b1, b2: In ``[0, 1)``.
        eps, eps_root: ``>= 0``.
        weight_decay: Coefficient ``>= 0`` of ``p`` added inside the momentum.

    Returns:
        ``chain(scale_by_novograd(...), scale_by_learning_rate(learning_rate))``.

    Raises:
        TypeError / ValueError: on hyperparameters of the wrong type or out of range.

    References:
        Ginsburg et al., "Stochastic Gradient Methods with Layer-wise Adaptive Moments for
        Training of Deep Networks", arXiv:1905.11286, 2019.
    """
    where = "novograd"
    lr = _check_lr(where, learning_rate)
    return chain(ScaleByNovograd(*_novograd_args(where, b1, b2, eps, eps_root, weight_decay)),
                 ScaleByLearningRate(lr))


def noisy_sgd(learning_rate: float | Schedule, eta: float = 0.01, gamma: float = 0.55,
              key: Any = None) -> GradientTransformation:
    """SGD with annealed Gaussian gradient noise (``optax.noisy_sgd``)::

        p = p - learning_rate * (g + N(0, eta / t**gamma))      t = 1, 2, ...

    The noise is drawn from ``key``, a :mod:`tapegrad.random` key, which is required and kept
    (split at every step) in the state: the same key gives the same noise.

    Args:
        learning_rate: Number ``>= 0`` or schedule ``step -> rate``.
        eta: Initial noise variance (``>= 0``).
        gamma: Decay exponent of the variance (``>= 0``; the paper's 0.55).
        key: ``tg.random.key(seed)``.

    Returns:
        ``chain(add_noise(eta, gamma, key), scale_by_learning_rate(learning_rate))``.

    Raises:
        TypeError: if ``key`` is missing or not a key, or a hyperparameter not a number.
        ValueError: on negative or non-finite hyperparameters.

    References:
        Neelakantan et al., "Adding Gradient Noise Improves Learning for Very Deep
        Networks", arXiv:1511.06807, 2015.
    """
    where = "noisy_sgd"
    lr = _check_lr(where, learning_rate)
    return chain(AddNoise(*_noise_args(where, eta, gamma, key)), ScaleByLearningRate(lr))


strict_all(globals(), __all__)  # an unknown keyword is a TypeError naming the closest valid one
