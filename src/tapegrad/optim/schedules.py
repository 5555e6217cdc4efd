"""Learning-rate schedules: pure functions of the step number.

A schedule is a frozen record called as ``schedule(step) -> float`` with ``step`` a
non-negative int. Pass one as ``learning_rate`` to :func:`tapegrad.optim.sgd`,
:func:`~tapegrad.optim.adam`, ... (the transform counts its updates from 0). Called with a 0-d
integer Tensor (the transform's counter under ``tg.jit``), a schedule computes the same value
with :mod:`tapegrad.numpy` and returns a 0-d float64 Tensor, so a recorded training step
replays for every step number instead of being traced again.

:class:`CosineScheduler` follows the scheduler protocol of the stateful optimizers:
``scheduler(step, initial_lr, current_lr) -> lr``, called by ``Optimizer.update_lr()`` with the
optimizer's ``timestep``.

Example:
    >>> from tapegrad.optim import schedules
    >>> s = schedules.warmup_cosine_schedule(1.0, warmup_steps=2, lr_decay_iters=4, min_lr=0.0)
    >>> [round(s(k), 4) for k in range(6)]
    [0.3333, 0.6667, 1.0, 0.5, 0.0, 0.0]
"""

from __future__ import annotations

import abc
import math
from collections.abc import Mapping

import attrs
import numpy as np

from tapegrad import numpy as tnp
from tapegrad._keywords import strict_all
from tapegrad.tensor import Tensor

__all__ = [
    "constant_schedule",
    "warmup_cosine_schedule",
    "step_decay_schedule",
    "exponential_decay",
    "linear_schedule",
    "piecewise_constant_schedule",
    "ConstantSchedule",
    "WarmupCosineSchedule",
    "StepDecaySchedule",
    "ExponentialDecaySchedule",
    "LinearSchedule",
    "PiecewiseConstantSchedule",
    "LRScheduler",
    "CosineScheduler",
]


def _tensor_step(where: str, step):
    """A Tensor step (what a transform's counter is under ``tg.jit``) as a float64 Tensor, or
    ``None`` for a Python step. The schedules then compute with ``tapegrad.numpy`` and return a
    0-d float64 Tensor, so a recorded step replays for every step number."""
    if not isinstance(step, Tensor):
        return None
    if step.shape != () or step.dtype.kind not in "iuf":
        raise TypeError(
            f"{where}: step must be an int or a 0-d integer Tensor, got a Tensor of shape "
            f"{step.shape} and dtype {step.dtype}"
        )
    return tnp.astype(step, np.float64)


def _f64(value: float) -> Tensor:
    return Tensor(np.asarray(value, np.float64))


def _step(where: str, step) -> int:
    try:
        k = int(step)
    except (TypeError, ValueError):
        raise TypeError(f"{where}: step must be an int, got {type(step).__name__}") from None
    if k != step or k < 0:
        raise ValueError(f"{where}: step must be a non-negative integer, got {step!r}")
    return k


_REAL = (int, float, np.integer, np.floating)


def _number(where: str, name: str, value, minimum: float | None = 0.0) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, _REAL):
        raise TypeError(f"{where}: {name} must be a finite number, got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{where}: {name} must be a finite number, got {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{where}: {name} must be >= {minimum}, got {value!r}")
    return float(value)


def _count(where: str, name: str, value, minimum: int = 0) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{where}: {name} must be an int >= {minimum}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{where}: {name} must be an int >= {minimum}, got {value!r}")
    return int(value)


def _flag(where: str, name: str, value) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{where}: {name} must be a bool, got {value!r}")
    return bool(value)


def _cosine_with_warmup(step: int, lr: float, warmup: int, decay_iters: int, min_lr: float):
    """The warmup-cosine formula (linear warmup, then half-cosine from ``lr`` to ``min_lr``)."""
    if step < warmup:
        return lr * (step + 1) / (warmup + 1)
    if step > decay_iters:
        return min_lr
    ratio = (step - warmup) / (decay_iters - warmup)
    coeff = 0.5 * (1.0 + math.cos(math.pi * ratio))
    return min_lr + coeff * (lr - min_lr)


