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

:class:`LambdaLR`, :class:`MultiStepLR`, :class:`CosineAnnealingWarmRestarts`,
:class:`CyclicLR` and :class:`OneCycleLR` are PyTorch's stateful schedulers
(``torch.optim.lr_scheduler``): built on a stateful optimizer, they set its ``lr`` (and, for
the cyclic ones, its momentum) at once and at each ``step()``, called after ``optimizer.step``.

Example:
    >>> from tapegrad.optim import schedules
    >>> s = schedules.warmup_cosine_schedule(1.0, warmup_steps=2, lr_decay_iters=4, min_lr=0.0)
    >>> [round(s(k), 4) for k in range(6)]
    [0.3333, 0.6667, 1.0, 0.5, 0.0, 0.0]
"""

from __future__ import annotations

import abc
import copy
import math
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import numpy as np

from tapegrad import numpy as tnp
from tapegrad.core._keywords import strict_all
from tapegrad.core.tensor import Tensor
from tapegrad.optim.transforms import _choice, _count

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
    "polynomial_schedule",
    "cosine_decay_schedule",
    "join_schedules",
    "warmup_cosine_decay_schedule",
    "warmup_exponential_decay_schedule",
    "piecewise_interpolate_schedule",
    "linear_onecycle_schedule",
    "cosine_onecycle_schedule",
    "sgdr_schedule",
    "PolynomialSchedule",
    "CosineDecaySchedule",
    "JoinedSchedule",
    "PiecewiseInterpolateSchedule",
    "LambdaLR",
    "MultiStepLR",
    "CosineAnnealingWarmRestarts",
    "CyclicLR",
    "OneCycleLR",
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
        if self.decay_rate == 0:  # Optax: a zero rate disables the decay
            if t is None:
                _step("exponential_decay", step)
            return self.init_value if t is None else _f64(self.init_value)
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
    (above when ``decay_rate > 1``) if given. ``decay_rate=0`` gives the constant
    ``init_value`` (as Optax).

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


# -- more of Optax's schedules ---------------------------------------------------------------
@attrs.frozen
class PolynomialSchedule:
    """Optax's ``polynomial_schedule`` (see :func:`polynomial_schedule`)."""

    init_value: float
    end_value: float
    power: float
    transition_steps: int
    transition_begin: int = 0

    def __call__(self, step) -> float | Tensor:
        t = _tensor_step("polynomial_schedule", step)
        if t is not None:
            if self.transition_steps == 0:
                return _f64(self.init_value)
            done = tnp.clip(tnp.subtract(t, float(self.transition_begin)), 0.0,
                            float(self.transition_steps))
            frac = tnp.subtract(1.0, tnp.divide(done, float(self.transition_steps)))
            scaled = tnp.multiply(tnp.power(frac, self.power), self.init_value - self.end_value)
            return tnp.add(scaled, self.end_value)
        k = _step("polynomial_schedule", step)
        if self.transition_steps == 0:
            return self.init_value
        done = min(max(k - self.transition_begin, 0), self.transition_steps)
        frac = 1 - done / self.transition_steps
        return (self.init_value - self.end_value) * frac**self.power + self.end_value


def polynomial_schedule(
    init_value: float,
    end_value: float,
    power: float,
    transition_steps: int,
    transition_begin: int = 0,
) -> PolynomialSchedule:
    """A polynomial transition from ``init_value`` to ``end_value``, Optax's
    ``polynomial_schedule``::

        c = min(max(step - transition_begin, 0), transition_steps)
        value = (init_value - end_value) * (1 - c / transition_steps) ** power + end_value

    ``init_value`` until ``transition_begin``, ``end_value`` from ``transition_begin +
    transition_steps`` on; ``power=1`` is :func:`linear_schedule`, ``transition_steps=0`` the
    constant ``init_value`` (as Optax).

    Args:
        init_value: Value before the transition (``>= 0``).
        end_value: Value after it (``>= 0``).
        power: Exponent of the polynomial (``>= 0``; ``> 1`` falls fast, then flattens).
        transition_steps: Length of the transition in steps (an int ``>= 0``).
        transition_begin: Step at which it starts (an int ``>= 0``).

    Returns:
        A frozen :class:`PolynomialSchedule`, called as ``schedule(step) -> float``.

    Raises:
        TypeError: if a value is not a finite number.
        ValueError: on negative values or counts (Optax treats a negative
            ``transition_steps`` as 0 and a negative ``transition_begin`` as 0).

    Example:
        >>> from tapegrad import optim
        >>> s = optim.polynomial_schedule(1.0, 0.01, power=2, transition_steps=100)
        >>> round(s(50), 6), s(100)
        (0.2575, 0.01)
    """
    where = "polynomial_schedule"
    return PolynomialSchedule(
        _number(where, "init_value", init_value),
        _number(where, "end_value", end_value),
        _number(where, "power", power),
        _count(where, "transition_steps", transition_steps),
        _count(where, "transition_begin", transition_begin),
    )


@attrs.frozen
class CosineDecaySchedule:
    """Optax's ``cosine_decay_schedule`` (see :func:`cosine_decay_schedule`)."""

    init_value: float
    decay_steps: int
    alpha: float = 0.0
    exponent: float = 1.0

    def __call__(self, step) -> float | Tensor:
        t = _tensor_step("cosine_decay_schedule", step)
        if t is not None:
            count = tnp.minimum(t, float(self.decay_steps))
            cosine = tnp.multiply(
                tnp.add(tnp.cos(tnp.divide(tnp.multiply(count, math.pi),
                                           float(self.decay_steps))), 1.0), 0.5)
            decayed = tnp.add(tnp.multiply(tnp.power(cosine, self.exponent), 1 - self.alpha),
                              self.alpha)
            return tnp.multiply(decayed, self.init_value)
        k = _step("cosine_decay_schedule", step)
        count = min(float(k), float(self.decay_steps))
        cosine = 0.5 * (1 + math.cos(math.pi * count / self.decay_steps))
        decayed = (1 - self.alpha) * cosine**self.exponent + self.alpha
        return self.init_value * decayed


