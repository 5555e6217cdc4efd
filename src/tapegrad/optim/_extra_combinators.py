"""Optax's ``inject_hyperparams`` and ``lookahead`` wrappers.

- :func:`inject_hyperparams` turns an optimizer factory (``optim.adam``, ...) into one whose
  numeric hyperparameters live in the optimizer state, where they can be read (for logging)
  and changed between steps, and whose schedules are evaluated into that state;
- :func:`lookahead` runs a fast optimizer and, every ``sync_period`` steps, moves a set of slow
  parameters part of the way towards the fast ones and restarts the fast ones there
  (:class:`LookaheadParams` holds both).

Example:
    >>> import numpy as np
    >>> import tapegrad as tg
    >>> from tapegrad import optim
    >>> tx = optim.inject_hyperparams(optim.sgd)(learning_rate=0.1)
    >>> params = {"w": tg.Tensor(np.array([1.0]))}
    >>> state = tx.init(params)
    >>> state["hyperparams"]["learning_rate"]
    0.1
    >>> state = {**state, "hyperparams": {**state["hyperparams"], "learning_rate": 0.5}}
    >>> params, state = optim.apply_gradients(tx, {"w": tg.Tensor(np.array([1.0]))}, state,
    ...                                       params)
    >>> params["w"].numpy().tolist()
    [0.5]
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import attrs
import numpy as np

from tapegrad import numpy as tnp
from tapegrad.core._keywords import strict_all, strict_keywords
from tapegrad.core.tensor import Tensor
from tapegrad.core.tree import tree_unflatten
from tapegrad.optim.combinators import _select
from tapegrad.optim.transforms import (
    GradientTransformation,
    _check_bool,
    _check_match,
    _check_unit,
    _count,
    _leaves,
    _next_count,
    _traced,
    _update_extra,
)

__all__ = ["InjectHyperparams", "LookaheadParams", "Lookahead", "inject_hyperparams",
           "lookahead"]

_NUMBERS = (int, float, np.integer, np.floating)


def _is_number(v) -> bool:
    return (isinstance(v, _NUMBERS) and not isinstance(v, (bool, np.bool_))) or (
        isinstance(v, Tensor) and v.shape == () and v.dtype.kind in "iuf")


def _concrete(name: str, value, kind: type):
    """A hyperparameter from the state as the Python number the factory takes. Under
    ``tg.jit`` reading it is a guard: a new value records a new program."""
    value = _traced(value)
    if isinstance(value, Tensor):
        if value.shape != () or value.dtype.kind not in "iuf":
            raise TypeError(
                f"inject_hyperparams: state['hyperparams'][{name!r}] must be a number, got a "
                f"Tensor of shape {value.shape} and dtype {value.dtype}"
            )
    elif not _is_number(value):
        raise TypeError(
            f"inject_hyperparams: state['hyperparams'][{name!r}] must be a number, got "
            f"{value!r:.60}"
        )
    return int(value) if kind is int else float(value)


@attrs.frozen
class InjectHyperparams(GradientTransformation):
    """The transformation :func:`inject_hyperparams` builds; see there.

    State ``{"count": int, "hyperparams": {name: number}, "hyperparams_states": {name:
    {"count": int}}, "inner_state": <the inner transformation's state>}`` (Optax's fields).
    """

    inner_factory: Callable[..., GradientTransformation]
    other_args: tuple  # ((name, value), ...): static, boolean and non-numeric arguments
    numeric_args: tuple  # ((name, value, type), ...)
    schedule_args: tuple  # ((name, schedule), ...)

    def _inner(self, hyperparams: dict) -> GradientTransformation:
        tx = self.inner_factory(**dict(self.other_args), **hyperparams)
        if not isinstance(tx, GradientTransformation):
            raise TypeError(
                f"inject_hyperparams: inner_factory returned a {type(tx).__name__}, expected a "
                "gradient transformation"
            )
        return tx

    def _kinds(self) -> dict:
        kinds = {n: t for n, _, t in self.numeric_args}
        kinds.update({n: float for n, _ in self.schedule_args})
        return kinds

    def init(self, params):
        hp: dict[str, Any] = {n: _concrete(n, v, t) for n, v, t in self.numeric_args}
        hp.update({n: _concrete(n, f(0), float) for n, f in self.schedule_args})
        return {
            "count": 0,
            "hyperparams": hp,
            "hyperparams_states": {n: {"count": 0} for n, _ in self.schedule_args},
            "inner_state": self._inner(hp).init(params),
        }

    def update(self, grads, state, params=None, **extra_args):
        where = "inject_hyperparams"
        keys = {"count", "hyperparams", "hyperparams_states", "inner_state"}
        if not isinstance(state, dict) or set(state) != keys:
            raise TypeError(f"{where}: state must be the dict from init with keys {sorted(keys)}")
        kinds = self._kinds()
        given = state["hyperparams"]
        if not isinstance(given, dict) or set(given) != set(kinds):
            raise TypeError(
                f"{where}: state['hyperparams'] must be a dict with the keys {sorted(kinds)} "
                f"(the numeric hyperparameters), got "
                f"{sorted(given) if isinstance(given, dict) else type(given).__name__}"
            )
        hp = {n: _concrete(n, given[n], kinds[n]) for n, _, _ in self.numeric_args}
        sched_states = {}
        for n, f in self.schedule_args:
            count = _traced(state["hyperparams_states"][n]["count"])
            if isinstance(count, Tensor):
                count = tnp.astype(count, np.int64)
            hp[n] = _concrete(n, f(count), float)
            sched_states[n] = {"count": _next_count(count)}
        updates, inner_state = _update_extra(
            self._inner(hp), grads, state["inner_state"], params, extra_args
        )
        return updates, {
            "count": _next_count(state["count"]),
            "hyperparams": hp,
            "hyperparams_states": sched_states,
            "inner_state": inner_state,
        }


def inject_hyperparams(
    inner_factory: Callable[..., GradientTransformation], static_args: str | Iterable[str] = ()
) -> Callable[..., InjectHyperparams]:
    """Wrap an optimizer factory so that its numeric hyperparameters live in the state
    (Optax's ``inject_hyperparams``).

    ``inject_hyperparams(optim.adam)(learning_rate=1e-3, b1=0.9)`` takes ``optim.adam``'s
    arguments and returns a transformation whose state holds ``{"learning_rate": 0.001, "b1":
    0.9, ...}`` under ``"hyperparams"``: every numeric argument (defaults included), read back
    from the state at every ``update``, so a new value set between steps
    (``state = {**state, "hyperparams": {**state["hyperparams"], "learning_rate": 1e-4}}``) is
    used from the next step on, without touching the inner state (the moments). A schedule
    given for an argument is evaluated at its own step counter (0, 1, ...) at every update and
    the value it gave is stored there, so it can be logged. Booleans, arguments named in
    ``static_args`` and other values are fixed.

    At every update the inner transformation is built anew from the current values with
    ``inner_factory`` (which checks them), then its ``update`` runs on the inner state.

    Differences from Optax: the hyperparameters are Python numbers (Optax: arrays of
    ``hyperparam_dtype``, which is not taken), so a new value is used exactly; under
    ``tg.jit`` each value read is a guard, and a value that changes (a new learning rate, or a
    schedule's value at every step) records a new program (the last few are kept). For a rate
    that changes at every step of a jitted loop, give the schedule to the optimizer itself
    (``optim.adam(schedule)``), which computes it inside the program.

    Args:
        inner_factory: A function returning a :class:`GradientTransformation` (``optim.sgd``,
            ``optim.adam``, a function of your own, ...).
        static_args: Name or names of arguments to keep fixed even if numeric.

    Returns:
        A function with ``inner_factory``'s signature returning an
        :class:`InjectHyperparams` transformation.

    Raises:
        TypeError: if ``inner_factory`` is not callable or ``static_args`` not strings; when the
            returned function is called, on arguments ``inner_factory`` does not take (or that
            it refuses: the values are checked at once).
        ValueError: if ``static_args`` names an argument ``inner_factory`` does not take.

    Example:
        >>> import numpy as np
        >>> import tapegrad as tg
        >>> from tapegrad import optim
        >>> tx = optim.inject_hyperparams(optim.adam)(learning_rate=lambda step: 0.1 / (step + 1))
        >>> params = {"w": tg.Tensor(np.array([1.0]))}
        >>> state = tx.init(params)
        >>> for _ in range(2):
        ...     params, state = optim.apply_gradients(tx, {"w": tg.Tensor(np.array([1.0]))},
        ...                                           state, params)
        >>> state["hyperparams"]["learning_rate"]     # the rate of the last step (step 1)
        0.05
    """
    where = "inject_hyperparams"
    if not callable(inner_factory):
        raise TypeError(f"{where}: inner_factory must be a function returning a gradient "
                        f"transformation, got {type(inner_factory).__name__}")
    statics = {static_args} if isinstance(static_args, str) else static_args
    try:
        statics = set(statics)
    except TypeError:
        raise TypeError(f"{where}: static_args must be a name or an iterable of names, got "
                        f"{static_args!r:.60}") from None
    if not all(isinstance(s, str) for s in statics):
        raise TypeError(f"{where}: static_args must be argument names (strings), got "
                        f"{sorted(map(repr, statics))}")
    signature = inspect.signature(inner_factory)
    unknown = statics - set(signature.parameters)
    if unknown:
        raise ValueError(f"{where}: static_args {sorted(unknown)} are not arguments of "
                         f"{getattr(inner_factory, '__name__', 'inner_factory')}; its arguments "
                         f"are {list(signature.parameters)}")
    name = getattr(inner_factory, "__name__", "inner_factory")

    @functools.wraps(inner_factory)
    def wrapped(*args, **kwargs) -> InjectHyperparams:
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"inject_hyperparams({name}): {e}") from None
        bound.apply_defaults()
        other, numeric, sched = [], [], []
        for k, v in bound.arguments.items():
            if k in statics or isinstance(v, (bool, np.bool_)):
                other.append((k, v))
            elif _is_number(v):
                kind = int if isinstance(v, (int, np.integer)) or (
                    isinstance(v, Tensor) and v.dtype.kind in "iu") else float
                numeric.append((k, v, kind))
            elif callable(v):
                sched.append((k, v))
            else:
                other.append((k, v))
        tx = InjectHyperparams(inner_factory, tuple(other), tuple(numeric), tuple(sched))
        hp = {n: _concrete(n, v, t) for n, v, t in numeric}
        hp.update({n: _concrete(n, f(0), float) for n, f in sched})
        tx._inner(hp)  # the factory checks the values now, not at the first step
        return tx

    return wrapped


class _FastSlow(NamedTuple):
    fast: Any
    slow: Any


class LookaheadParams(_FastSlow):
    """The fast and slow parameters of :func:`lookahead` (Optax's ``LookaheadParams``): a
    pytree (a namedtuple) for ``apply_updates``.

    Compute the gradients at ``fast``; evaluate (and ship) ``slow``, which generalizes better.

    Args:
        fast: The fast parameters (a pytree).
        slow: The slow parameters (a pytree with the same structure).
    """

    __slots__ = ()

    @strict_keywords(name="LookaheadParams")
    def __new__(_cls, fast, slow):  # noqa: N804 (named so that errors do not list it)
        return super().__new__(_cls, fast, slow)

    def __init__(self, fast, slow):  # the fields are set by __new__ (a tuple)
        del fast, slow

    @classmethod
    def init_synced(cls, params) -> LookaheadParams:
        """Both fast and slow set to ``params`` (the start of training)."""
        return cls(fast=params, slow=params)


@attrs.frozen
class Lookahead(GradientTransformation):
    """The transformation :func:`lookahead` builds; see there.

    State ``{"fast_state": <fast optimizer's state>, "steps_since_sync": int}``.
    """

    fast_optimizer: GradientTransformation
    sync_period: int
    slow_step_size: float
    reset_state: bool = False

    def __attrs_post_init__(self):
        _lookahead_args("Lookahead", self.fast_optimizer, self.sync_period, self.slow_step_size,
                        self.reset_state)

    def init(self, params):
        fast = params.fast if isinstance(params, LookaheadParams) else params
        return {"fast_state": self.fast_optimizer.init(fast), "steps_since_sync": 0}

    def update(self, grads, state, params=None, **extra_args):
        where = "lookahead"
        if not isinstance(params, LookaheadParams):
            raise TypeError(
                f"{where}: update needs params=LookaheadParams(fast, slow) (for example "
                "optim.LookaheadParams.init_synced(params) at the start), got "
                f"{type(params).__name__}"
            )
        if not isinstance(state, dict) or set(state) != {"fast_state", "steps_since_sync"}:
            raise TypeError(f"{where}: state must be the dict from init with keys "
                            "['fast_state', 'steps_since_sync']")
        _check_match(where, grads, "grads", params.fast, "params.fast")
        _check_match(where, params.slow, "params.slow", params.fast, "params.fast")
        updates, fast_state = _update_extra(self.fast_optimizer, grads, state["fast_state"],
                                            params.fast, extra_args)
        steps = _traced(state["steps_since_sync"])
        if isinstance(steps, Tensor):
            steps = tnp.astype(steps, np.int64)
            sync = tnp.equal(steps, self.sync_period - 1)
        else:
            sync = steps == self.sync_period - 1
        u, treedef = _leaves(where, updates, "updates")
        fast = _leaves(where, params.fast, "params.fast")[0]
        slow = _leaves(where, params.slow, "params.slow")[0]
        fast_u, slow_u = [], []
        for ui, fi, si in zip(u, fast, slow):
            if sync is False:
                fast_u.append(ui)
                slow_u.append(tnp.zeros(si.shape, dtype=si.dtype, device=si.device))
                continue
            diff = tnp.subtract(tnp.add(fi, ui), si)
            s = tnp.multiply(diff, self.slow_step_size)
            f = tnp.subtract(ui, tnp.multiply(diff, 1.0 - self.slow_step_size))
            if isinstance(sync, Tensor):
                s = tnp.where(sync, s, tnp.zeros((), dtype=s.dtype, device=s.device))
                f = tnp.where(sync, f, ui)
            fast_u.append(f)
            slow_u.append(s)
        if self.reset_state:
            if isinstance(sync, Tensor):
                fast_state = _select(sync, self.fast_optimizer.init(params.fast), fast_state)
            elif sync:
                fast_state = self.fast_optimizer.init(params.fast)
        new_steps = (tnp.remainder(tnp.add(steps, 1), self.sync_period)
                     if isinstance(steps, Tensor) else (steps + 1) % self.sync_period)
        new_updates = LookaheadParams(fast=tree_unflatten(treedef, fast_u),
                                      slow=tree_unflatten(treedef, slow_u))
        return new_updates, {"fast_state": fast_state, "steps_since_sync": new_steps}


def _lookahead_args(where, fast_optimizer, sync_period, slow_step_size, reset_state) -> tuple:
    if not isinstance(fast_optimizer, GradientTransformation):
        raise TypeError(f"{where}: fast_optimizer must be a gradient transformation, got "
                        f"{type(fast_optimizer).__name__}")
    return (fast_optimizer, _count(where, "sync_period", sync_period, 1),
            _check_unit(where, "slow_step_size", slow_step_size, closed_high=True),
            _check_bool(where, "reset_state", reset_state))


def lookahead(fast_optimizer: GradientTransformation, sync_period: int, slow_step_size: float,
              reset_state: bool = False) -> Lookahead:
    """Lookahead (Optax's ``lookahead``): ``sync_period`` steps of ``fast_optimizer``, then the
    slow parameters move part of the way to the fast ones and the fast ones restart there.

    The parameters are a :class:`LookaheadParams` ``(fast, slow)``; compute the gradients at
    ``params.fast`` and call ``update(grads, state, params)``. The updates are a
    :class:`LookaheadParams` too (``apply_updates`` adds them to both). At the ``k``-th step of
    each period (``k = sync_period``), with ``u`` the fast optimizer's update::

        slow = slow + slow_step_size * (fast + u - slow)
        fast = slow                                      (the new slow parameters)

    and at the other steps ``fast = fast + u``, ``slow`` unchanged. With ``reset_state`` the
    fast optimizer's state is re-initialized at each synchronization.

    Args:
        fast_optimizer: The inner optimizer (a :class:`GradientTransformation`).
        sync_period: Fast steps per synchronization (an int ``>= 1``; the paper's ``k``).
        slow_step_size: In ``[0, 1]`` (the paper's ``alpha``).
        reset_state: Re-initialize the fast optimizer's state at each synchronization.

    Returns:
        A :class:`Lookahead` transformation; ``init`` takes the :class:`LookaheadParams` (or
        the fast parameters alone).

    Raises:
        TypeError / ValueError: on arguments of the wrong type or out of range; ``update``
            raises TypeError if ``params`` is not a :class:`LookaheadParams`.

    Example:
        >>> import numpy as np
        >>> import tapegrad as tg
        >>> from tapegrad import optim
        >>> tx = optim.lookahead(optim.sgd(1.0), sync_period=2, slow_step_size=0.5)
        >>> params = optim.LookaheadParams.init_synced({"w": tg.Tensor(np.array([0.0]))})
        >>> state = tx.init(params)
        >>> for _ in range(2):                     # two fast steps of +1, then the sync
        ...     params, state = optim.apply_gradients(
        ...         tx, {"w": tg.Tensor(np.array([-1.0]))}, state, params)
        >>> params.fast["w"].numpy().tolist(), params.slow["w"].numpy().tolist()
        ([1.0], [1.0])

    References:
        Zhang, Lucas, Hinton and Ba, "Lookahead Optimizer: k steps forward, 1 step back",
        NeurIPS 2019, Algorithm 1.
    """
    return Lookahead(*_lookahead_args("lookahead", fast_optimizer, sync_period, slow_step_size,
                                      reset_state))


strict_all(globals(), __all__)  # an unknown keyword is a TypeError naming the closest valid one
