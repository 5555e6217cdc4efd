"""Schedule-free optimization (Optax's ``contrib.schedule_free``, ``schedule_free_sgd``,
``schedule_free_adamw`` and ``schedule_free_eval_params``).

A schedule-free optimizer needs no learning-rate decay: it runs a base optimizer on a sequence
``z``, keeps ``x``, a running average of the ``z`` weighted by ``max_lr**weight_lr_power``, and
evaluates the gradients at the interpolation ``y = b1 x + (1 - b1) z``. The parameters the
user holds (and differentiates at) are ``y``; evaluate the model at ``x``, which
:func:`schedule_free_eval_params` recovers from ``y`` and the state.

Example:
    >>> import numpy as np
    >>> import tapegrad as tg
    >>> import tapegrad.numpy as tnp
    >>> from tapegrad import optim
    >>> tx = optim.schedule_free_sgd(0.1)
    >>> params = {"w": tg.Tensor(np.array([3.0]))}
    >>> state = tx.init(params)
    >>> for _ in range(100):
    ...     grads = tg.grad(lambda p: tnp.sum(tnp.square(p["w"])))(params)
    ...     params, state = optim.apply_gradients(tx, grads, state, params)
    >>> x = optim.schedule_free_eval_params(state, params)     # evaluate here
    >>> bool(abs(float(x["w"][0])) < 0.1)          # from 3.0
    True
"""

from __future__ import annotations

import math
from typing import Any

import attrs
import numpy as np

from tapegrad import numpy as tnp
from tapegrad.core._keywords import strict_all
from tapegrad.core.tensor import Tensor
from tapegrad.core.tree import tree_leaves, tree_unflatten
from tapegrad.optim._extra import ScaleByOptaxAdam, _adam_args, _check_dtype
from tapegrad.optim.schedules import linear_schedule
from tapegrad.optim.transforms import (
    AddDecayedWeights,
    GradientTransformation,
    ScaleByLearningRate,
    Schedule,
    _check_lr,
    _check_match,
    _check_nonneg,
    _check_number,
    _checked_rate,
    _find_dicts,
    _leaves,
    _like_leaf,
    _next_count,
    _traced,
    _update_extra,
    chain,
)

__all__ = ["ScheduleFree", "schedule_free", "schedule_free_sgd", "schedule_free_adamw",
           "schedule_free_eval_params"]

_KEYS = ("b1", "weight_sum", "step_count", "max_lr", "base_optimizer_state", "z")


def _f64(x) -> Tensor:
    x = _traced(x)
    return tnp.astype(x, np.float64) if isinstance(x, Tensor) else Tensor(np.asarray(
        x, np.float64))