def cosine_decay_schedule(
    init_value: float, decay_steps: int, alpha: float = 0.0, exponent: float = 1.0
) -> CosineDecaySchedule:
    """Cosine decay, Optax's ``cosine_decay_schedule``::

        c = min(step, decay_steps)
        value = init_value * ((1 - alpha) * (0.5 * (1 + cos(pi * c / decay_steps))) ** exponent
                              + alpha)

    from ``init_value`` at step 0 to ``alpha * init_value`` at ``decay_steps`` and after.

    Args:
        init_value: Value at step 0 (``>= 0``).
        decay_steps: Length of the decay (an int ``>= 1``).
        alpha: Final value as a fraction of ``init_value`` (``>= 0``).
        exponent: Power of the cosine factor (``> 0``; 1 is the plain half cosine).

    Returns:
        A frozen :class:`CosineDecaySchedule`.

    Raises:
        TypeError: if a value is not a finite number.
        ValueError: if ``decay_steps < 1`` (as Optax) or a value is out of range.

    References:
        Loshchilov and Hutter, "SGDR: Stochastic Gradient Descent with Warm Restarts",
        ICLR 2017.

    Example:
        >>> from tapegrad import optim
        >>> s = optim.cosine_decay_schedule(1.0, decay_steps=10, alpha=0.1)
        >>> s(0), round(s(5), 6), round(s(10), 6), round(s(20), 6)
        (1.0, 0.55, 0.1, 0.1)
    """
    where = "cosine_decay_schedule"
    exponent = _number(where, "exponent", exponent)
    if exponent <= 0:
        raise ValueError(f"{where}: exponent must be > 0, got {exponent}")
    return CosineDecaySchedule(
        _number(where, "init_value", init_value),
        _count(where, "decay_steps", decay_steps, minimum=1),
        _number(where, "alpha", alpha),
        exponent,
    )


@attrs.frozen
class JoinedSchedule:
    """Optax's ``join_schedules`` (see :func:`join_schedules`)."""

    schedules: tuple
    boundaries: tuple

    def __call__(self, step) -> float | Tensor:
        t = _tensor_step("join_schedules", step)
        if t is not None:
            out = self.schedules[0](step)
            for boundary, schedule in zip(self.boundaries, self.schedules[1:]):
                later = schedule(tnp.astype(tnp.maximum(tnp.subtract(step, boundary), 0),
                                            step.dtype))
                out = tnp.where(tnp.less(t, float(boundary)), out, later)
            return out
        k = _step("join_schedules", step)
        start, current = 0, self.schedules[0]
        for boundary, schedule in zip(self.boundaries, self.schedules[1:]):
            if k >= boundary:
                start, current = boundary, schedule
        return current(k - start)


def join_schedules(schedules, boundaries) -> JoinedSchedule:
    """Schedules one after the other, Optax's ``join_schedules``.

    Before ``boundaries[0]`` the value is ``schedules[0](step)``; from ``boundaries[i]`` on
    (until the next boundary) it is ``schedules[i + 1](step - boundaries[i])``: each schedule
    counts its steps from its own start. As Optax, a later boundary wins where boundaries
    repeat or go down.

    Args:
        schedules: A sequence of ``k >= 1`` schedules (callables ``step -> value``).
        boundaries: A sequence of ``k - 1`` ints ``>= 0``: the steps at which to switch.

    Returns:
        A frozen :class:`JoinedSchedule`.

    Raises:
        TypeError: if a schedule is not callable, or the arguments are not sequences.
        ValueError: if the lengths do not fit or a boundary is negative.

    Example:
        >>> from tapegrad import optim
        >>> s = optim.join_schedules(
        ...     [optim.linear_schedule(0.0, 1.0, 4), optim.constant_schedule(0.5)], [4])
        >>> [s(k) for k in range(6)]
        [0.0, 0.25, 0.5, 0.75, 0.5, 0.5]
    """
    where = "join_schedules"
    try:
        schedules, boundaries = tuple(schedules), tuple(boundaries)
    except TypeError:
        raise TypeError(f"{where}: schedules and boundaries must be sequences") from None
    if not schedules:
        raise ValueError(f"{where}: needs at least one schedule")
    for i, s in enumerate(schedules):
        if not callable(s):
            raise TypeError(f"{where}: schedules[{i}] must be callable, got {type(s).__name__}")
    if len(boundaries) != len(schedules) - 1:
        raise ValueError(
            f"{where}: {len(schedules)} schedules need {len(schedules) - 1} boundaries, got "
            f"{len(boundaries)}"
        )
    return JoinedSchedule(
        schedules, tuple(_count(where, f"boundaries[{i}]", b) for i, b in enumerate(boundaries))
    )


def warmup_cosine_decay_schedule(
    init_value: float,
    peak_value: float,
    warmup_steps: int,
    decay_steps: int,
    end_value: float = 0.0,
    exponent: float = 1.0,
) -> JoinedSchedule:
    """Linear warmup then cosine decay, Optax's ``warmup_cosine_decay_schedule``.

    ``linear_schedule(init_value, peak_value, warmup_steps)`` until ``warmup_steps``, then
    ``cosine_decay_schedule(peak_value, decay_steps - warmup_steps, alpha=end_value /
    peak_value, exponent)`` (``alpha=0`` when ``peak_value`` is 0), joined at
    ``warmup_steps``: ``decay_steps`` counts the warmup.

    Args:
        init_value: Value at step 0 (``>= 0``).
        peak_value: Value at the end of the warmup (``>= 0``).
        warmup_steps: Length of the warmup (an int ``>= 0``).
        decay_steps: Total length, warmup included (an int ``> warmup_steps``).
        end_value: Value at ``decay_steps`` and after (``>= 0``).
        exponent: Power of the cosine factor (``> 0``).

    Returns:
        A frozen :class:`JoinedSchedule`.

    Raises:
        TypeError: if a value is not a finite number.
        ValueError: if ``decay_steps <= warmup_steps`` (as Optax) or a value is out of range.

    Example:
        >>> from tapegrad import optim
        >>> s = optim.warmup_cosine_decay_schedule(0.0, 1.0, warmup_steps=2, decay_steps=6)
        >>> [round(s(k), 4) for k in range(8)]
        [0.0, 0.5, 1.0, 0.8536, 0.5, 0.1464, 0.0, 0.0]
    """
    where = "warmup_cosine_decay_schedule"
    init_value = _number(where, "init_value", init_value)
    exponent = _number(where, "exponent", exponent)
    if exponent <= 0:
        raise ValueError(f"{where}: exponent must be > 0, got {exponent!r}")
    peak_value = _number(where, "peak_value", peak_value)
    end_value = _number(where, "end_value", end_value)
    warmup_steps = _count(where, "warmup_steps", warmup_steps)
    decay_steps = _count(where, "decay_steps", decay_steps)
    if decay_steps <= warmup_steps:
        raise ValueError(
            f"{where}: decay_steps ({decay_steps}) counts the warmup and must be greater than "
            f"warmup_steps ({warmup_steps})"
        )
    alpha = 0.0 if peak_value == 0.0 else end_value / peak_value
    return join_schedules(
        [
            linear_schedule(init_value, peak_value, warmup_steps),
            cosine_decay_schedule(peak_value, decay_steps - warmup_steps, alpha, exponent),
        ],
        [warmup_steps],
    )