@attrs.frozen
class ConstantSchedule:
    """``step -> value`` for every step."""

    value: float

    def __attrs_post_init__(self):
        _number("ConstantSchedule", "value", self.value)

    def __call__(self, step) -> float | Tensor:
        if _tensor_step("constant_schedule", step) is None:
            _step("constant_schedule", step)
        return self.value


@attrs.frozen
class WarmupCosineSchedule:
    """Linear warmup then cosine decay (see :func:`warmup_cosine_schedule`)."""

    peak_lr: float
    warmup_steps: int
    lr_decay_iters: int
    min_lr: float

    def __attrs_post_init__(self):
        _warmup_cosine_args("WarmupCosineSchedule", self.peak_lr, self.warmup_steps,
                            self.lr_decay_iters, self.min_lr)

    def __call__(self, step) -> float | Tensor:
        t = _tensor_step("warmup_cosine_schedule", step)
        if t is not None:
            lr, w, d, lo = self.peak_lr, self.warmup_steps, self.lr_decay_iters, self.min_lr
            warm = tnp.divide(tnp.multiply(tnp.add(t, 1.0), lr), float(w + 1))
            ratio = tnp.divide(tnp.subtract(t, float(w)), float(d - w))
            coeff = tnp.multiply(tnp.add(tnp.cos(tnp.multiply(ratio, math.pi)), 1.0), 0.5)
            cosine = tnp.add(tnp.multiply(coeff, lr - lo), lo)
            after = tnp.where(tnp.greater(t, float(d)), _f64(lo), cosine)
            return tnp.where(tnp.less(t, float(w)), warm, after)
        k = _step("warmup_cosine_schedule", step)
        return _cosine_with_warmup(
            k, self.peak_lr, self.warmup_steps, self.lr_decay_iters, self.min_lr
        )