@attrs.frozen
class ScheduleFree(GradientTransformation):
    """The transformation :func:`schedule_free` builds; see there.

    State ``{"b1": float, "weight_sum": float, "step_count": int (from 1), "max_lr": float,
    "base_optimizer_state": ..., "z": <the parameters' pytree>}`` (Optax's fields; numbers
    are 0-d Tensors after a jitted step).
    """

    base_optimizer: GradientTransformation
    learning_rate: Any
    b1: float = 0.9
    weight_lr_power: float = 2.0
    state_dtype: Any = None

    def __attrs_post_init__(self):
        _schedule_free_args("ScheduleFree", self.base_optimizer, self.learning_rate, self.b1,
                            self.weight_lr_power, self.state_dtype)

    def init(self, params):
        leaves, treedef = _leaves("schedule_free", params, "params")
        dt = _check_dtype("schedule_free", "state_dtype", self.state_dtype)
        z = [tnp.astype(p, dt) if dt is not None else p for p in leaves]
        return {"b1": self.b1, "weight_sum": 0.0, "step_count": 1, "max_lr": 0.0,
                "base_optimizer_state": self.base_optimizer.init(params),
                "z": tree_unflatten(treedef, z)}

    def update(self, grads, state, params=None, **extra_args):
        where = "schedule_free"
        if params is None:
            raise ValueError(f"{where}: needs params; call update(grads, state, params).")
        if not isinstance(state, dict) or set(state) != set(_KEYS):
            raise TypeError(f"{where}: state must be the dict from init with keys "
                            f"{sorted(_KEYS)}")
        _check_match(where, grads, "grads", params, "params")
        _check_match(where, params, "params", state["z"], "state['z']")
        count = _traced(state["step_count"])
        lr = self.learning_rate
        if callable(lr):
            step = tnp.astype(count, np.int64) if isinstance(count, Tensor) else count
            lr = _traced(_checked_rate(where, lr(step), step))
        old_max, old_sum = _traced(state["max_lr"]), _traced(state["weight_sum"])
        if any(isinstance(v, Tensor) for v in (lr, old_max, old_sum)):
            max_lr = tnp.maximum(_f64(old_max), _f64(lr))
            weight = tnp.power(max_lr, self.weight_lr_power)
            total = tnp.add(_f64(old_sum), weight)
            ratio = tnp.divide(weight, total)
            bad = tnp.logical_or(tnp.isnan(weight), tnp.isnan(total))
            ck = tnp.where(bad, math.nan, tnp.where(tnp.isnan(ratio), 0.0, ratio))
        else:
            max_lr = max(float(old_max), float(lr))
            weight = max_lr**self.weight_lr_power
            total = float(old_sum) + weight
            if math.isnan(weight) or math.isnan(total):
                ck = math.nan
            elif total == 0.0 or (math.isinf(weight) and math.isinf(total)):
                ck = 0.0  # 0/0 or inf/inf: Optax's nan_to_num(nan=0)
            else:
                ck = weight / total
        base_updates, base_state = _update_extra(self.base_optimizer, grads,
                                                 state["base_optimizer_state"], params,
                                                 extra_args)
        y, treedef = _leaves(where, params, "params")
        u, _ = _leaves(where, base_updates, "base updates")
        z_old = tree_leaves(state["z"])
        b1 = self.b1
        new_z, out = [], []
        for yi, ui, zi in zip(y, u, z_old):
            z = tnp.astype(tnp.add(zi, ui), zi.dtype)
            prev_x = tnp.divide(tnp.subtract(yi, tnp.multiply(zi, 1.0 - b1)), b1)
            c = _like_leaf(ck, prev_x)
            x = tnp.add(tnp.multiply(prev_x, 1.0 - c), tnp.multiply(z, c))
            new_y = tnp.add(tnp.multiply(x, b1), tnp.multiply(z, 1.0 - b1))
            new_z.append(z)
            out.append(tnp.subtract(new_y, yi))
        return tree_unflatten(treedef, out), {
            "b1": state["b1"], "weight_sum": total, "step_count": _next_count(state["step_count"]),
            "max_lr": max_lr, "base_optimizer_state": base_state,
            "z": tree_unflatten(treedef, new_z)}


def _check_b1(where: str, b1) -> float:
    b1 = _check_number(where, "b1", b1)
    if not 0.0 < b1 <= 1.0:
        raise ValueError(f"{where}: b1 must be in (0, 1] (y interpolates between x and z; 0 "
                         f"would lose x), got {b1!r}")
    return b1


def _check_power(where: str, power) -> float:
    return _check_nonneg(where, "weight_lr_power", power)


def _schedule_free_args(where, base_optimizer, learning_rate, b1, weight_lr_power,
                        state_dtype) -> tuple:
    if not isinstance(base_optimizer, GradientTransformation):
        raise TypeError(f"{where}: base_optimizer must be a gradient transformation, got "
                        f"{type(base_optimizer).__name__}")
    _check_dtype(where, "state_dtype", state_dtype)
    return (base_optimizer, _check_lr(where, learning_rate), _check_b1(where, b1),
            _check_power(where, weight_lr_power), state_dtype)