def warmup_exponential_decay_schedule(
    init_value: float,
    peak_value: float,
    warmup_steps: int,
    transition_steps: int,
    decay_rate: float,
    transition_begin: int = 0,
    staircase: bool = False,
    end_value: float | None = None,
) -> JoinedSchedule:
    """Linear warmup then exponential decay, Optax's ``warmup_exponential_decay_schedule``.

    ``linear_schedule(init_value, peak_value, warmup_steps)`` until ``warmup_steps``, then
    ``exponential_decay(peak_value, transition_steps, decay_rate, transition_begin, staircase,
    end_value)`` counted from the end of the warmup.

    Args:
        init_value: Value at step 0 (``>= 0``).
        peak_value: Value at the end of the warmup (``>= 0``).
        warmup_steps: Length of the warmup (an int ``>= 0``).
        transition_steps, decay_rate, transition_begin, staircase, end_value: As
            :func:`exponential_decay`.

    Returns:
        A frozen :class:`JoinedSchedule`.

    Raises:
        TypeError: if a value is not a finite number.
        ValueError: on values out of range (see :func:`exponential_decay`).

    Example:
        >>> from tapegrad import optim
        >>> s = optim.warmup_exponential_decay_schedule(0.0, 1.0, 2, transition_steps=1,
        ...                                             decay_rate=0.5)
        >>> [s(k) for k in range(6)]
        [0.0, 0.5, 1.0, 0.5, 0.25, 0.125]
    """
    where = "warmup_exponential_decay_schedule"
    init_value = _number(where, "init_value", init_value)
    peak_value = _number(where, "peak_value", peak_value)
    _exponential_args(where, peak_value, transition_steps, decay_rate, transition_begin,
                      staircase, end_value)  # checked here, named as the caller wrote them
    return join_schedules(
        [
            linear_schedule(init_value, peak_value, _count(where, "warmup_steps", warmup_steps)),
            exponential_decay(peak_value, transition_steps, decay_rate, transition_begin,
                              staircase, end_value),
        ],
        [warmup_steps],
    )


@attrs.frozen
class PiecewiseInterpolateSchedule:
    """Optax's ``piecewise_interpolate_schedule`` (see :func:`piecewise_interpolate_schedule`)."""

    interpolate_type: str
    bounds: tuple  # (0, b_1, ..., b_k), the boundaries sorted
    values: tuple  # (v_0, ..., v_k): init_value and the running products of the scales

    def _interpolate(self, start, end, pct, xp):
        if self.interpolate_type == "linear":
            return (end - start) * pct + start
        return end + (start - end) / 2.0 * (xp.cos(math.pi * pct) + 1)

    def __call__(self, step) -> float | Tensor:
        b, v = self.bounds, self.values
        t = _tensor_step("piecewise_interpolate_schedule", step)
        if t is not None:
            out = tnp.multiply(tnp.astype(tnp.greater_equal(t, float(b[-1])), np.float64), v[-1])
            for i in range(len(b) - 1):
                inside = tnp.logical_and(tnp.greater_equal(t, float(b[i])),
                                         tnp.less(t, float(b[i + 1])))
                pct = tnp.divide(tnp.subtract(t, float(b[i])), float(max(b[i + 1] - b[i], 1)))
                value = self._interpolate(v[i], v[i + 1], pct, tnp)
                out = tnp.add(out, tnp.where(inside, value, 0.0))
            return out
        k = _step("piecewise_interpolate_schedule", step)
        out = v[-1] if k >= b[-1] else 0.0
        for i in range(len(b) - 1):
            if b[i] <= k < b[i + 1]:
                pct = (k - b[i]) / max(b[i + 1] - b[i], 1)
                out += self._interpolate(v[i], v[i + 1], pct, math)
        return out


def piecewise_interpolate_schedule(
    interpolate_type: str, init_value: float, boundaries_and_scales: dict | None = None
) -> PiecewiseInterpolateSchedule:
    """Linear or cosine interpolation between scaled values, Optax's
    ``piecewise_interpolate_schedule``.

    With the boundaries ``b_1 < ... < b_k`` (sorted keys of ``boundaries_and_scales``, ``b_0 =
    0``) and the values ``v_0 = init_value``, ``v_i = v_(i-1) * scale_i``, the value moves from
    ``v_i`` at ``b_i`` to ``v_(i+1)`` at ``b_(i+1)``, in a straight line (``"linear"``) or a
    half cosine (``"cosine"``: ``v_(i+1) + (v_i - v_(i+1)) / 2 * (cos(pi * pct) + 1)``), and is
    ``v_k`` from ``b_k`` on. The scales multiply: they are not the values themselves.

    Args:
        interpolate_type: ``"linear"`` or ``"cosine"``.
        init_value: Value at step 0 (``>= 0``).
        boundaries_and_scales: Mapping from step (an int ``>= 0``) to factor (``>= 0``), or
            ``None`` for a constant schedule.

    Returns:
        A frozen :class:`PiecewiseInterpolateSchedule`.

    Raises:
        TypeError: if ``boundaries_and_scales`` is not a mapping or a value is not a number.
        ValueError: for another ``interpolate_type``, or a negative boundary, value or scale.

    Example:
        >>> from tapegrad import optim
        >>> s = optim.piecewise_interpolate_schedule("linear", 1.0, {4: 0.1, 8: 0.01})
        >>> [round(s(k), 6) for k in (0, 2, 4, 6, 8, 10)]
        [1.0, 0.55, 0.1, 0.0505, 0.001, 0.001]
    """
    where = "piecewise_interpolate_schedule"
    _choice(where, "interpolate_type", interpolate_type, ("linear", "cosine"))
    init_value = _number(where, "init_value", init_value)
    pairs = piecewise_constant_schedule(init_value, boundaries_and_scales).boundaries_and_scales
    bounds, values = [0], [init_value]
    for boundary, scale in pairs:
        bounds.append(boundary)
        values.append(values[-1] * scale)
    return PiecewiseInterpolateSchedule(interpolate_type, tuple(bounds), tuple(values))


def _onecycle_checks(where, transition_steps, peak_value, div_factor, final_div_factor,
                     pct_start):
    """The one-cycle schedules' common arguments, checked: ``(steps, peak, div, final_div,
    pct_start)``."""
    steps = _count(where, "transition_steps", transition_steps, minimum=1)
    peak = _number(where, "peak_value", peak_value)
    for name, value in (("div_factor", div_factor), ("final_div_factor", final_div_factor)):
        if _number(where, name, value) <= 0:
            raise ValueError(f"{where}: {name} must be > 0, got {value!r}")
    return (steps, peak, float(div_factor), float(final_div_factor),
            _fraction(where, "pct_start", pct_start))


#: The Returns, Raises and References sections of both one-cycle schedules (the line
#: ``__ONECYCLE__`` of their docstrings).
_ONECYCLE_DOC = """Returns:
        A frozen :class:`PiecewiseInterpolateSchedule`.

    Raises:
        TypeError: if a value is not a finite number.
        ValueError: if ``transition_steps < 1`` (as Optax) or a value is out of range.

    References:
        Smith and Topin, "Super-Convergence: Very Fast Training of Neural Networks Using Large
        Learning Rates", 2017."""