@attrs.frozen
class StepDecaySchedule:
    """``init_value * gamma ** (step // step_size)`` (see :func:`step_decay_schedule`)."""

    init_value: float
    step_size: int
    gamma: float

    def __attrs_post_init__(self):
        _step_decay_args("StepDecaySchedule", self.init_value, self.step_size, self.gamma)

    def __call__(self, step) -> float | Tensor:
        t = _tensor_step("step_decay_schedule", step)
        if t is not None:
            n = tnp.floor(tnp.divide(t, float(self.step_size)))
            return tnp.multiply(tnp.power(_f64(self.gamma), n), self.init_value)
        k = _step("step_decay_schedule", step)
        return self.init_value * self.gamma ** (k // self.step_size)


@attrs.frozen
class ExponentialDecaySchedule:
    """Optax's ``exponential_decay`` (see :func:`exponential_decay`)."""

    init_value: float
    transition_steps: int
    decay_rate: float
    transition_begin: int = 0
    staircase: bool = False
    end_value: float | None = None

    def __attrs_post_init__(self):
        _exponential_args("ExponentialDecaySchedule", self.init_value, self.transition_steps,
                          self.decay_rate, self.transition_begin, self.staircase, self.end_value)

    def __call__(self, step) -> float | Tensor:
        t = _tensor_step("exponential_decay", step)
        if t is not None:
            elapsed = tnp.maximum(tnp.subtract(t, float(self.transition_begin)), 0.0)
            p = tnp.divide(elapsed, float(self.transition_steps))
            if self.staircase:
                p = tnp.floor(p)
            value = tnp.multiply(tnp.power(_f64(self.decay_rate), p), self.init_value)
            if self.end_value is not None:
                bound = tnp.maximum if self.decay_rate < 1 else tnp.minimum
                value = bound(value, self.end_value)
            return value
        k = _step("exponential_decay", step)
        elapsed = max(k - self.transition_begin, 0)
        p = elapsed / self.transition_steps
        if self.staircase:
            p = math.floor(p)
        value = self.init_value * self.decay_rate**p
        if self.end_value is not None:
            if self.decay_rate < 1:
                value = max(value, self.end_value)
            else:
                value = min(value, self.end_value)
        return value


@attrs.frozen
class LinearSchedule:
    """Optax's ``linear_schedule`` (see :func:`linear_schedule`)."""

    init_value: float
    end_value: float
    transition_steps: int
    transition_begin: int = 0

    def __attrs_post_init__(self):
        _linear_args("LinearSchedule", self.init_value, self.end_value, self.transition_steps,
                     self.transition_begin)

    def __call__(self, step) -> float | Tensor:
        t = _tensor_step("linear_schedule", step)
        if t is not None:
            if self.transition_steps == 0:
                return _f64(self.init_value)
            done = tnp.minimum(
                tnp.maximum(tnp.subtract(t, float(self.transition_begin)), 0.0),
                float(self.transition_steps),
            )
            frac = tnp.subtract(1.0, tnp.divide(done, float(self.transition_steps)))
            return tnp.add(tnp.multiply(frac, self.init_value - self.end_value), self.end_value)
        k = _step("linear_schedule", step)
        if self.transition_steps == 0:
            return self.init_value
        done = min(max(k - self.transition_begin, 0), self.transition_steps)
        frac = 1.0 - done / self.transition_steps
        return (self.init_value - self.end_value) * frac + self.end_value


@attrs.frozen
class PiecewiseConstantSchedule:
    """Optax's ``piecewise_constant_schedule`` (see :func:`piecewise_constant_schedule`)."""

    init_value: float
    boundaries_and_scales: tuple = ()  # ((boundary, scale), ...) sorted by boundary

    def __attrs_post_init__(self):
        where = "PiecewiseConstantSchedule"
        _number(where, "init_value", self.init_value)
        if not isinstance(self.boundaries_and_scales, tuple):
            raise TypeError(
                f"{where}: boundaries_and_scales must be a tuple of (step, scale) pairs; build "
                "it with piecewise_constant_schedule(value, {step: scale})"
            )
        for pair in self.boundaries_and_scales:
            if not (isinstance(pair, tuple) and len(pair) == 2):
                raise TypeError(f"{where}: each boundary must be a (step, scale) pair, got "
                                f"{pair!r}")
            _count(where, "a boundary", pair[0])
            _number(where, f"the scale at {pair[0]}", pair[1])

    def __call__(self, step) -> float | Tensor:
        t = _tensor_step("piecewise_constant_schedule", step)
        if t is not None:
            value = _f64(self.init_value)
            for boundary, scale in self.boundaries_and_scales:
                value = tnp.where(tnp.less(t, float(boundary)), value, tnp.multiply(value, scale))
            return value
        k = _step("piecewise_constant_schedule", step)
        value = self.init_value
        for boundary, scale in self.boundaries_and_scales:
            if k < boundary:
                break
            value = value * scale
        return value


def constant_schedule(value: float) -> ConstantSchedule:
    """The schedule that always returns ``value``.

    Raises:
        TypeError: if ``value`` is not a finite number.
        ValueError: if ``value`` is negative.
    """
    return ConstantSchedule(_number("constant_schedule", "value", value))


def warmup_cosine_schedule(
    peak_lr: float, warmup_steps: int = 100, lr_decay_iters: int = 200, min_lr: float = 1e-4
) -> WarmupCosineSchedule:
    """Linear warmup, then a half cosine from ``peak_lr`` down to ``min_lr``, then ``min_lr``.

    :class:`CosineScheduler`'s formula, exactly::

        step <  warmup_steps:    peak_lr * (step + 1) / (warmup_steps + 1)
        step >  lr_decay_iters:  min_lr
        otherwise:               min_lr + 0.5 * (1 + cos(pi * r)) * (peak_lr - min_lr),
                                 r = (step - warmup_steps) / (lr_decay_iters - warmup_steps)

    Args:
        peak_lr: Rate reached at the end of warmup (``>= 0``).
        warmup_steps: Number of warmup steps (``>= 0``).
        lr_decay_iters: Step at which the decay reaches ``min_lr``; ``> warmup_steps``.
        min_lr: Final rate (``>= 0``).

    Raises:
        ValueError: on negative values or ``lr_decay_iters <= warmup_steps``.

    References:
        Loshchilov and Hutter, "SGDR: Stochastic Gradient Descent with Warm Restarts",
        ICLR 2017, section 3 (one cycle, no restart).
    """
    return WarmupCosineSchedule(*_warmup_cosine_args(
        "warmup_cosine_schedule", peak_lr, warmup_steps, lr_decay_iters, min_lr))


def _warmup_cosine_args(where, peak_lr, warmup_steps, lr_decay_iters, min_lr) -> tuple:
    warmup_steps = _count(where, "warmup_steps", warmup_steps)
    lr_decay_iters = _count(where, "lr_decay_iters", lr_decay_iters)
    if lr_decay_iters <= warmup_steps:
        raise ValueError(
            f"{where}: lr_decay_iters ({lr_decay_iters}) must be greater than warmup_steps "
            f"({warmup_steps})"
        )
    return (_number(where, "peak_lr", peak_lr), warmup_steps, lr_decay_iters,
            _number(where, "min_lr", min_lr))


def step_decay_schedule(init_value: float, step_size: int, gamma: float = 0.1) -> StepDecaySchedule:
    """Multiply the rate by ``gamma`` every ``step_size`` steps (PyTorch's ``StepLR``).

    ``init_value * gamma ** (step // step_size)``.

    Raises:
        ValueError: if ``step_size < 1`` or ``init_value``/``gamma`` are negative.
    """
    return StepDecaySchedule(*_step_decay_args("step_decay_schedule", init_value, step_size,
                                               gamma))


def _step_decay_args(where, init_value, step_size, gamma) -> tuple:
    return (_number(where, "init_value", init_value),
            _count(where, "step_size", step_size, minimum=1), _number(where, "gamma", gamma))


def exponential_decay(
    init_value: float,
    transition_steps: int,
    decay_rate: float,
    transition_begin: int = 0,
    staircase: bool = False,
    end_value: float | None = None,
) -> ExponentialDecaySchedule:
    """Exponential decay, Optax's ``exponential_decay``.

    ``init_value * decay_rate ** (max(step - transition_begin, 0) / transition_steps)``, the
    exponent floored if ``staircase``; clipped below at ``end_value`` when ``decay_rate < 1``
    (above when ``decay_rate > 1``) if given.

    Raises:
        ValueError: if ``transition_steps < 1``, ``transition_begin < 0`` or a value is negative.
    """
    return ExponentialDecaySchedule(*_exponential_args(
        "exponential_decay", init_value, transition_steps, decay_rate, transition_begin,
        staircase, end_value))


def _exponential_args(where, init_value, transition_steps, decay_rate, transition_begin,
                      staircase, end_value) -> tuple:
    return (
        _number(where, "init_value", init_value),
        _count(where, "transition_steps", transition_steps, minimum=1),
        _number(where, "decay_rate", decay_rate),
        _count(where, "transition_begin", transition_begin),
        _flag(where, "staircase", staircase),
        None if end_value is None else _number(where, "end_value", end_value),
    )


def linear_schedule(
    init_value: float, end_value: float, transition_steps: int, transition_begin: int = 0
) -> LinearSchedule:
    """Linear interpolation from ``init_value`` to ``end_value``, Optax's ``linear_schedule``.

    ``init_value`` until step ``transition_begin``, then a straight line reaching ``end_value``
    at step ``transition_begin + transition_steps``, then ``end_value``::

        c = min(max(step - transition_begin, 0), transition_steps)
        value = (init_value - end_value) * (1 - c / transition_steps) + end_value

    ``transition_steps=0`` gives the constant ``init_value`` (as Optax). A linear warmup is
    ``linear_schedule(0.0, peak, warmup_steps)``.

    Args:
        init_value: Value before the transition (``>= 0``).
        end_value: Value after it (``>= 0``; larger than ``init_value`` for a warmup).
        transition_steps: Length of the transition in steps (an int ``>= 0``).
        transition_begin: Step at which it starts (an int ``>= 0``).

    Returns:
        A frozen :class:`LinearSchedule`, called as ``schedule(step) -> float``.

    Raises:
        TypeError: if a value is not a finite number.
        ValueError: on negative values or counts (Optax silently treats a negative
            ``transition_begin`` as 0).
    """
    return LinearSchedule(*_linear_args("linear_schedule", init_value, end_value,
                                        transition_steps, transition_begin))


def _linear_args(where, init_value, end_value, transition_steps, transition_begin) -> tuple:
    return (
        _number(where, "init_value", init_value),
        _number(where, "end_value", end_value),
        _count(where, "transition_steps", transition_steps),
        _count(where, "transition_begin", transition_begin),
    )


def piecewise_constant_schedule(
    init_value: float, boundaries_and_scales: dict | None = None
) -> PiecewiseConstantSchedule:
    """A value multiplied by a factor at given steps, Optax's ``piecewise_constant_schedule``.

    From step ``b`` on (``b`` included), the value is multiplied by ``boundaries_and_scales[b]``;
    the factors of all boundaries passed so far multiply together::

        value(step) = init_value * prod(scale for b, scale in boundaries_and_scales if step >= b)

    ``piecewise_constant_schedule(0.1, {30: 0.1, 80: 0.1})`` is 0.1 until step 29, 0.01 from
    step 30 and 0.001 from step 80 (PyTorch's ``MultiStepLR(milestones=[30, 80], gamma=0.1)``
    counted in the same steps).

    Args:
        init_value: Value before the first boundary (``>= 0``).
        boundaries_and_scales: Mapping from step (an int ``>= 0``) to factor (``>= 0``), or
            ``None`` for a constant schedule.

    Returns:
        A frozen :class:`PiecewiseConstantSchedule`, called as ``schedule(step) -> float``.

    Raises:
        TypeError: if ``boundaries_and_scales`` is not a mapping, or a value is not a finite
            number.
        ValueError: on a negative boundary, value or factor.
    """
    where = "piecewise_constant_schedule"
    init_value = _number(where, "init_value", init_value)
    if boundaries_and_scales is None:
        return PiecewiseConstantSchedule(init_value, ())
    if not isinstance(boundaries_and_scales, Mapping):
        raise TypeError(
            f"{where}: boundaries_and_scales must be a dict {{step: scale}}, got "
            f"{type(boundaries_and_scales).__name__}"
        )
    pairs = []
    for b, factor in boundaries_and_scales.items():
        pairs.append(
            (_count(where, f"boundary {b!r}", b), _number(where, f"the scale at {b}", factor))
        )
    return PiecewiseConstantSchedule(init_value, tuple(sorted(pairs)))


class LRScheduler(abc.ABC):
    """The scheduler interface of the stateful optimizers.

    ``scheduler(step, initial_lr, current_lr) -> new_lr``, called by
    ``Optimizer.update_lr()`` with the optimizer's ``timestep`` (1 on the first ``step``).
    """

    @abc.abstractmethod
    def __call__(self, step: int, initial_lr: float, current_lr: float) -> float:
        """The learning rate for ``step``."""


@attrs.frozen
class CosineScheduler(LRScheduler):
    """Cosine scheduler with warmup; ``initial_lr`` is the peak rate.

    Computes :func:`warmup_cosine_schedule`'s formula with ``peak_lr=initial_lr``.

    Args:
        warmup_steps: Number of warmup steps (``>= 0``).
        lr_decay_iters: Step at which the rate reaches ``min_lr`` (``> warmup_steps``).
        min_lr: Final rate.

    Raises:
        ValueError: on negative values or ``lr_decay_iters <= warmup_steps``.

    Example:
        >>> s = CosineScheduler(warmup_steps=10, lr_decay_iters=100, min_lr=1e-4)
        >>> s(0, 0.01, 0.01) == 0.01 * 1 / 11
        True
    """

    warmup_steps: int = 100
    lr_decay_iters: int = 200
    min_lr: float = 1e-4

    def __attrs_post_init__(self):
        _warmup_cosine_args("CosineScheduler", 1.0, self.warmup_steps, self.lr_decay_iters,
                            self.min_lr)

    def schedule(self, initial_lr: float) -> WarmupCosineSchedule:
        """This scheduler as a pure schedule ``step -> lr`` peaking at ``initial_lr``."""
        return warmup_cosine_schedule(
            initial_lr, self.warmup_steps, self.lr_decay_iters, self.min_lr
        )

    def __call__(self, step: int, initial_lr: float, current_lr: float | None = None) -> float:
        k = _step("CosineScheduler", step)
        return _cosine_with_warmup(
            k, float(initial_lr), self.warmup_steps, self.lr_decay_iters, self.min_lr
        )


strict_all(globals(), __all__)  # an unknown keyword is a TypeError naming the closest valid one