def schedule_free(base_optimizer: GradientTransformation, learning_rate: float | Schedule,
                  b1: float = 0.9, weight_lr_power: float = 2.0,
                  state_dtype: Any = None) -> ScheduleFree:
    """Make ``base_optimizer`` schedule-free (Optax's ``contrib.schedule_free``).

    At step ``t = 1, 2, ...`` with the parameters ``y`` (where the gradient ``g`` is taken),
    ``u`` the base optimizer's update of ``g`` and ``lr_max`` the largest learning rate so
    far (``learning_rate(t)`` for a schedule)::

        z_t = z_{t-1} + u
        c_t = lr_max**weight_lr_power / sum_{i <= t} lr_max_i**weight_lr_power
        x_t = (1 - c_t) x_{t-1} + c_t z_t                 (x_{t-1} = (y - (1 - b1) z_{t-1}) / b1)
        y_t = b1 x_t + (1 - b1) z_t

    and the update is ``y_t - y``. ``z`` starts at the parameters. Evaluate at ``x``
    (:func:`schedule_free_eval_params`). The base optimizer should have no momentum of its
    own (``b1`` plays that part).

    Args:
        base_optimizer: The transformation run on ``z`` (its learning rate included).
        learning_rate: The base optimizer's rate (a number ``>= 0`` or a schedule of the
            1-based step), used for the weights of the average.
        b1: Interpolation between ``x`` and ``z``, in ``(0, 1]``.
        weight_lr_power: Exponent of the learning rate in the weights (``>= 0``).
        state_dtype: ``None`` (the parameters' dtypes) or a floating dtype for ``z``.

    Returns:
        A :class:`ScheduleFree` transformation; ``update`` needs ``params``.

    Raises:
        TypeError / ValueError: on arguments of the wrong type or out of range.

    References:
        Defazio et al., "The Road Less Scheduled", NeurIPS 2024, Algorithm 1.
    """
    return ScheduleFree(*_schedule_free_args("schedule_free", base_optimizer, learning_rate,
                                             b1, weight_lr_power, state_dtype))


def _warmed(where: str, learning_rate, warmup_steps):
    lr = _check_lr(where, learning_rate)
    if warmup_steps is None:
        return lr
    if isinstance(warmup_steps, (bool, np.bool_)) or not isinstance(warmup_steps,
                                                                    (int, np.integer)):
        raise TypeError(f"{where}: warmup_steps must be None or an int >= 1, got "
                        f"{warmup_steps!r:.60}")
    if warmup_steps < 1:
        raise ValueError(f"{where}: warmup_steps must be None or an int >= 1, got "
                         f"{warmup_steps!r}")
    if callable(lr):
        raise TypeError(f"{where}: warmup_steps needs a number learning_rate (the peak), got "
                        "a schedule")
    # Optax's warmup_constant_schedule: from 0 to the peak in warmup_steps steps, then flat
    return linear_schedule(0.0, lr, int(warmup_steps))


def schedule_free_sgd(learning_rate: float | Schedule = 1.0, warmup_steps: int | None = None,
                      b1: float = 0.9, weight_decay: float | None = None,
                      weight_lr_power: float = 2.0, state_dtype: Any = None) -> ScheduleFree:
    """Schedule-free SGD (Optax's ``contrib.schedule_free_sgd``, same defaults):
    :func:`schedule_free` around ``sgd(learning_rate)`` (after ``add_decayed_weights`` if
    ``weight_decay`` is given).

    Args:
        learning_rate: Number ``>= 0`` (the peak, with ``warmup_steps``) or a schedule.
        warmup_steps: ``None`` or the steps of a linear warmup from 0 (an int ``>= 1``).
        b1: In ``(0, 1]``.
        weight_decay: ``None`` or an L2 coefficient ``>= 0``.
        weight_lr_power: ``>= 0``.
        state_dtype: ``None`` or a floating dtype for ``z``.

    Raises:
        TypeError / ValueError: on arguments of the wrong type or out of range.

    References:
        Defazio et al., "The Road Less Scheduled", NeurIPS 2024.
    """
    where = "schedule_free_sgd"
    lr = _warmed(where, learning_rate, warmup_steps)
    base: GradientTransformation = ScaleByLearningRate(lr)
    if weight_decay is not None:
        base = chain(AddDecayedWeights(_check_nonneg(where, "weight_decay", weight_decay)), base)
    return ScheduleFree(*_schedule_free_args(where, base, lr, b1, weight_lr_power, state_dtype))