def _fraction(where: str, name: str, value) -> float:
    value = _number(where, name, value)
    if value > 1:
        raise ValueError(f"{where}: {name} must lie in [0, 1], got {value!r}")
    return value


def linear_onecycle_schedule(
    transition_steps: int,
    peak_value: float,
    pct_start: float = 0.3,
    pct_final: float = 0.85,
    div_factor: float = 25.0,
    final_div_factor: float = 1e4,
) -> PiecewiseInterpolateSchedule:
    """The one-cycle policy in three linear phases, Optax's ``linear_onecycle_schedule``.

    From ``peak_value / div_factor`` up to ``peak_value`` at ``int(pct_start *
    transition_steps)``, back down to ``peak_value / div_factor`` at ``int(pct_final *
    transition_steps)``, then to ``peak_value / div_factor / final_div_factor`` at
    ``transition_steps``, where it stays: :func:`piecewise_interpolate_schedule` with
    ``"linear"`` and the scales ``{int(pct_start * T): div_factor, int(pct_final * T): 1 /
    div_factor, T: 1 / final_div_factor}`` (built as that dict literal, so a repeated key keeps
    its last scale, as in Optax).

    Args:
        transition_steps: Length of the cycle ``T`` (an int ``>= 1``).
        peak_value: Largest value (``>= 0``).
        pct_start: Fraction of the cycle spent rising (in ``[0, 1]``).
        pct_final: Fraction of the cycle at the end of the fall (in ``[0, 1]``).
        div_factor: ``peak_value / div_factor`` is the first value (``> 0``).
        final_div_factor: The last value is the first divided by this (``> 0``).

    __ONECYCLE__

    Example:
        >>> from tapegrad import optim
        >>> s = optim.linear_onecycle_schedule(10, 1.0, pct_start=0.2, pct_final=0.6)
        >>> [round(s(k), 4) for k in (0, 2, 4, 6, 10)]
        [0.04, 1.0, 0.52, 0.04, 0.0]
    """
    where = "linear_onecycle_schedule"
    steps, peak, div, final_div, pct_start = _onecycle_checks(
        where, transition_steps, peak_value, div_factor, final_div_factor, pct_start)
    pct_final = _fraction(where, "pct_final", pct_final)
    return piecewise_interpolate_schedule(
        "linear",
        peak / div,
        {int(pct_start * steps): div, int(pct_final * steps): 1.0 / div, steps: 1.0 / final_div},
    )


def cosine_onecycle_schedule(
    transition_steps: int,
    peak_value: float,
    pct_start: float = 0.3,
    div_factor: float = 25.0,
    final_div_factor: float = 1e4,
) -> PiecewiseInterpolateSchedule:
    """The one-cycle policy with cosine phases, Optax's ``cosine_onecycle_schedule``.

    From ``peak_value / div_factor`` up to ``peak_value`` at ``int(pct_start *
    transition_steps)``, then down to ``peak_value / (div_factor * final_div_factor)`` at
    ``transition_steps``, along half cosines, then constant:
    :func:`piecewise_interpolate_schedule` with ``"cosine"`` and the scales
    ``{int(pct_start * T): div_factor, T: 1 / (div_factor * final_div_factor)}``.

    Args:
        transition_steps: Length of the cycle ``T`` (an int ``>= 1``).
        peak_value: Largest value (``>= 0``).
        pct_start: Fraction of the cycle spent rising (in ``[0, 1]``).
        div_factor: ``peak_value / div_factor`` is the first value (``> 0``).
        final_div_factor: The last value is ``peak_value / (div_factor * final_div_factor)``
            (``> 0``).

    __ONECYCLE__

    Example:
        >>> from tapegrad import optim
        >>> s = optim.cosine_onecycle_schedule(10, 1.0, pct_start=0.2)
        >>> [round(s(k), 4) for k in (0, 1, 2, 6, 10)]
        [0.04, 0.52, 1.0, 0.5, 0.0]
    """
    steps, peak, div, final_div, pct_start = _onecycle_checks(
        "cosine_onecycle_schedule", transition_steps, peak_value, div_factor, final_div_factor,
        pct_start)
    return piecewise_interpolate_schedule(
        "cosine", peak / div, {int(pct_start * steps): div, steps: 1.0 / (div * final_div)}
    )


for _f in (linear_onecycle_schedule, cosine_onecycle_schedule):
    _f.__doc__ = _f.__doc__.replace("__ONECYCLE__", _ONECYCLE_DOC)  # pyright: ignore[reportOptionalMemberAccess]


_SGDR_KEYS = ("init_value", "peak_value", "warmup_steps", "decay_steps", "end_value", "exponent")


def sgdr_schedule(cosine_kwargs) -> JoinedSchedule:
    """Stochastic gradient descent with warm restarts (SGDR), Optax's ``sgdr_schedule``.

    One :func:`warmup_cosine_decay_schedule` per entry of ``cosine_kwargs``, joined one after
    the other: cycle ``i`` lasts its ``decay_steps`` (warmup included) and restarts the next.

    Args:
        cosine_kwargs: A sequence of dicts of :func:`warmup_cosine_decay_schedule`'s keyword
            arguments (``init_value``, ``peak_value``, ``warmup_steps``, ``decay_steps``, and
            optionally ``end_value`` and ``exponent``), one per cycle.

    Returns:
        A frozen :class:`JoinedSchedule`.

    Raises:
        TypeError: if an entry is not a dict or has an unknown key.
        ValueError: for no cycles, or values out of range (see
            :func:`warmup_cosine_decay_schedule`).

    References:
        Loshchilov and Hutter, "SGDR: Stochastic Gradient Descent with Warm Restarts",
        ICLR 2017.

    Example:
        >>> from tapegrad import optim
        >>> cycle = dict(init_value=0.0, peak_value=1.0, warmup_steps=1, decay_steps=3)
        >>> s = optim.sgdr_schedule([cycle, cycle])
        >>> [round(s(k), 3) for k in range(7)]
        [0.0, 1.0, 0.5, 0.0, 1.0, 0.5, 0.0]
    """
    where = "sgdr_schedule"
    try:
        cycles = list(cosine_kwargs)
    except TypeError:
        raise TypeError(f"{where}: cosine_kwargs must be a sequence of dicts") from None
    if not cycles:
        raise ValueError(f"{where}: cosine_kwargs needs at least one cycle")
    schedules, boundaries, step = [], [], 0
    for i, kwargs in enumerate(cycles):
        if not isinstance(kwargs, Mapping):
            raise TypeError(f"{where}: cosine_kwargs[{i}] must be a dict, got "
                            f"{type(kwargs).__name__}")
        unknown = sorted(set(kwargs) - set(_SGDR_KEYS))
        if unknown:
            raise TypeError(f"{where}: cosine_kwargs[{i}] has unknown keys {unknown}; "
                            f"warmup_cosine_decay_schedule takes {list(_SGDR_KEYS)}")
        schedules.append(warmup_cosine_decay_schedule(**kwargs))
        step += kwargs["decay_steps"]
        boundaries.append(step)
    return join_schedules(schedules, boundaries[:-1])


# -- PyTorch's stateful schedulers -----------------------------------------------------------
def _optimizer(where: str, optimizer):
    """``optimizer`` checked: a stateful :class:`~tapegrad.optim.Optimizer` with no
    ``lr_scheduler`` of its own (which would overwrite ``lr`` at every step)."""
    from tapegrad.optim.optimizer import Optimizer

    if not isinstance(optimizer, Optimizer):
        raise TypeError(f"{where}: optimizer must be an optim.Optimizer (SGD, Adam, ...), got "
                        f"{type(optimizer).__name__}")
    if optimizer.lr_scheduler is not None:
        raise TypeError(
            f"{where}: the optimizer has an lr_scheduler, which sets lr at every step and would "
            "undo this scheduler's; build it without lr_scheduler_kwargs."
        )
    return optimizer


def _momentum_name(where: str, optimizer) -> str:
    """The optimizer's momentum hyperparameter (``momentum``, or ``beta1`` where PyTorch cycles
    ``betas[0]``), for ``cycle_momentum``."""
    h = optimizer.hyperparams
    name = "momentum" if "momentum" in h else "beta1" if "beta1" in h else None
    if name is None:
        raise ValueError(f"{where}: cycle_momentum=True needs an optimizer with a momentum or "
                         f"beta1 hyperparameter; {type(optimizer).__name__} has neither (pass "
                         "cycle_momentum=False)")
    if not h[name]:
        raise ValueError(
            f"{where}: cycle_momentum=True needs an optimizer built with {name} > 0 (its momentum "
            f"buffer is part of the optimizer state); build {type(optimizer).__name__} with "
            f"{name}=0.9, say, or pass cycle_momentum=False"
        )
    return name


def _set_hyperparam(optimizer, name: str, value: float) -> None:
    """Set a hyperparameter the optimizer rebuilds its update from at each step."""
    optimizer._hyperparams[name] = float(value)