def schedule_free_adamw(learning_rate: float | Schedule = 0.0025, warmup_steps: int | None = None,
                        b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
                        weight_decay: float = 0.0, weight_lr_power: float = 2.0,
                        state_dtype: Any = None) -> ScheduleFree:
    """Schedule-free AdamW (Optax's ``contrib.schedule_free_adamw``, same defaults):
    :func:`schedule_free` around AdamW without its momentum, ``g / (sqrt(v / (1 - b2**t)) +
    eps) + weight_decay * p`` times ``-learning_rate``.

    Args:
        learning_rate: Number ``>= 0`` (the peak, with ``warmup_steps``) or a schedule.
        warmup_steps: ``None`` or the steps of a linear warmup from 0 (an int ``>= 1``).
        b1: In ``(0, 1]`` (the interpolation, in place of Adam's momentum).
        b2: Decay of the second moment, in ``[0, 1)``.
        eps: Added to ``sqrt(v_hat)`` (``>= 0``).
        weight_decay: Decoupled weight decay ``>= 0``.
        weight_lr_power: ``>= 0``.
        state_dtype: ``None`` or a floating dtype for ``z``.

    Raises:
        TypeError / ValueError: on arguments of the wrong type or out of range.

    References:
        Defazio et al., "The Road Less Scheduled", NeurIPS 2024, Algorithm 1 (AdamW).
    """
    where = "schedule_free_adamw"
    lr = _warmed(where, learning_rate, warmup_steps)
    _, b2, eps, _ = _adam_args(where, 0.0, b2, eps, 0.0)
    base = chain(ScaleByOptaxAdam(0.0, b2, eps, 0.0, False),  # b1 = 0: the RMS scaling alone
                 AddDecayedWeights(_check_nonneg(where, "weight_decay", weight_decay)),
                 ScaleByLearningRate(lr))
    return ScheduleFree(*_schedule_free_args(where, base, lr, b1, weight_lr_power, state_dtype))


def _find_state(state):
    return _find_dicts(state, lambda d: set(d) == set(_KEYS), descend=False)


def schedule_free_eval_params(state, params):
    """The parameters to evaluate a schedule-free model at: ``x = (y - (1 - b1) z) / b1``
    (Optax's ``contrib.schedule_free_eval_params``).

    Args:
        state: The state of a :func:`schedule_free` transformation (or of a chain holding
            exactly one).
        params: The current parameters ``y``.

    Returns:
        A pytree like ``params`` (Tensors, each leaf's dtype).

    Raises:
        ValueError: if ``state`` holds no schedule-free state (or several).
        TypeError / ValueError: if ``params`` does not match the state's ``z``.
    """
    where = "schedule_free_eval_params"
    found = _find_state(state)
    if len(found) != 1:
        raise ValueError(f"{where}: state must be (or hold exactly one) schedule-free state, "
                         f"from optim.schedule_free(...).init; found {len(found)}")
    s = found[0]
    _check_match(where, params, "params", s["z"], "state['z']")
    b1 = _traced(s["b1"])
    y, treedef = _leaves(where, params, "params")
    out = []
    for yi, zi in zip(y, tree_leaves(s["z"])):
        c = _like_leaf(b1, yi)
        out.append(tnp.divide(tnp.subtract(yi, tnp.multiply(zi, 1.0 - c)), c))
    return tree_unflatten(treedef, out)


strict_all(globals(), __all__)  # an unknown keyword is a TypeError naming the closest valid one