def _last_epoch(where: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < -1:
        raise ValueError(f"{where}: last_epoch must be an int >= -1, got {value!r}")
    return value


class _TorchScheduler:
    """The shared protocol of PyTorch's schedulers (``torch.optim.lr_scheduler.LRScheduler``):
    built on an optimizer, they set its ``lr`` at once (step ``last_epoch + 1``, 0 for a new
    run) and at each :meth:`step`, called after ``optimizer.step``."""

    _state_keys: tuple = ()

    def _start(self, optimizer, last_epoch: int, base_lr: float | None = None) -> None:
        self.optimizer = optimizer
        if base_lr is None:
            base_lr = optimizer.lr if last_epoch == -1 else optimizer.initial_lr
        self.base_lrs: list[float] = [float(base_lr)]  # pyright: ignore[reportArgumentType]
        self.last_epoch = last_epoch
        self._last_lr = [optimizer.lr]
        self.step()

    def _lr(self) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    def step(self) -> None:
        """Advance one step (``last_epoch += 1``) and set ``optimizer.lr`` for it."""
        self.last_epoch += 1
        self.optimizer.lr = self._lr()
        self._last_lr = [self.optimizer.lr]

    def get_last_lr(self) -> list:
        """The rate set by the last :meth:`step`, as a one-element list (PyTorch's list has one
        entry per parameter group; these optimizers have one)."""
        return list(self._last_lr)

    def state_dict(self) -> dict:
        """The scheduler's state (Python numbers and lists; the optimizer is not included),
        for ``tapegrad.io.save`` and :meth:`load_state_dict`."""
        keys = ("last_epoch", "base_lrs", "_last_lr") + self._state_keys
        return {k: copy.deepcopy(getattr(self, k)) for k in keys}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore the state from :meth:`state_dict` output (the optimizer's own state is
        restored with its ``load_state_dict``).

        Raises:
            TypeError: if ``state_dict`` is not such a dict.
        """
        where = f"{type(self).__name__}.load_state_dict"
        keys = {"last_epoch", "base_lrs", "_last_lr", *self._state_keys}
        if not isinstance(state_dict, dict) or set(state_dict) != keys:
            raise TypeError(f"{where}: expected the keys {sorted(keys)} from state_dict()")
        for k in keys:
            setattr(self, k, copy.deepcopy(state_dict[k]))


class LambdaLR(_TorchScheduler):
    """``lr = base_lr * lr_lambda(epoch)``, PyTorch's ``torch.optim.lr_scheduler.LambdaLR``.

    ``base_lr`` is the optimizer's ``lr`` when the scheduler is built. The rate is set at once
    for epoch 0 and after each :meth:`step`.

    Args:
        optimizer: A stateful :class:`~tapegrad.optim.Optimizer` built without
            ``lr_scheduler_kwargs``.
        lr_lambda: ``epoch -> factor`` (a callable, or a one-element list of one: PyTorch's
            per-parameter-group form).
        last_epoch: The last epoch of a run being resumed (``-1``: a new run). With it,
            ``base_lr`` is the optimizer's ``initial_lr``.

    Attributes:
        last_epoch: Epochs stepped.
        base_lrs: ``[base_lr]``.

    Raises:
        TypeError: for a bad optimizer or a non-callable ``lr_lambda``.
        ValueError: for a list of several functions, or a factor giving a negative rate.

    Example:
        >>> import numpy as np
        >>> import tapegrad as tg
        >>> from tapegrad import optim
        >>> opt = optim.SGD({"w": tg.Tensor(np.zeros(2))}, lr=0.1)
        >>> sched = optim.LambdaLR(opt, lambda epoch: 0.5 ** epoch)
        >>> sched.step(); sched.step()
        >>> opt.lr, sched.get_last_lr()
        (0.025, [0.025])
    """

    def __init__(self, optimizer, lr_lambda: Callable[[int], float] | list,
                 last_epoch: int = -1) -> None:
        where = "LambdaLR"
        _optimizer(where, optimizer)
        fn = lr_lambda
        if isinstance(fn, (list, tuple)):
            if len(fn) != 1:
                raise ValueError(f"{where}: expected 1 lr_lambda (one parameter group), got "
                                 f"{len(fn)}")
            fn = fn[0]
        if not callable(fn):
            raise TypeError(f"{where}: lr_lambda must be callable epoch -> factor, got "
                            f"{type(fn).__name__}")
        self.lr_lambda: Callable[[int], Any] = fn
        self._start(optimizer, _last_epoch(where, last_epoch))

    def _lr(self) -> float:
        return self.base_lrs[0] * float(self.lr_lambda(self.last_epoch))


class MultiStepLR(_TorchScheduler):
    """Multiply the rate by ``gamma`` at each milestone epoch, PyTorch's
    ``torch.optim.lr_scheduler.MultiStepLR``.

    Chainable, as PyTorch's: at an epoch listed ``n`` times in ``milestones`` the optimizer's
    current ``lr`` is multiplied by ``gamma ** n`` (so changes made to ``lr`` by others, a
    :class:`~tapegrad.optim.ReduceLROnPlateau` say, are kept); otherwise ``lr`` is left alone.
    For a fresh run this is ``base_lr * gamma ** (number of milestones <= epoch)``.

    Args:
        optimizer: A stateful :class:`~tapegrad.optim.Optimizer` built without
            ``lr_scheduler_kwargs``.
        milestones: Epochs (ints ``>= 0``) at which to decay.
        gamma: Factor (``>= 0``).
        last_epoch: The last epoch of a run being resumed (``-1``: a new run).

    Raises:
        TypeError: for a bad optimizer or non-int milestones.
        ValueError: for negative milestones or ``gamma``.

    Example:
        >>> import numpy as np
        >>> import tapegrad as tg
        >>> from tapegrad import optim
        >>> opt = optim.SGD({"w": tg.Tensor(np.zeros(2))}, lr=1.0)
        >>> sched = optim.MultiStepLR(opt, milestones=[2, 4], gamma=0.5)
        >>> rates = [opt.lr]
        >>> for _ in range(5):
        ...     sched.step()
        ...     rates.append(opt.lr)
        >>> rates
        [1.0, 1.0, 0.5, 0.5, 0.25, 0.25]
    """

    _state_keys = ("milestones", "gamma")

    def __init__(self, optimizer, milestones, gamma: float = 0.1, last_epoch: int = -1) -> None:
        where = "MultiStepLR"
        _optimizer(where, optimizer)
        try:
            ms = list(milestones)
        except TypeError:
            raise TypeError(f"{where}: milestones must be a sequence of ints, got "
                            f"{type(milestones).__name__}") from None
        for m in ms:
            if isinstance(m, bool) or not isinstance(m, (int, np.integer)):
                raise TypeError(f"{where}: milestones must be ints, got {m!r}")
            if m < 0:
                raise ValueError(f"{where}: milestones must be >= 0, got {m}")
        self.milestones = sorted(int(m) for m in ms)
        self.gamma = _number(where, "gamma", gamma)
        self._start(optimizer, _last_epoch(where, last_epoch))

    def _lr(self) -> float:
        n = self.milestones.count(self.last_epoch)
        return self.optimizer.lr * self.gamma**n if n else self.optimizer.lr


class CosineAnnealingWarmRestarts(_TorchScheduler):
    """Cosine annealing with warm restarts (SGDR), PyTorch's
    ``torch.optim.lr_scheduler.CosineAnnealingWarmRestarts``::

        lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * T_cur / T_i)) / 2

    ``T_cur`` counts the epochs since the last restart; the first cycle lasts ``T_0`` epochs,
    each next one ``T_mult`` times longer. :meth:`step` may be given a (fractional) epoch, as
    PyTorch's, to anneal within an epoch: ``step(epoch + i / iters)``.

    Args:
        optimizer: A stateful :class:`~tapegrad.optim.Optimizer` built without
            ``lr_scheduler_kwargs``; its ``lr`` is ``base_lr``, the top of each cycle.
        T_0: Length of the first cycle (an int ``>= 1``).
        T_mult: Growth factor of the cycles (an int ``>= 1``).
        eta_min: Lowest rate (``>= 0``).
        last_epoch: The last epoch of a run being resumed (``-1``: a new run).

    Attributes:
        T_cur: Epochs since the last restart.
        T_i: Length of the current cycle.

    Raises:
        TypeError: for a bad optimizer.
        ValueError: for ``T_0 < 1``, ``T_mult < 1`` or a negative ``eta_min``.

    References:
        Loshchilov and Hutter, "SGDR: Stochastic Gradient Descent with Warm Restarts",
        ICLR 2017.

    Example:
        >>> import numpy as np
        >>> import tapegrad as tg
        >>> from tapegrad import optim
        >>> opt = optim.SGD({"w": tg.Tensor(np.zeros(2))}, lr=1.0)
        >>> sched = optim.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=2)
        >>> rates = [opt.lr]
        >>> for _ in range(6):
        ...     sched.step()
        ...     rates.append(round(opt.lr, 4))
        >>> rates
        [1.0, 0.5, 1.0, 0.8536, 0.5, 0.1464, 1.0]
    """

    _state_keys = ("T_0", "T_i", "T_mult", "eta_min", "T_cur")

    def __init__(self, optimizer, T_0: int, T_mult: int = 1, eta_min: float = 0.0,
                 last_epoch: int = -1) -> None:
        where = "CosineAnnealingWarmRestarts"
        _optimizer(where, optimizer)
        self.T_0 = _count(where, "T_0", T_0, minimum=1)
        self.T_i = self.T_0
        self.T_mult = _count(where, "T_mult", T_mult, minimum=1)
        self.eta_min = _number(where, "eta_min", eta_min)
        self.T_cur = _last_epoch(where, last_epoch)
        self._start(optimizer, last_epoch)

    def _lr(self) -> float:
        return self.eta_min + (self.base_lrs[0] - self.eta_min) * (
            1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2

    def step(self, epoch: float | None = None) -> None:
        """Advance one epoch, or go to ``epoch`` (a number ``>= 0``, fractional allowed), and
        set ``optimizer.lr``.

        Raises:
            TypeError: if ``epoch`` is not a number. ValueError: if it is negative.
        """
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur = self.T_cur + 1
            if self.T_cur >= self.T_i:
                self.T_cur = self.T_cur % self.T_i
                self.T_i = self.T_i * self.T_mult
        else:
            if isinstance(epoch, bool) or not isinstance(epoch, (int, float)) or not (
                    math.isfinite(epoch)):
                raise TypeError(f"CosineAnnealingWarmRestarts.step: epoch must be a number, "
                                f"got {epoch!r}")
            if epoch < 0:
                raise ValueError(f"CosineAnnealingWarmRestarts.step: epoch must be >= 0, got "
                                 f"{epoch}")
            if epoch >= self.T_0:
                if self.T_mult == 1:
                    self.T_cur = epoch % self.T_0
                else:
                    n = int(math.log((epoch / self.T_0 * (self.T_mult - 1) + 1), self.T_mult))
                    self.T_cur = epoch - self.T_0 * (self.T_mult**n - 1) / (self.T_mult - 1)
                    self.T_i = self.T_0 * self.T_mult**n
            else:
                self.T_i = self.T_0
                self.T_cur = epoch
        self.last_epoch = math.floor(epoch)
        self.optimizer.lr = self._lr()
        self._last_lr = [self.optimizer.lr]


class CyclicLR(_TorchScheduler):
    """Cyclical learning rates, PyTorch's ``torch.optim.lr_scheduler.CyclicLR`` (step it after
    every batch)::

        cycle = floor(1 + n / (up + down));  x = 1 + n / (up + down) - cycle
        s = x / r if x <= r else (x - 1) / (r - 1)          (r = up / (up + down))
        lr = base_lr + (max_lr - base_lr) * s * scale

    with ``scale`` 1 (``"triangular"``), ``1 / 2 ** (cycle - 1)`` (``"triangular2"``),
    ``gamma ** n`` (``"exp_range"``) or ``scale_fn(cycle)`` / ``scale_fn(n)`` (per
    ``scale_mode``). With ``cycle_momentum`` the momentum moves the other way, from
    ``max_momentum`` (at ``base_lr``) to ``base_momentum`` (at ``max_lr``).

    Args:
        optimizer: A stateful :class:`~tapegrad.optim.Optimizer` built without
            ``lr_scheduler_kwargs``; its ``lr`` is set to ``base_lr``.
        base_lr: Lower rate of the cycle (``>= 0``).
        max_lr: Upper rate (``>= 0``).
        step_size_up: Steps of the rising half (``> 0``).
        step_size_down: Steps of the falling half (``> 0``; default ``step_size_up``).
        mode: ``"triangular"``, ``"triangular2"`` or ``"exp_range"`` (ignored with
            ``scale_fn``).
        gamma: The factor of ``"exp_range"`` (``>= 0``).
        scale_fn: Optional custom scaling ``x -> factor in [0, 1]``.
        scale_mode: ``"cycle"`` or ``"iterations"``: what ``scale_fn`` is given.
        cycle_momentum: Cycle the optimizer's ``momentum`` (SGD, RMSprop; built with momentum
            ``> 0``) or ``beta1`` (Adam, AdamW, Lion), as PyTorch cycles ``momentum`` or
            ``betas[0]``.
        base_momentum, max_momentum: Bounds of the momentum cycle.
        last_epoch: The last batch of a run being resumed (``-1``: a new run).

    Raises:
        TypeError: for a bad optimizer or a non-callable ``scale_fn``.
        ValueError: for an unknown mode or scale mode, non-positive step sizes, negative
            rates, or ``cycle_momentum`` with an optimizer without (non-zero) momentum.

    References:
        Smith, "Cyclical Learning Rates for Training Neural Networks", WACV 2017.

    Example:
        >>> import numpy as np
        >>> import tapegrad as tg
        >>> from tapegrad import optim
        >>> opt = optim.SGD({"w": tg.Tensor(np.zeros(2))}, lr=0.1, momentum=0.9)
        >>> sched = optim.CyclicLR(opt, base_lr=0.1, max_lr=0.5, step_size_up=2)
        >>> rates = [opt.lr]
        >>> for _ in range(4):
        ...     sched.step()
        ...     rates.append(round(opt.lr, 6))
        >>> rates
        [0.1, 0.3, 0.5, 0.3, 0.1]
    """

    _state_keys = ("max_lrs", "total_size", "step_ratio", "mode", "gamma", "scale_mode",
                   "cycle_momentum", "base_momentums", "max_momentums")

    def __init__(
        self,
        optimizer,
        base_lr: float,
        max_lr: float,
        step_size_up: float = 2000,
        step_size_down: float | None = None,
        mode: str = "triangular",
        gamma: float = 1.0,
        scale_fn: Callable[[float], float] | None = None,
        scale_mode: str = "cycle",
        cycle_momentum: bool = True,
        base_momentum: float = 0.8,
        max_momentum: float = 0.9,
        last_epoch: int = -1,
    ) -> None:
        where = "CyclicLR"
        _optimizer(where, optimizer)
        last_epoch = _last_epoch(where, last_epoch)
        base_lr = _number(where, "base_lr", base_lr)
        self.max_lrs = [_number(where, "max_lr", max_lr)]
        up = _number(where, "step_size_up", step_size_up)
        down = up if step_size_down is None else _number(where, "step_size_down", step_size_down)
        if up <= 0 or down <= 0:
            raise ValueError(f"{where}: step_size_up and step_size_down must be > 0, got "
                             f"{step_size_up!r} and {step_size_down!r}")
        self.total_size = up + down
        self.step_ratio = up / self.total_size
        if scale_fn is None and mode not in ("triangular", "triangular2", "exp_range"):
            raise ValueError(f"{where}: mode must be 'triangular', 'triangular2' or "
                             f"'exp_range' (or pass scale_fn), got {mode!r}")
        if scale_fn is not None and not callable(scale_fn):
            raise TypeError(f"{where}: scale_fn must be callable, got {type(scale_fn).__name__}")
        if scale_mode not in ("cycle", "iterations"):
            raise ValueError(f"{where}: scale_mode must be 'cycle' or 'iterations', got "
                             f"{scale_mode!r}")
        self.mode = mode
        self.gamma = _number(where, "gamma", gamma)
        self.scale_fn_custom: Callable[[float], float] | None = scale_fn
        self.scale_mode = scale_mode if scale_fn is not None else (
            "iterations" if mode == "exp_range" else "cycle")
        self.cycle_momentum = bool(cycle_momentum)
        self.base_momentums = [_number(where, "base_momentum", base_momentum)]
        self.max_momentums = [_number(where, "max_momentum", max_momentum)]
        if self.cycle_momentum:
            self._momentum = _momentum_name(where, optimizer)
            if last_epoch == -1:
                _set_hyperparam(optimizer, self._momentum, self.max_momentums[0])
        if last_epoch == -1:
            optimizer.lr = base_lr
        self._start(optimizer, last_epoch, base_lr)

    def _scale(self, x: float) -> float:
        if self.scale_fn_custom is not None:
            return float(self.scale_fn_custom(x))
        if self.mode == "triangular":
            return 1.0
        if self.mode == "triangular2":
            return 1 / (2.0 ** (x - 1))
        return self.gamma**x

    def _lr(self) -> float:
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle
        if x <= self.step_ratio:
            factor = x / self.step_ratio
        else:
            factor = (x - 1) / (self.step_ratio - 1)
        scale = self._scale(cycle if self.scale_mode == "cycle" else self.last_epoch)
        lr = self.base_lrs[0] + (self.max_lrs[0] - self.base_lrs[0]) * factor * scale
        if self.cycle_momentum:
            top, low = self.max_momentums[0], self.base_momentums[0]
            _set_hyperparam(self.optimizer, self._momentum, top - (top - low) * factor * scale)
        return lr


class OneCycleLR(_TorchScheduler):
    """The one-cycle policy, PyTorch's ``torch.optim.lr_scheduler.OneCycleLR`` (step it after
    every batch).

    The rate rises from ``max_lr / div_factor`` to ``max_lr`` over the first
    ``pct_start * total_steps - 1`` steps, then falls to ``max_lr / div_factor /
    final_div_factor`` at step ``total_steps - 1``, annealing with a half cosine (``"cos"``)
    or a straight line (``"linear"``); ``three_phase`` returns to the initial rate
    symmetrically first, then falls to the minimum. With ``cycle_momentum`` the momentum moves
    the other way between ``max_momentum`` and ``base_momentum``. The step after the cycle
    (step ``total_steps``) extrapolates the last phase, as in PyTorch, except that a rate the
    linear anneal would take below 0 is 0 (PyTorch sets the negative rate; these optimizers
    reject one); stepping further raises, as in PyTorch.

    Args:
        optimizer: A stateful :class:`~tapegrad.optim.Optimizer` built without
            ``lr_scheduler_kwargs``.
        max_lr: Peak rate (``>= 0``).
        total_steps: Steps in the cycle (an int ``>= 1``); or give ``epochs`` and
            ``steps_per_epoch`` (their product).
        epochs, steps_per_epoch: Ints ``>= 1``, used when ``total_steps`` is None.
        pct_start: Fraction of the cycle spent rising (in ``[0, 1]``).
        anneal_strategy: ``"cos"`` or ``"linear"``.
        cycle_momentum: Cycle the optimizer's ``momentum`` (SGD, RMSprop; built with momentum
            ``> 0``) or ``beta1`` (Adam, AdamW, Lion).
        base_momentum, max_momentum: Bounds of the momentum cycle.
        div_factor: The first rate is ``max_lr / div_factor`` (``> 0``).
        final_div_factor: The last rate is the first divided by this (``> 0``).
        three_phase: Use the three phases of the original paper.
        last_epoch: The last batch of a run being resumed (``-1``: a new run).

    Raises:
        TypeError: for a bad optimizer.
        ValueError: for a missing or bad length, values out of range, an unknown strategy,
            ``cycle_momentum`` with an optimizer without (non-zero) momentum, or a step past
            ``total_steps``.

    References:
        Smith and Topin, "Super-Convergence: Very Fast Training of Neural Networks Using Large
        Learning Rates", 2017.

    Example:
        >>> import numpy as np
        >>> import tapegrad as tg
        >>> from tapegrad import optim
        >>> opt = optim.Adam({"w": tg.Tensor(np.zeros(2))}, lr=0.01)
        >>> sched = optim.OneCycleLR(opt, max_lr=1.0, total_steps=10)
        >>> round(opt.lr, 6), opt.hyperparams["beta1"]
        (0.04, 0.95)
        >>> for _ in range(2):
        ...     sched.step()
        >>> round(opt.lr, 6), round(opt.hyperparams["beta1"], 6)
        (1.0, 0.85)
    """

    _state_keys = ("total_steps", "phases", "anneal_strategy", "cycle_momentum",
                   "initial_lr", "max_lr", "min_lr", "base_momentum", "max_momentum")

    def __init__(
        self,
        optimizer,
        max_lr: float,
        total_steps: int | None = None,
        epochs: int | None = None,
        steps_per_epoch: int | None = None,
        pct_start: float = 0.3,
        anneal_strategy: str = "cos",
        cycle_momentum: bool = True,
        base_momentum: float = 0.85,
        max_momentum: float = 0.95,
        div_factor: float = 25.0,
        final_div_factor: float = 1e4,
        three_phase: bool = False,
        last_epoch: int = -1,
    ) -> None:
        where = "OneCycleLR"
        _optimizer(where, optimizer)
        if total_steps is not None:
            self.total_steps = _count(where, "total_steps", total_steps, minimum=1)
        elif epochs is not None and steps_per_epoch is not None:
            self.total_steps = (_count(where, "epochs", epochs, minimum=1)
                                * _count(where, "steps_per_epoch", steps_per_epoch, minimum=1))
        else:
            raise ValueError(f"{where}: give total_steps, or both epochs and steps_per_epoch")
        pct = _fraction(where, "pct_start", pct_start)
        n = self.total_steps
        if three_phase:  # (end step, start lr, end lr, start momentum, end momentum)
            self.phases = [
                [float(pct * n) - 1, "initial_lr", "max_lr", "max_momentum", "base_momentum"],
                [float(2 * pct * n) - 2, "max_lr", "initial_lr", "base_momentum", "max_momentum"],
                [n - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum"],
            ]
        else:
            self.phases = [
                [float(pct * n) - 1, "initial_lr", "max_lr", "max_momentum", "base_momentum"],
                [n - 1, "max_lr", "min_lr", "base_momentum", "max_momentum"],
            ]
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"{where}: anneal_strategy must be 'cos' or 'linear', got "
                             f"{anneal_strategy!r}")
        self.anneal_strategy = anneal_strategy
        self.max_lr = _number(where, "max_lr", max_lr)
        for name, value in (("div_factor", div_factor), ("final_div_factor", final_div_factor)):
            if _number(where, name, value) <= 0:
                raise ValueError(f"{where}: {name} must be > 0, got {value!r}")
        self.initial_lr = self.max_lr / div_factor
        self.min_lr = self.initial_lr / final_div_factor
        self.cycle_momentum = bool(cycle_momentum)
        self.base_momentum = _number(where, "base_momentum", base_momentum)
        self.max_momentum = _number(where, "max_momentum", max_momentum)
        last_epoch = _last_epoch(where, last_epoch)
        if self.cycle_momentum:
            self._momentum = _momentum_name(where, optimizer)
            if last_epoch == -1:
                _set_hyperparam(optimizer, self._momentum, self.max_momentum)
        self._start(optimizer, last_epoch)

    def _anneal(self, start: float, end: float, pct: float) -> float:
        if self.anneal_strategy == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def _lr(self) -> float:
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(f"OneCycleLR: tried to step {step} times; the cycle has "
                             f"total_steps={self.total_steps}")
        start = 0.0
        for i, (end, lr0, lr1, m0, m1) in enumerate(self.phases):
            if step <= end or i == len(self.phases) - 1:
                if end == start:
                    raise ValueError(
                        f"OneCycleLR: phase {i + 1} of the cycle has no steps (it ends at step "
                        f"{end:g}, where the previous one ends); use more total_steps or "
                        "another pct_start"
                    )
                pct = (step - start) / (end - start)
                # one past the cycle (step == total_steps, allowed as in PyTorch) the linear
                # anneal extrapolates and can fall below 0, where PyTorch sets a negative rate
                lr = max(self._anneal(getattr(self, lr0), getattr(self, lr1), pct), 0.0)
                if self.cycle_momentum:
                    _set_hyperparam(self.optimizer, self._momentum,
                                    self._anneal(getattr(self, m0), getattr(self, m1), pct))
                return lr
            start = end
        raise AssertionError("unreachable")  # pragma: no cover


strict_all(globals(), __all__)  # an unknown keyword is a TypeError naming the closest valid one
