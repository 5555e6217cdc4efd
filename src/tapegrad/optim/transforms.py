"""Pure gradient transformations in the Optax style.

A gradient transformation is a frozen record with two pure methods:

- ``init(params) -> state``: the initial optimizer state, a pytree (plain dicts, tuples and
  leaves, so it checkpoints with :mod:`tapegrad.io`);
- ``update(grads, state, params=None) -> (updates, state)``: turns gradients into updates and
  returns the new state. Nothing is modified in place.

``apply_updates(params, updates)`` adds the updates to the parameters; :func:`chain` composes
transformations left to right. The ready-made optimizers :func:`sgd`, :func:`adam`,
:func:`adamw`, :func:`rmsprop`, :func:`adagrad` and :func:`lion` are chains of the building
blocks below, with Optax's names (``updates`` are already multiplied by ``-learning_rate``, so
``params + updates`` descends); :func:`reduce_on_plateau` scales updates by a factor that drops
when the loss (``update(..., value=loss)``) stops improving. The wrappers ``masked``,
``multi_transform`` and ``MultiSteps`` are in :mod:`tapegrad.optim.combinators`.

Step counters in a state are Python ints; under ``tg.jit`` (which traces the numbers of its
arguments) they are int64 Tensors.

Leaves of ``params`` and ``grads`` are floating Tensors or NumPy/CuPy arrays; the math is written
with :mod:`tapegrad.numpy` operations, so updates are Tensors (and a step is differentiable,
for meta-learning) and runs under any transform without ``no_grad``. Scalar hyperparameters are
Python numbers and keep each leaf's dtype (weak scalar promotion).

Example:
    >>> import numpy as np
    >>> import tapegrad as tg
    >>> from tapegrad import optim
    >>> params = {"w": tg.Tensor(np.array([1.0, -2.0]))}
    >>> tx = optim.chain(optim.clip_by_global_norm(1.0), optim.sgd(0.1))
    >>> state = tx.init(params)
    >>> updates, state = tx.update({"w": tg.Tensor(np.array([3.0, 4.0]))}, state, params)
    >>> optim.apply_updates(params, updates)["w"].numpy().round(6).tolist()
    [0.94, -2.08]
"""

from __future__ import annotations

import abc
import inspect
import math
from collections.abc import Callable
from typing import Any

import attrs
import numpy as np
import optree

from tapegrad import numpy as tnp
from tapegrad.core import backend as _backend
from tapegrad.core._keywords import strict_all, strict_init
from tapegrad.core.tensor import Tensor
from tapegrad.core.tensor import const as _tconst
from tapegrad.core.tree import NAMESPACE, tree_flatten, tree_leaves, tree_paths, tree_unflatten
from tapegrad.core.weak import WeakScalar

__all__ = [
    "GradientTransformation",
    "Identity",
    "Scale",
    "ScaleByLearningRate",
    "ScaleByAdam",
    "AddDecayedWeights",
    "Trace",
    "ClipByGlobalNorm",
    "Chain",
    "identity",
    "scale",
    "scale_by_learning_rate",
    "scale_by_adam",
    "trace",
    "clip_by_global_norm",
    "chain",
    "ScaleByRMSprop",
    "ScaleByAdagrad",
    "ScaleByLion",
    "ReduceOnPlateau",
    "sgd",
    "adam",
    "adamw",
    "rmsprop",
    "adagrad",
    "lion",
    "scale_by_lion",
    "reduce_on_plateau",
    "apply_updates",
    "apply_gradients",
    "global_norm",
    "clip_by_norm",
    "tree_scale",
    "tree_add",
    "tree_zeros_like",
]

#: A learning-rate schedule: step count (an int, or an int Tensor under a transform) to a rate
#: (a float, or a float Tensor).
Schedule = Callable[[Any], Any]


# -- leaf helpers ---------------------------------------------------------------------------
def _is_array(x) -> bool:
    return isinstance(x, (Tensor, np.ndarray, np.generic)) or hasattr(x, "__cuda_array_interface__")


def _as_tensor(x, where: str, path) -> Tensor:
    """``x`` as a floating Tensor; ``path`` (a string, or a callable giving it) names the leaf
    in the error raised for anything else."""
    if isinstance(x, Tensor):
        t = x
    elif _is_array(x):
        t = Tensor(np.asarray(x) if isinstance(x, np.generic) else x)
    else:
        path = path() if callable(path) else path
        raise TypeError(
            f"{where}: leaf {path} is a {type(x).__name__}; expected a Tensor or a NumPy/CuPy "
            "array (wrap numbers with tg.Tensor(value))."
        )
    if t.dtype.kind not in "fV":
        path = path() if callable(path) else path
        raise TypeError(
            f"{where}: leaf {path} has dtype {t.dtype}; optimizers need floating leaves "
            "(float16/32/64). Keep integer state outside the optimized pytree."
        )
    return t


def _leaves(where: str, tree, name: str):
    """``(tensors, treedef)`` of ``tree``, each leaf checked and converted to a Tensor.

    The fast path flattens without paths; the readable paths are only built for an error.
    """
    leaves, treedef = tree_flatten(tree)
    out = []
    for i, v in enumerate(leaves):
        if isinstance(v, Tensor) and v.dtype.kind in "fV":
            out.append(v)
        else:
            out.append(_as_tensor(v, where, lambda i=i: tree_paths(tree, prefix=name)[i]))
    return out, treedef


def _check_match(where: str, a, a_name: str, b, b_name: str) -> None:
    """Same structure and leaf shapes, or a clear error naming the first difference."""
    la, sa = tree_flatten(a)
    lb, sb = tree_flatten(b)
    if sa != sb:
        raise TypeError(
            f"{where}: {a_name} and {b_name} have different pytree structures:\n"
            f"  {a_name}: {sa}\n  {b_name}: {sb}"
        )
    for i, (x, y) in enumerate(zip(la, lb)):
        sx, sy = getattr(x, "shape", ()), getattr(y, "shape", ())
        if tuple(sx) != tuple(sy):
            p = tree_paths(a, prefix=a_name)[i]
            raise ValueError(
                f"{where}: {p} has shape {tuple(sx)} but the matching leaf of {b_name} has "
                f"shape {tuple(sy)}; they must match exactly (no broadcasting)."
            )


def _zeros(t: Tensor) -> Tensor:
    xp = _backend.backend_of(t._array)
    return _tconst(xp.zeros(t.shape, dtype=t.dtype))


def tree_zeros_like(tree) -> Any:
    """A pytree of zero Tensors with ``tree``'s structure, shapes, dtypes and devices.

    Raises:
        TypeError: if a leaf is not a floating Tensor or array.
    """
    leaves, treedef = _leaves("tree_zeros_like", tree, "tree")
    return tree_unflatten(treedef, [_zeros(t) for t in leaves])


def tree_scale(tree, factor) -> Any:
    """Every leaf of ``tree`` multiplied by ``factor`` (a number or 0-d Tensor), keeping dtypes.

    Raises:
        TypeError: if a leaf is not a floating Tensor or array.
    """
    leaves, treedef = _leaves("tree_scale", tree, "tree")
    return tree_unflatten(treedef, [_scale_leaf(t, factor) for t in leaves])


def tree_add(a, b) -> Any:
    """Leafwise ``a + b`` of two pytrees with the same structure and shapes.

    Raises:
        TypeError: on different structures or non-floating leaves.
        ValueError: on different leaf shapes.
    """
    _check_match("tree_add", a, "a", b, "b")
    la, treedef = _leaves("tree_add", a, "a")
    lb, _ = _leaves("tree_add", b, "b")
    return tree_unflatten(treedef, [tnp.add(x, y) for x, y in zip(la, lb)])


def _scale_leaf(t: Tensor, factor) -> Tensor:
    if isinstance(factor, Tensor):
        factor = tnp.astype(factor, t.dtype)
    return tnp.multiply(t, factor)


def _find_dicts(state, match, descend: bool = True) -> list:
    """The dicts in ``state`` (searched through dicts, tuples and lists) for which
    ``match(d)`` holds, in order; ``descend=False`` does not search inside a match."""
    found = []

    def walk(node):
        if isinstance(node, dict):
            if match(node):
                found.append(node)
                if not descend:
                    return
            for v in node.values():
                walk(v)
        elif isinstance(node, (tuple, list)):
            for v in node:
                walk(v)

    walk(state)
    return found


# -- norms -----------------------------------------------------------------------------------
def global_norm(tree, ord: float = 2.0) -> Tensor:  # noqa: A002
    """The ``ord``-norm of all leaves of ``tree`` taken together, as one flat vector.

    ``(sum_i |g_i|**ord) ** (1/ord)`` over every element of every leaf; ``ord=inf`` gives
    ``max_i |g_i|``. Computed in float64 when any leaf is float64, else float32.

    Args:
        tree: Pytree of floating Tensors/arrays (any shapes, size 0 allowed).
        ord: Norm order, a number ``> 0`` or ``math.inf``; 2 is the Euclidean (L2) norm.

    Returns:
        0-d Tensor (``0.0`` for a tree without elements). Differentiable for finite ``ord``
        (with ``sqrt``'s zero-gradient convention at 0); for ``ord=inf`` it is a constant
        with no gradient.

    Raises:
        ValueError: if ``ord`` is not positive.
        TypeError: if a leaf is not a floating Tensor or array.
    """
    if not (isinstance(ord, (int, float)) and ord > 0):
        raise ValueError(f"global_norm: ord must be a number > 0 or math.inf, got {ord!r}")
    leaves, _ = _leaves("global_norm", tree, "tree")
    dtype = np.float64 if any(t.dtype == np.float64 for t in leaves) else np.float32
    if math.isinf(ord):
        vals = [float(_backend.backend_of(t._array).abs(t._array).max()) for t in leaves if t.size]
        return Tensor(np.asarray(max(vals, default=0.0), dtype=dtype))
    total = Tensor(np.zeros((), dtype=dtype))
    for t in leaves:
        t = tnp.astype(t, dtype)
        if ord == 2:
            part = tnp.sum(tnp.square(t))
        elif ord == 1:
            part = tnp.sum(tnp.abs(t))
        else:
            part = tnp.sum(tnp.power(tnp.abs(t), float(ord)))
        total = tnp.add(total, part)
    if ord == 2:
        return tnp.sqrt(total)
    if ord == 1:
        return total
    return tnp.power(total, 1.0 / float(ord))


def clip_by_norm(tree, max_norm: float, ord: float = 2.0):  # noqa: A002
    """Scale ``tree`` so that its :func:`global_norm` is at most ``max_norm``.

    Leaves are multiplied by ``max_norm / max(norm, max_norm)``: unchanged when the norm is
    already within bounds, else rescaled to norm ``max_norm`` (Goodfellow, Bengio and Courville,
    *Deep Learning*, 2016, section 10.11.1; Pascanu et al., 2013).

    Args:
        tree: Pytree of floating Tensors/arrays.
        max_norm: Bound, a number ``> 0``.
        ord: Norm order (see :func:`global_norm`).

    Returns:
        ``(clipped, norm)``: the rescaled pytree (Tensors, leaf dtypes kept) and the norm
        before clipping (0-d Tensor).

    Raises:
        ValueError: if ``max_norm`` is not a positive number, or ``ord`` is invalid.
    """
    if not (isinstance(max_norm, (int, float)) and max_norm > 0):
        raise ValueError(f"clip_by_norm: max_norm must be a number > 0, got {max_norm!r}")
    norm = global_norm(tree, ord)
    factor = tnp.divide(float(max_norm), tnp.maximum(norm, float(max_norm)))
    return tree_scale(tree, factor), norm


# -- step counters ------------------------------------------------------------------------------
# A counter in a transform's state is a Python int, as ``init`` makes it. Under ``tg.jit`` a
# number of a traced argument arrives as a weakly typed number (taken as its exact Tensor,
# ``_traced``) or, from an earlier jitted step, as a Tensor, so the counters are also accepted
# as Tensors: they are then counted in int64 (never in floating point, which stops counting
# exactly at 2**24 in float32), and whatever they scale is cast to the dtype of the leaf it
# multiplies.
def _traced(x):
    """A state number as the transforms compute with it: a Python number ``tg.jit`` traces
    (a :class:`~tapegrad.core.weak.WeakScalar`) is its exact Tensor (int64, float64), so that the
    recorded step takes the Tensor path (no Python decision on its value) and replays for
    every value; anything else is returned as it is."""
    return x.tensor if type(x) is WeakScalar else x


def _next_count(count):
    """``count + 1``: a Python int stays one; a Tensor counter becomes an int64 Tensor."""
    count = _traced(count)
    if isinstance(count, Tensor):
        return tnp.add(tnp.astype(count, np.int64), 1)
    return count + 1


def _as_int_counter(count):
    """A Tensor counter as int64 (a Python int is returned as it is)."""
    count = _traced(count)
    return tnp.astype(count, np.int64) if isinstance(count, Tensor) else count


def _like_leaf(factor, t: Tensor):
    """A scalar factor for leaf ``t``: Python numbers stay weak; a Tensor is cast to t's dtype."""
    return tnp.astype(factor, t.dtype) if isinstance(factor, Tensor) else factor


# -- extra arguments --------------------------------------------------------------------------
_EXTRA_NAMES: dict = {}


def _extra_names(tx) -> frozenset | None:
    """The keyword arguments beyond ``(grads, state, params)`` that ``tx.update`` takes:
    ``None`` if it takes ``**kwargs`` (all of them). Cached per class."""
    cls = type(tx)
    try:
        return _EXTRA_NAMES[cls]
    except KeyError:
        pass
    names: frozenset | None = frozenset()
    params = list(inspect.signature(cls.update).parameters.values())[4:]
    for p in params:
        if p.kind is inspect.Parameter.VAR_KEYWORD:
            names = None
            break
        if p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
            names = names | {p.name}
    _EXTRA_NAMES[cls] = names
    return names


def _update_extra(tx, grads, state, params, extra_args: dict):
    """``tx.update(grads, state, params, **kw)`` with the keyword arguments of ``extra_args``
    that ``tx.update`` takes (Optax's ``with_extra_args_support``)."""
    if not extra_args:
        return tx.update(grads, state, params)
    names = _extra_names(tx)
    if names is None:
        return tx.update(grads, state, params, **extra_args)
    kw = {k: v for k, v in extra_args.items() if k in names}
    return tx.update(grads, state, params, **kw)


# -- base -------------------------------------------------------------------------------------
class GradientTransformation(abc.ABC):
    """Interface of a pure gradient transformation (an immutable record of hyperparameters).

    Subclasses are ``attrs`` frozen records implementing :meth:`init` and :meth:`update`.

    Extra arguments (Optax's ``GradientTransformationExtraArgs``): a transformation that needs
    more than the gradients, such as :func:`reduce_on_plateau` (the loss ``value``), takes it
    as a keyword argument of ``update``. The combinators (:func:`chain`,
    :func:`~tapegrad.optim.masked`, :func:`~tapegrad.optim.multi_transform`,
    :class:`~tapegrad.optim.MultiSteps`) and :func:`apply_gradients` accept any keyword
    arguments and pass each one on to the transformations whose ``update`` names it (or takes
    ``**kwargs``); the others never see it, so ``chain(sgd(0.1), reduce_on_plateau())`` is
    updated with ``update(grads, state, params, value=loss)``.
    """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        strict_init(cls)  # an unknown keyword is a TypeError naming the closest valid one

    @abc.abstractmethod
    def init(self, params) -> Any:
        """The initial state for ``params`` (a pytree of floating Tensors/arrays)."""

    @abc.abstractmethod
    def update(self, grads, state, params=None) -> tuple[Any, Any]:
        """``(updates, new_state)`` from ``grads`` (same structure and shapes as ``params``)."""


_REAL = (int, float, np.integer, np.floating)


def _check_number(where: str, name: str, value) -> float:
    """``value`` as a float: a real number (not a bool), else TypeError naming ``name``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, _REAL):
        raise TypeError(f"{where}: {name} must be a number, got {type(value).__name__}")
    return float(value)


def _check_lr(where: str, learning_rate) -> float | Schedule:
    if callable(learning_rate):
        return learning_rate
    if isinstance(learning_rate, (bool, np.bool_)) or not isinstance(learning_rate, _REAL):
        raise TypeError(
            f"{where}: learning_rate must be a number or a schedule (step -> number), "
            f"got {type(learning_rate).__name__}"
        )
    if not math.isfinite(learning_rate) or learning_rate < 0:
        raise ValueError(f"{where}: learning_rate must be finite and >= 0, got {learning_rate}")
    return float(learning_rate)


def _check_unit(where: str, name: str, value: Any, closed_high: bool = False) -> float:
    value = _check_number(where, name, value)
    if not (0.0 <= value <= 1.0 if closed_high else 0.0 <= value < 1.0):
        rng = "[0, 1]" if closed_high else "[0, 1)"
        raise ValueError(f"{where}: {name} must be in {rng}, got {value!r}")
    return value


def _check_nonneg(where: str, name: str, value) -> float:
    value = _check_number(where, name, value)
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{where}: {name} must be a finite number >= 0, got {value!r}")
    return value


def _check_positive(where: str, name: str, value) -> float:
    value = _check_number(where, name, value)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{where}: {name} must be a finite number > 0, got {value!r}")
    return value


def _check_bool(where: str, name: str, value) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{where}: {name} must be a bool (True or False), got {value!r:.60}")
    return bool(value)


def _count(where: str, name: str, value, minimum: int = 0) -> int:
    """``value`` as an int ``>= minimum`` (the optimizers' step counts, sizes and periods):
    a ``TypeError`` for anything but an int (a bool included), a ``ValueError`` below it."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{where}: {name} must be an int >= {minimum}, got {value!r:.60}")
    if value < minimum:
        raise ValueError(f"{where}: {name} must be an int >= {minimum}, got {value!r}")
    return int(value)


def _choice(where: str, name: str, value, options: tuple[str, ...]) -> str:
    """``value`` as one of the strings ``options``: a ``TypeError`` for a non-string, a
    ``ValueError`` for another string, each naming the options (``'a' or 'b'``)."""
    expected = " or ".join(repr(o) for o in options)
    if not isinstance(value, str):
        raise TypeError(f"{where}: {name} must be {expected}, got {value!r:.60}")
    if value not in options:
        raise ValueError(f"{where}: {name} must be {expected}, got {value!r}")
    return value


def _checked_rate(where: str, rate, step):
    """A learning rate a schedule returned for ``step``, checked when the step runs: a
    negative or non-finite rate would silently ascend or poison the parameters.

    A Python number is checked at once. A Tensor (a schedule computing on a traced counter)
    is checked with a Python decision, which ``tg.jit`` records as a guard, so every replayed
    step is checked too; inside ``vmap`` (no single decision) a bad rate becomes NaN instead.

    Raises:
        ValueError: naming the value and the step.
    """
    if isinstance(rate, Tensor):
        if rate.shape != () or rate.dtype.kind not in "iuf":
            raise TypeError(
                f"{where}: the learning-rate schedule returned a Tensor of shape {rate.shape} "
                f"and dtype {rate.dtype} at step {step!r:.40}; it must return a real scalar"
            )
        ok = tnp.logical_and(tnp.isfinite(rate), tnp.greater_equal(rate, 0))
        try:
            good = bool(ok)
        except TypeError:  # batched (vmap): no single answer; poison the bad rates
            return tnp.where(ok, rate, math.nan)
        if not good:
            raise ValueError(
                f"{where}: the learning-rate schedule returned {float(rate)} at step "
                f"{int(step) if isinstance(step, Tensor) else step}; a rate must be finite and "
                ">= 0 (a negative rate ascends). Fix the schedule (for example its end value)."
            )
        return rate
    try:
        value = float(rate)
    except (TypeError, ValueError):
        raise TypeError(
            f"{where}: the learning-rate schedule returned {rate!r:.60} at step {step!r}; it "
            "must return a number"
        ) from None
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(
            f"{where}: the learning-rate schedule returned {value} at step {step}; a rate must "
            "be finite and >= 0 (a negative rate ascends). Fix the schedule (for example its "
            "end value)."
        )
    return value


# -- building blocks --------------------------------------------------------------------------
@attrs.frozen
class Identity(GradientTransformation):
    """Passes gradients through unchanged; state ``{}``."""

    def init(self, params):
        return {}

    def update(self, grads, state, params=None):
        return grads, state


@attrs.frozen
class Scale(GradientTransformation):
    """Multiplies every gradient by ``step_size``; state ``{}``."""

    step_size: float

    def __attrs_post_init__(self):
        if not math.isfinite(_check_number("Scale", "step_size", self.step_size)):
            raise ValueError(f"Scale: step_size must be finite, got {self.step_size}")

    def init(self, params):
        return {}

    def update(self, grads, state, params=None):
        return tree_scale(grads, self.step_size), state


@attrs.frozen
class ScaleByLearningRate(GradientTransformation):
    """Multiplies gradients by ``-learning_rate`` (``learning_rate`` if ``flip_sign`` is False).

    With a schedule, the rate of update ``k`` (counting from 0) is ``learning_rate(k)`` and the
    state is ``{"count": k}`` (a Python int); with a number the state is ``{}``. The schedule's
    value is checked at every update: a negative or non-finite rate raises ``ValueError``
    naming the value and the step (under ``tg.jit`` through a guard, so replays are checked).
    """

    learning_rate: float | Schedule
    flip_sign: bool = True

    def __attrs_post_init__(self):
        _check_lr("ScaleByLearningRate", self.learning_rate)
        _check_bool("ScaleByLearningRate", "flip_sign", self.flip_sign)

    def init(self, params):
        return {"count": 0} if callable(self.learning_rate) else {}

    def update(self, grads, state, params=None):
        factor, state = self._factor(state)
        return tree_scale(grads, factor), state

    def _factor(self, state):
        """``(the signed rate of this update, the next state)``."""
        sign = -1.0 if self.flip_sign else 1.0
        if callable(self.learning_rate):
            count = _traced(state["count"])
            where = "scale_by_learning_rate"
            if isinstance(count, Tensor):  # under tg.jit: the schedule may compute on Tensors
                count = _as_int_counter(count)
                rate = _checked_rate(where, self.learning_rate(count), count)
                if isinstance(rate, Tensor):
                    return tnp.multiply(rate, sign), {"count": _next_count(count)}
                return sign * rate, {"count": _next_count(count)}
            rate = _checked_rate(where, self.learning_rate(count), count)
            return sign * rate, {"count": _next_count(count)}
        return sign * self.learning_rate, state


@attrs.frozen
class ScaleByAdam(GradientTransformation):
    """Adam's rescaling: ``m_hat / (sqrt(v_hat) + eps)`` with bias-corrected moments.

    ``m = b1 m + (1 - b1) g``, ``v = b2 v + (1 - b2) g**2``, ``m_hat = m / (1 - b1**t)``,
    ``v_hat = v / (1 - b2**t)`` with ``t`` the 1-based step count. State
    ``{"count": t, "mu": m, "nu": v}`` (``m``, ``v`` shaped like ``params``). With
    ``amsgrad``, ``v_hat`` is made of the running maximum ``v_max = max(v_max, v)`` (state key
    ``"nu_max"``), as PyTorch's AMSGrad.

    References:
        Kingma and Ba, "Adam: A Method for Stochastic Optimization", ICLR 2015 (Algorithm 1);
        Reddi, Kale and Kumar, "On the Convergence of Adam and Beyond", ICLR 2018.
    """

    b1: float = 0.9
    b2: float = 0.999
    eps: float = 1e-8
    amsgrad: bool = False

    def __attrs_post_init__(self):
        _check_unit("ScaleByAdam", "b1", self.b1)
        _check_unit("ScaleByAdam", "b2", self.b2)
        _check_nonneg("ScaleByAdam", "eps", self.eps)
        _check_bool("ScaleByAdam", "amsgrad", self.amsgrad)

    def init(self, params):
        state = {"count": 0, "mu": tree_zeros_like(params), "nu": tree_zeros_like(params)}
        if self.amsgrad:
            state["nu_max"] = tree_zeros_like(params)
        return state

    def update(self, grads, state, params=None):
        where = "scale_by_adam"
        _check_match(where, grads, "grads", state["mu"], "state['mu']")
        g, treedef = _leaves(where, grads, "grads")
        mu = tree_leaves(state["mu"])
        nu = tree_leaves(state["nu"])
        nu_max = tree_leaves(state["nu_max"]) if self.amsgrad else [None] * len(g)
        t = _next_count(state["count"])
        c1, c2 = 1.0 - self.b1**t, 1.0 - self.b2**t
        new_mu, new_nu, new_max, out = [], [], [], []
        for gi, mi, vi, wi in zip(g, mu, nu, nu_max):
            m = tnp.add(tnp.multiply(mi, self.b1), tnp.multiply(gi, 1.0 - self.b1))
            v = tnp.add(tnp.multiply(vi, self.b2), tnp.multiply(tnp.square(gi), 1.0 - self.b2))
            new_mu.append(m)
            new_nu.append(v)
            if self.amsgrad:
                v = tnp.maximum(wi, v)
                new_max.append(v)
            m_hat = tnp.divide(m, _like_leaf(c1, m))
            v_hat = tnp.divide(v, _like_leaf(c2, v))
            out.append(tnp.divide(m_hat, tnp.add(tnp.sqrt(v_hat), self.eps)))
        new_state = {
            "count": t,
            "mu": tree_unflatten(treedef, new_mu),
            "nu": tree_unflatten(treedef, new_nu),
        }
        if self.amsgrad:
            new_state["nu_max"] = tree_unflatten(treedef, new_max)
        return tree_unflatten(treedef, out), new_state


@attrs.frozen
class AddDecayedWeights(GradientTransformation):
    """Adds ``weight_decay * params`` to the gradients; state ``{}``.

    Before a learning-rate scaling this is decoupled weight decay (AdamW); before momentum it
    is PyTorch SGD's L2 penalty. ``update`` needs ``params``.

    References:
        Loshchilov and Hutter, "Decoupled Weight Decay Regularization", ICLR 2019.
    """

    weight_decay: float = 0.0

    def __attrs_post_init__(self):
        _check_nonneg("AddDecayedWeights", "weight_decay", self.weight_decay)

    def init(self, params):
        return {}

    def update(self, grads, state, params=None):
        where = "add_decayed_weights"
        if params is None:
            raise ValueError(f"{where}: needs params; call update(grads, state, params).")
        _check_match(where, grads, "grads", params, "params")
        if self.weight_decay == 0.0:
            return grads, state
        g, treedef = _leaves(where, grads, "grads")
        p, _ = _leaves(where, params, "params")
        out = [
            tnp.add(gi, tnp.astype(tnp.multiply(pi, self.weight_decay), gi.dtype))
            for gi, pi in zip(g, p)
        ]
        return tree_unflatten(treedef, out), state


@attrs.frozen
class Trace(GradientTransformation):
    """Momentum: ``t = g + decay * t``; the update is ``t`` (or ``g + decay * t`` if Nesterov).

    This is PyTorch's SGD momentum (the buffer starts at zero, so the first step's buffer is
    ``g``). With ``dampening`` (PyTorch's), later steps use ``t = decay * t + (1 - dampening)
    * g`` while the first step's buffer is still ``g``; the state then also counts the steps.
    State ``{"trace": t}`` (and ``"count"`` with ``dampening``).

    References:
        Sutskever et al., "On the importance of initialization and momentum in deep
        learning", ICML 2013.
    """

    decay: float = 0.9
    nesterov: bool = False
    dampening: float = 0.0

    def __attrs_post_init__(self):
        _check_unit("Trace", "decay", self.decay, closed_high=True)
        _check_bool("Trace", "nesterov", self.nesterov)
        _check_unit("Trace", "dampening", self.dampening, closed_high=True)

    def init(self, params):
        if self.dampening:
            return {"trace": tree_zeros_like(params), "count": 0}
        return {"trace": tree_zeros_like(params)}

    def update(self, grads, state, params=None):
        where = "trace"
        _check_match(where, grads, "grads", state["trace"], "state['trace']")
        g, treedef = _leaves(where, grads, "grads")
        tr = tree_leaves(state["trace"])
        if self.dampening:
            count = _traced(state["count"])
            scaled = [tnp.multiply(gi, 1.0 - self.dampening) for gi in g]
            damped = [tnp.add(si, tnp.multiply(ti, self.decay)) for si, ti in zip(scaled, tr)]
            if isinstance(count, Tensor):  # under tg.jit: no Python decision on the count
                first = tnp.equal(count, 0)
                new_tr = [tnp.where(first, gi, di) for gi, di in zip(g, damped)]
            else:
                new_tr = list(g) if count == 0 else damped
        else:
            new_tr = [tnp.add(gi, tnp.multiply(ti, self.decay)) for gi, ti in zip(g, tr)]
        if self.nesterov:
            out = [tnp.add(gi, tnp.multiply(ti, self.decay)) for gi, ti in zip(g, new_tr)]
        else:
            out = new_tr
        new_state: dict[str, Any] = {"trace": tree_unflatten(treedef, new_tr)}
        if self.dampening:
            new_state["count"] = _next_count(state["count"])
        return tree_unflatten(treedef, out), new_state


@attrs.frozen
class ClipByGlobalNorm(GradientTransformation):
    """Rescales the gradients so that their global L2 norm is at most ``max_norm``; state ``{}``.

    See :func:`clip_by_norm`.
    """

    max_norm: float

    def __attrs_post_init__(self):
        _check_positive("ClipByGlobalNorm", "max_norm", self.max_norm)

    def init(self, params):
        return {}

    def update(self, grads, state, params=None):
        return clip_by_norm(grads, self.max_norm)[0], state


@attrs.frozen
class ScaleByRMSprop(GradientTransformation):
    """RMSprop's rescaling, as in PyTorch: ``g / (sqrt(v) + eps)``, no learning rate.

    ``v = alpha * v + (1 - alpha) * g**2`` (the running mean of squared gradients, starting at
    zero, without bias correction). With ``centered``, also ``m = alpha * m + (1 - alpha) * g``
    and the denominator is ``sqrt(max(v - m**2, 0)) + eps`` (an estimate of the standard
    deviation; the ``max`` only guards against a rounding error making the variance negative).
    ``eps`` is added outside the square root (PyTorch's ``torch.optim.RMSprop``; Optax's
    ``scale_by_rms`` adds it inside by default). State ``{"nu": v}`` (and ``"mu": m`` when
    ``centered``), shaped like ``params``.

    References:
        Tieleman and Hinton, "Lecture 6.5 - RMSProp", COURSERA: Neural Networks for Machine
        Learning, 2012; Graves, "Generating Sequences With Recurrent Neural Networks", 2013,
        eqs. (38)-(41) (the centered form).
    """

    alpha: float = 0.99
    eps: float = 1e-8
    centered: bool = False

    def __attrs_post_init__(self):
        _check_unit("ScaleByRMSprop", "alpha", self.alpha, closed_high=True)
        _check_nonneg("ScaleByRMSprop", "eps", self.eps)
        _check_bool("ScaleByRMSprop", "centered", self.centered)

    def init(self, params):
        state = {"nu": tree_zeros_like(params)}
        if self.centered:
            state["mu"] = tree_zeros_like(params)
        return state

    def update(self, grads, state, params=None):
        where = "rmsprop"
        _check_match(where, grads, "grads", state["nu"], "state['nu']")
        g, treedef = _leaves(where, grads, "grads")
        nu = tree_leaves(state["nu"])
        if self.centered:
            _check_match(where, grads, "grads", state["mu"], "state['mu']")
            mu = tree_leaves(state["mu"])
        else:
            mu = [None] * len(g)
        a, b = self.alpha, 1.0 - self.alpha
        new_nu, new_mu, out = [], [], []
        for gi, vi, mi in zip(g, nu, mu):
            v = tnp.add(tnp.multiply(vi, a), tnp.multiply(tnp.square(gi), b))
            new_nu.append(v)
            if self.centered:
                m = tnp.add(tnp.multiply(mi, a), tnp.multiply(gi, b))
                new_mu.append(m)
                v = tnp.maximum(tnp.subtract(v, tnp.square(m)), 0.0)
            out.append(tnp.divide(gi, tnp.add(tnp.sqrt(v), self.eps)))
        new_state = {"nu": tree_unflatten(treedef, new_nu)}
        if self.centered:
            new_state["mu"] = tree_unflatten(treedef, new_mu)
        return tree_unflatten(treedef, out), new_state


@attrs.frozen
class ScaleByAdagrad(GradientTransformation):
    """Adagrad's rescaling, as in PyTorch: ``g / (sqrt(s) + eps) / (1 + (t - 1) * lr_decay)``.

    ``s = s + g**2`` is the sum of all squared gradients so far, starting at
    ``initial_accumulator_value``; ``t`` is the 1-based step count. The last factor is
    PyTorch's learning-rate decay (1 when ``lr_decay=0``). State
    ``{"count": t, "sum_of_squares": s}`` (``t`` an int, ``s`` shaped like ``params``).

    References:
        Duchi, Hazan and Singer, "Adaptive Subgradient Methods for Online Learning and
        Stochastic Optimization", JMLR 12, 2011 (the diagonal variant, eq. (1) with
        ``delta = eps``).
    """

    lr_decay: float = 0.0
    initial_accumulator_value: float = 0.0
    eps: float = 1e-10

    def __attrs_post_init__(self):
        for name in ("lr_decay", "initial_accumulator_value", "eps"):
            _check_nonneg("ScaleByAdagrad", name, getattr(self, name))

    def init(self, params):
        leaves, treedef = _leaves("adagrad", params, "params")
        s0 = [tnp.full_like(t, self.initial_accumulator_value) for t in leaves]
        return {"count": 0, "sum_of_squares": tree_unflatten(treedef, s0)}

    def update(self, grads, state, params=None):
        where = "adagrad"
        _check_match(where, grads, "grads", state["sum_of_squares"], "state['sum_of_squares']")
        g, treedef = _leaves(where, grads, "grads")
        acc = tree_leaves(state["sum_of_squares"])
        t = _next_count(state["count"])
        decay = None
        if self.lr_decay:
            decay = 1.0 + (t - 1) * self.lr_decay
        new_acc, out = [], []
        for gi, si in zip(g, acc):
            s = tnp.add(si, tnp.square(gi))
            u = tnp.divide(gi, tnp.add(tnp.sqrt(s), self.eps))
            if decay is not None:
                u = tnp.divide(u, _like_leaf(decay, u))
            new_acc.append(s)
            out.append(u)
        new_state = {"count": t, "sum_of_squares": tree_unflatten(treedef, new_acc)}
        return tree_unflatten(treedef, out), new_state


@attrs.frozen
class ScaleByLion(GradientTransformation):
    """Lion's sign update, as in Optax's ``scale_by_lion``, no learning rate.

    ``u = sign((1 - b1) * g + b1 * m)``, then ``m = (1 - b2) * g + b2 * m`` (``m`` starts at
    zero). Every element of the update is -1, 0 or +1 (the gradient of ``sign`` is zero).
    State ``{"mu": m}``, shaped like ``params``.

    References:
        Chen et al., "Symbolic Discovery of Optimization Algorithms", NeurIPS 2023,
        Algorithm 2.
    """

    b1: float = 0.9
    b2: float = 0.99

    def __attrs_post_init__(self):
        _check_unit("ScaleByLion", "b1", self.b1, closed_high=True)
        _check_unit("ScaleByLion", "b2", self.b2, closed_high=True)

    def init(self, params):
        return {"mu": tree_zeros_like(params)}

    def update(self, grads, state, params=None):
        where = "scale_by_lion"
        _check_match(where, grads, "grads", state["mu"], "state['mu']")
        g, treedef = _leaves(where, grads, "grads")
        mu = tree_leaves(state["mu"])
        out, new_mu = [], []
        for gi, mi in zip(g, mu):
            c = tnp.add(tnp.multiply(gi, 1.0 - self.b1), tnp.multiply(mi, self.b1))
            out.append(tnp.sign(c))
            new_mu.append(tnp.add(tnp.multiply(gi, 1.0 - self.b2), tnp.multiply(mi, self.b2)))
        return tree_unflatten(treedef, out), {"mu": tree_unflatten(treedef, new_mu)}


def _scalar_value(where: str, value):
    """The loss ``value`` given to ``update``: a real number or 0-d Tensor/array."""
    if value is None:
        raise TypeError(
            f"{where}: update needs the loss: call update(updates, state, params, value=loss) "
            "(through chain/apply_gradients too: apply_gradients(tx, grads, state, params, "
            "value=loss))."
        )
    if isinstance(value, bool) or not (isinstance(value, (int, float)) or _is_array(value)):
        raise TypeError(
            f"{where}: value must be a number or a 0-d Tensor, got {type(value).__name__}"
        )
    if _is_array(value):
        shape = tuple(value.shape)  # pyright: ignore[reportArgumentType, reportAttributeAccessIssue]
        kind = np.dtype(value.dtype).kind  # pyright: ignore[reportAttributeAccessIssue]
        if shape != () or kind not in "fiu":
            raise ValueError(
                f"{where}: value must be a real scalar (the loss), got shape {shape} and dtype "
                f"{value.dtype}; reduce it first (for example tnp.mean(losses))."  # pyright: ignore[reportAttributeAccessIssue]
            )
        if isinstance(value, Tensor):
            value = tnp.stop_gradient(value)
    return value


@attrs.frozen
class ReduceOnPlateau(GradientTransformation):
    """Scale updates down when the loss stops improving (Optax's ``contrib.reduce_on_plateau``).

    See :func:`reduce_on_plateau` for the rule. ``update(updates, state, params=None, *,
    value)`` needs the loss ``value``. State (Python numbers, as ``init`` makes them; under
    ``tg.jit`` 0-d Tensors, counters int64, the rest float64)::

        {"scale": float, "best_value": float, "plateau_count": int,
         "cooldown_count": int, "count": int, "avg_value": float}
    """

    factor: float = 0.1
    patience: int = 10
    rtol: float = 1e-4
    atol: float = 0.0
    cooldown: int = 0
    accumulation_size: int = 1
    min_scale: float = 0.0

    def __attrs_post_init__(self):
        _plateau_args("ReduceOnPlateau", self.factor, self.patience, self.rtol, self.atol,
                      self.cooldown, self.accumulation_size, self.min_scale)

    def init(self, params):
        return {
            "scale": 1.0,
            "best_value": math.inf,
            "plateau_count": 0,
            "cooldown_count": 0,
            "count": 0,
            "avg_value": 0.0,
        }

    def update(self, updates, state, params=None, *, value=None):
        value = _scalar_value("reduce_on_plateau", _traced(value))
        keys = ("scale", "best_value", "plateau_count", "cooldown_count", "count", "avg_value")
        if not isinstance(state, dict) or set(state) != set(keys):
            raise TypeError(
                f"reduce_on_plateau: state must be the dict from init with keys {list(keys)}, "
                f"got {state if not isinstance(state, dict) else sorted(state)!r}"
            )
        state = {k: _traced(v) for k, v in state.items()}
        if any(isinstance(state[k], Tensor) for k in keys):
            new = self._update_tensors(state, value)
        else:
            new = self._update_numbers(state, float(value))  # pyright: ignore[reportArgumentType]
        scale = new["scale"]
        if type(scale) is float and scale == 1.0:
            return updates, new  # scaling by one changes nothing
        return tree_scale(updates, scale), new

    def _threshold(self, best):
        return math.inf if best == math.inf else (1.0 - self.rtol) * best - self.atol

    def _update_numbers(self, state, value: float) -> dict:
        """The rule on Python numbers (eager)."""
        count = int(state["count"])
        new_count = count + 1
        avg = (count * float(state["avg_value"]) + value) / new_count
        new = dict(state, count=new_count, avg_value=avg)
        if new_count != self.accumulation_size:
            return new
        best, plateau = float(state["best_value"]), int(state["plateau_count"])
        cool, scale = int(state["cooldown_count"]), float(state["scale"])
        if avg < self._threshold(best):
            best, plateau = avg, 0
        else:
            plateau += 1
        if cool > 0:
            plateau, cool = 0, cool - 1
        elif plateau == self.patience:
            plateau, cool, scale = 0, self.cooldown, max(scale * self.factor, self.min_scale)
        else:
            cool, scale = 0, max(scale, self.min_scale)
        return {
            "scale": scale,
            "best_value": best,
            "plateau_count": plateau,
            "cooldown_count": cool,
            "count": 0,
            "avg_value": 0.0,
        }

    def _update_tensors(self, state, value) -> dict:
        """The same rule without Python decisions on values: every branch as ``tnp.where``,
        so a recorded step (``tg.jit``) replays it for any loss."""

        def i64(x):
            return (
                tnp.astype(x, np.int64)
                if isinstance(x, Tensor)
                else Tensor(np.asarray(x, np.int64))
            )

        def f64(x):
            if isinstance(x, Tensor):
                return tnp.astype(x, np.float64)
            return Tensor(np.asarray(x, np.float64))

        zero_i, zero_f = i64(0), f64(0.0)
        count, avg, v = i64(state["count"]), f64(state["avg_value"]), f64(value)
        best, scale = f64(state["best_value"]), f64(state["scale"])
        plateau, cool = i64(state["plateau_count"]), i64(state["cooldown_count"])
        new_count = tnp.add(count, 1)
        new_avg = tnp.divide(
            tnp.add(tnp.multiply(tnp.astype(count, np.float64), avg), v),
            tnp.astype(new_count, np.float64),
        )
        full = tnp.equal(new_count, self.accumulation_size)
        threshold = tnp.where(
            tnp.equal(best, math.inf), f64(math.inf), (1.0 - self.rtol) * best - self.atol
        )
        improved = tnp.less(new_avg, threshold)
        cand_best = tnp.where(improved, new_avg, best)
        cpc = tnp.where(improved, zero_i, tnp.add(plateau, 1))
        in_cool = tnp.greater(cool, 0)
        reduce = tnp.logical_and(tnp.logical_not(in_cool), tnp.equal(cpc, self.patience))
        cand_plateau = tnp.where(tnp.logical_or(in_cool, reduce), zero_i, cpc)
        reduced = tnp.where(reduce, tnp.multiply(scale, self.factor), scale)
        cand_scale = tnp.where(in_cool, scale, tnp.maximum(reduced, self.min_scale))
        cand_cool = tnp.where(
            in_cool, tnp.subtract(cool, 1), tnp.where(reduce, i64(self.cooldown), zero_i)
        )
        return {
            "scale": tnp.where(full, cand_scale, scale),
            "best_value": tnp.where(full, cand_best, best),
            "plateau_count": tnp.where(full, cand_plateau, plateau),
            "cooldown_count": tnp.where(full, cand_cool, cool),
            "count": tnp.where(full, zero_i, new_count),
            "avg_value": tnp.where(full, zero_f, new_avg),
        }


@attrs.frozen
class Chain(GradientTransformation):
    """Applies ``transforms`` in order; the state is the tuple of their states."""

    transforms: tuple

    def __attrs_post_init__(self):
        if not isinstance(self.transforms, tuple):
            raise TypeError(
                f"Chain: transforms must be a tuple of transformations, got "
                f"{type(self.transforms).__name__}; build it with optim.chain(...)"
            )
        for i, t in enumerate(self.transforms):
            if not isinstance(t, GradientTransformation):
                raise TypeError(
                    f"Chain: transforms[{i}] is a {type(t).__name__}, expected a gradient "
                    "transformation"
                )

    def init(self, params):
        return tuple(t.init(params) for t in self.transforms)

    def update(self, grads, state, params=None, **extra_args):
        grads, new_states = self._update_first(
            len(self.transforms), grads, state, params, extra_args
        )
        return grads, tuple(new_states)

    def _update_first(self, k: int, grads, state, params, extra_args=None):
        """Run the first ``k`` transforms: ``(their updates, the list of their new states)``."""
        if type(state) is not tuple or len(state) != len(self.transforms):
            raise TypeError(
                f"chain: state must be a tuple of {len(self.transforms)} states (one per "
                f"transform, from init), got {type(state).__name__}"
                + (f" of length {len(state)}" if isinstance(state, (tuple, list)) else "")
            )
        new_states = []
        if extra_args:
            for i in range(k):
                grads, s = _update_extra(self.transforms[i], grads, state[i], params, extra_args)
                new_states.append(s)
            return grads, new_states
        for i in range(k):
            grads, s = self.transforms[i].update(grads, state[i], params)
            new_states.append(s)
        return grads, new_states


# -- factories (Optax names) -------------------------------------------------------------------
def identity() -> Identity:
    """The transformation that leaves gradients unchanged."""
    return Identity()


def scale(step_size: float) -> Scale:
    """Multiply gradients by the constant ``step_size``.

    Raises:
        TypeError: if ``step_size`` is not a number.
        ValueError: if it is not finite.
    """
    step_size = _check_number("scale", "step_size", step_size)
    if not math.isfinite(step_size):
        raise ValueError(f"scale: step_size must be finite, got {step_size}")
    return Scale(step_size)


def scale_by_learning_rate(
    learning_rate: float | Schedule, *, flip_sign: bool = True
) -> ScaleByLearningRate:
    """Multiply gradients by ``-learning_rate`` (a number, or a schedule ``step -> rate``,
    whose value is checked at every update).

    Raises:
        TypeError: if ``learning_rate`` is neither a number nor callable, or ``flip_sign`` is
            not a bool.
        ValueError: if a numeric ``learning_rate`` is negative or not finite.
    """
    where = "scale_by_learning_rate"
    return ScaleByLearningRate(
        _check_lr(where, learning_rate), _check_bool(where, "flip_sign", flip_sign)
    )


def scale_by_adam(
    b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8, amsgrad: bool = False
) -> ScaleByAdam:
    """Adam's moment rescaling without the learning rate (see :class:`ScaleByAdam`).

    Raises:
        TypeError: if a hyperparameter has the wrong type.
        ValueError: if ``b1``/``b2`` are outside ``[0, 1)`` or ``eps`` is negative.
    """
    return _adam_block("scale_by_adam", b1, b2, eps, amsgrad)


def _adam_block(where: str, b1, b2, eps, amsgrad=False) -> ScaleByAdam:
    """:class:`ScaleByAdam` from checked hyperparameters (errors name ``where``)."""
    return ScaleByAdam(
        _check_unit(where, "b1", b1), _check_unit(where, "b2", b2),
        _check_nonneg(where, "eps", eps), _check_bool(where, "amsgrad", amsgrad),
    )  # fmt: skip


def trace(decay: float, nesterov: bool = False, dampening: float = 0.0) -> Trace:
    """Momentum accumulation (see :class:`Trace`).

    Args:
        decay: Momentum coefficient in ``[0, 1]``.
        nesterov: Nesterov momentum (needs ``dampening == 0``).
        dampening: PyTorch's dampening of the buffer's update, in ``[0, 1]``.

    Raises:
        TypeError: if a hyperparameter has the wrong type.
        ValueError: if ``decay`` or ``dampening`` is outside ``[0, 1]``, or ``nesterov`` is
            combined with ``dampening``.
    """
    where = "trace"
    decay = _check_unit(where, "decay", decay, closed_high=True)
    nesterov = _check_bool(where, "nesterov", nesterov)
    dampening = _check_unit(where, "dampening", dampening, closed_high=True)
    if nesterov and dampening:
        raise ValueError(f"{where}: nesterov=True needs dampening=0 (PyTorch's rule)")
    return Trace(decay, nesterov, dampening)


def clip_by_global_norm(max_norm: float) -> ClipByGlobalNorm:
    """Clip gradients to global L2 norm ``max_norm`` (Optax's ``clip_by_global_norm``).

    Raises:
        TypeError: if ``max_norm`` is not a number.
        ValueError: if ``max_norm`` is not a positive finite number.
    """
    return ClipByGlobalNorm(_check_positive("clip_by_global_norm", "max_norm", max_norm))


def chain(*transforms: GradientTransformation) -> Chain:
    """Compose transformations: the updates of each are the gradients of the next.

    Nested chains are flattened (composition is associative), so the state is a flat tuple with
    one entry per building block.

    Raises:
        TypeError: if an argument is not a :class:`GradientTransformation`.
    """
    flat = []
    for i, t in enumerate(transforms):
        if isinstance(t, Chain):
            flat.extend(t.transforms)
        elif isinstance(t, GradientTransformation):
            flat.append(t)
        else:
            raise TypeError(
                f"chain: argument {i} is a {type(t).__name__}, expected a gradient "
                "transformation (optim.sgd(...), optim.clip_by_global_norm(...), ...)"
            )
    return Chain(tuple(flat))


def sgd(
    learning_rate: float | Schedule,
    momentum: float | None = None,
    nesterov: bool = False,
    weight_decay: float = 0.0,
    *,
    dampening: float = 0.0,
) -> Chain:
    """Stochastic gradient descent with optional momentum, Nesterov momentum and L2 decay.

    ``g = grad + weight_decay * p``; with momentum ``b = momentum * b + g`` and the step uses
    ``b`` (or ``g + momentum * b`` with Nesterov); ``p <- p - lr * step``. This is PyTorch's
    ``torch.optim.SGD`` (its ``dampening`` too: ``b = momentum * b + (1 - dampening) * g``
    after the first step) and Optax's ``sgd`` (plus its weight decay).

    Args:
        learning_rate: Number ``>= 0`` or schedule ``step -> rate``.
        momentum: ``None`` or 0 for none, else the momentum coefficient in ``[0, 1]``.
        nesterov: Use Nesterov momentum (needs ``momentum > 0`` and no ``dampening``).
        weight_decay: L2 coefficient ``>= 0``, added to the gradient before momentum.
        dampening: PyTorch's momentum dampening in ``[0, 1]`` (needs ``momentum > 0``).

    Returns:
        ``chain(add_decayed_weights(weight_decay), trace(momentum, nesterov, dampening),
        scale_by_learning_rate(learning_rate))`` (blocks with zero coefficients omitted).

    Raises:
        TypeError: if a hyperparameter has the wrong type (``nesterov`` not a bool).
        ValueError: on out-of-range hyperparameters, or ``nesterov``/``dampening`` without
            momentum.
    """
    return _sgd("sgd", learning_rate, momentum, nesterov, weight_decay, dampening)


def _sgd(where, learning_rate, momentum, nesterov, weight_decay, dampening) -> Chain:
    """:func:`sgd`, its errors naming ``where`` (the stateful ``SGD`` passes its name)."""
    lr = _check_lr(where, learning_rate)
    momentum = 0.0 if momentum is None else _check_unit(where, "momentum", momentum, True)
    nesterov = _check_bool(where, "nesterov", nesterov)
    weight_decay = _check_nonneg(where, "weight_decay", weight_decay)
    dampening = _check_unit(where, "dampening", dampening, closed_high=True)
    if nesterov and (not momentum or dampening):
        raise ValueError(f"{where}: nesterov=True needs momentum > 0 and dampening=0")
    parts = []
    if weight_decay:
        parts.append(AddDecayedWeights(weight_decay))
    if momentum:
        parts.append(Trace(momentum, nesterov, dampening))
    parts.append(ScaleByLearningRate(lr))
    return chain(*parts)


def adam(
    learning_rate: float | Schedule, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8
) -> Chain:
    """Adam: ``p <- p - lr * m_hat / (sqrt(v_hat) + eps)`` (see :class:`ScaleByAdam`).

    Matches Optax's ``adam`` and PyTorch's ``torch.optim.Adam`` (defaults as Optax).

    Args:
        learning_rate: Number ``>= 0`` or schedule ``step -> rate``.
        b1, b2: Exponential decay rates of the first and second moments, in ``[0, 1)``.
        eps: Added to ``sqrt(v_hat)`` for numerical stability.

    Raises:
        ValueError: on out-of-range hyperparameters.

    References:
        Kingma and Ba, "Adam: A Method for Stochastic Optimization", ICLR 2015.
    """
    lr = _check_lr("adam", learning_rate)
    return chain(_adam_block("adam", b1, b2, eps), ScaleByLearningRate(lr))


def adamw(
    learning_rate: float | Schedule,
    b1: float = 0.9,
    b2: float = 0.999,
    eps: float = 1e-8,
    weight_decay: float = 1e-4,
) -> Chain:
    """AdamW: Adam with decoupled weight decay.

    ``p <- p - lr * (m_hat / (sqrt(v_hat) + eps) + weight_decay * p)``: the decay is applied to
    the parameters, not added to the gradient before the moments. This is the step of
    :class:`~tapegrad.optim.Adam` with ``weight_decay`` and of PyTorch's ``torch.optim.AdamW``;
    defaults as Optax (``weight_decay=1e-4``). With ``weight_decay=0`` it equals :func:`adam`.

    Raises:
        ValueError: on out-of-range hyperparameters.

    References:
        Loshchilov and Hutter, "Decoupled Weight Decay Regularization", ICLR 2019.
    """
    where = "adamw"
    lr = _check_lr(where, learning_rate)
    block = _adam_block(where, b1, b2, eps)
    decay = AddDecayedWeights(_check_nonneg(where, "weight_decay", weight_decay))
    return chain(block, decay, ScaleByLearningRate(lr))


def rmsprop(
    learning_rate: float | Schedule,
    alpha: float = 0.99,
    eps: float = 1e-8,
    weight_decay: float = 0.0,
    momentum: float = 0.0,
    centered: bool = False,
) -> Chain:
    """RMSprop with PyTorch's semantics and defaults (``torch.optim.RMSprop``).

    Per leaf, with ``g`` the gradient and every buffer starting at zero::

        g = g + weight_decay * p                     (L2 term, if weight_decay > 0)
        v = alpha * v + (1 - alpha) * g**2
        m = alpha * m + (1 - alpha) * g              (centered only)
        d = sqrt(v) + eps,  or sqrt(v - m**2) + eps  (centered)
        b = momentum * b + g / d                     (momentum > 0; else b = g / d)
        p = p - learning_rate * b

    Where PyTorch and Optax differ, this follows PyTorch: ``eps`` outside the square root,
    ``alpha=0.99`` (Optax: ``eps_in_sqrt=True``, ``decay=0.9``), and the momentum buffer
    accumulates ``g / d`` before the learning rate (Optax accumulates the scaled update; the
    two agree for a constant learning rate). Optax's ``rmsprop(lr, decay=alpha, eps=eps,
    eps_in_sqrt=False, centered=c, momentum=mu)`` gives the same steps for a constant rate.

    Args:
        learning_rate: Number ``>= 0`` or schedule ``step -> rate``.
        alpha: Smoothing constant of the squared-gradient average, in ``[0, 1]``.
        eps: Added to the denominator (``>= 0``).
        weight_decay: L2 coefficient ``>= 0``, added to the gradient first.
        momentum: Momentum coefficient in ``[0, 1]`` (0: none).
        centered: Divide by an estimate of the gradient's standard deviation instead of its
            root mean square.

    Returns:
        ``chain(add_decayed_weights(weight_decay), ScaleByRMSprop(alpha, eps, centered),
        trace(momentum), scale_by_learning_rate(learning_rate))``, blocks with zero
        coefficients omitted. State leaves keep each parameter's shape and dtype.

    Raises:
        TypeError: if a hyperparameter is not a number.
        ValueError: on out-of-range hyperparameters.

    References:
        Tieleman and Hinton, "Lecture 6.5 - RMSProp", COURSERA, 2012; Graves, "Generating
        Sequences With Recurrent Neural Networks", arXiv:1308.0850, 2013 (centered form).
    """
    return _rmsprop("rmsprop", learning_rate, alpha, eps, weight_decay, momentum, centered)


def _rmsprop(where, learning_rate, alpha, eps, weight_decay, momentum, centered) -> Chain:
    """:func:`rmsprop`, its errors naming ``where``."""
    lr = _check_lr(where, learning_rate)
    alpha = _check_unit(where, "alpha", alpha, closed_high=True)
    eps = _check_nonneg(where, "eps", eps)
    weight_decay = _check_nonneg(where, "weight_decay", weight_decay)
    momentum = _check_unit(where, "momentum", momentum, closed_high=True)
    centered = _check_bool(where, "centered", centered)
    parts = []
    if weight_decay:
        parts.append(AddDecayedWeights(weight_decay))
    parts.append(ScaleByRMSprop(alpha, eps, centered))
    if momentum:
        parts.append(Trace(momentum))
    parts.append(ScaleByLearningRate(lr))
    return chain(*parts)


def adagrad(
    learning_rate: float | Schedule,
    lr_decay: float = 0.0,
    weight_decay: float = 0.0,
    initial_accumulator_value: float = 0.0,
    eps: float = 1e-10,
) -> Chain:
    """Adagrad with PyTorch's semantics and defaults (``torch.optim.Adagrad``).

    Per leaf, at step ``t = 1, 2, ...``::

        g = g + weight_decay * p                     (L2 term, if weight_decay > 0)
        s = s + g**2                                 (s starts at initial_accumulator_value)
        p = p - learning_rate / (1 + (t - 1) * lr_decay) * g / (sqrt(s) + eps)

    Where PyTorch and Optax differ, this follows PyTorch: ``initial_accumulator_value=0``,
    ``eps=1e-10`` added outside the square root, plus ``lr_decay`` and ``weight_decay`` (Optax's
    ``adagrad`` uses ``initial_accumulator_value=0.1`` and ``g / sqrt(s + eps)`` with
    ``eps=1e-7``). With a schedule, the rate of step ``t`` is ``learning_rate(t - 1)`` before
    the ``lr_decay`` division.

    Args:
        learning_rate: Number ``>= 0`` or schedule ``step -> rate``.
        lr_decay: Learning-rate decay ``>= 0`` (see the formula).
        weight_decay: L2 coefficient ``>= 0``.
        initial_accumulator_value: Starting value of ``s`` (``>= 0``).
        eps: Added to ``sqrt(s)`` (``>= 0``).

    Returns:
        ``chain(add_decayed_weights(weight_decay), ScaleByAdagrad(lr_decay,
        initial_accumulator_value, eps), scale_by_learning_rate(learning_rate))``. The state's
        ``count`` is an int; ``sum_of_squares`` has the parameters' shapes and dtypes.

    Raises:
        TypeError: if a hyperparameter is not a number.
        ValueError: on negative or non-finite hyperparameters.

    References:
        Duchi, Hazan and Singer, "Adaptive Subgradient Methods for Online Learning and
        Stochastic Optimization", JMLR 12, 2011.
    """
    return _adagrad("adagrad", learning_rate, lr_decay, weight_decay, initial_accumulator_value,
                    eps)


def _adagrad(where, learning_rate, lr_decay, weight_decay, initial_accumulator_value,
             eps) -> Chain:
    """:func:`adagrad`, its errors naming ``where``."""
    lr = _check_lr(where, learning_rate)
    block = ScaleByAdagrad(
        _check_nonneg(where, "lr_decay", lr_decay),
        _check_nonneg(where, "initial_accumulator_value", initial_accumulator_value),
        _check_nonneg(where, "eps", eps),
    )
    weight_decay = _check_nonneg(where, "weight_decay", weight_decay)
    parts = [AddDecayedWeights(weight_decay)] if weight_decay else []
    return chain(*parts, block, ScaleByLearningRate(lr))


def scale_by_lion(b1: float = 0.9, b2: float = 0.99) -> ScaleByLion:
    """Lion's sign update without the learning rate (see :class:`ScaleByLion`; Optax's
    ``scale_by_lion``).

    Raises:
        TypeError: if ``b1``/``b2`` are not numbers.
        ValueError: if ``b1``/``b2`` are outside ``[0, 1]``.
    """
    return _lion_block("scale_by_lion", b1, b2)


def _lion_block(where: str, b1, b2) -> ScaleByLion:
    return ScaleByLion(
        _check_unit(where, "b1", b1, closed_high=True), _check_unit(where, "b2", b2, True)
    )


def lion(
    learning_rate: float | Schedule, b1: float = 0.9, b2: float = 0.99, weight_decay: float = 1e-3
) -> Chain:
    """Lion (EvoLved Sign Momentum), with Optax's semantics and defaults (``optax.lion``).

    Per leaf, with ``m`` starting at zero::

        u = sign((1 - b1) * g + b1 * m)
        m = (1 - b2) * g + b2 * m
        p = p - learning_rate * (u + weight_decay * p)

    The weight decay is decoupled, as in AdamW. Every element moves by exactly
    ``learning_rate * (1 + weight_decay * |p|)`` or less, so Lion wants a learning rate 3-10
    times smaller than AdamW's (and a weight decay that much larger), as the paper advises.
    PyTorch has no Lion; the defaults are Optax's (and the paper's ``b1=0.9, b2=0.99``).

    Args:
        learning_rate: Number ``>= 0`` or schedule ``step -> rate``.
        b1: Interpolation between the gradient and the momentum for the sign, in ``[0, 1]``.
        b2: Decay rate of the momentum, in ``[0, 1]``.
        weight_decay: Decoupled weight-decay coefficient ``>= 0``.

    Returns:
        ``chain(scale_by_lion(b1, b2), add_decayed_weights(weight_decay),
        scale_by_learning_rate(learning_rate))``; the state's ``mu`` has the parameters'
        shapes and dtypes.

    Raises:
        TypeError: if a hyperparameter is not a number.
        ValueError: on out-of-range hyperparameters.

    References:
        Chen et al., "Symbolic Discovery of Optimization Algorithms", NeurIPS 2023,
        Algorithm 2.
    """
    return _lion("lion", learning_rate, b1, b2, weight_decay)


def _lion(where, learning_rate, b1, b2, weight_decay) -> Chain:
    """:func:`lion`, its errors naming ``where``."""
    lr = _check_lr(where, learning_rate)
    return chain(
        _lion_block(where, b1, b2),
        AddDecayedWeights(_check_nonneg(where, "weight_decay", weight_decay)),
        ScaleByLearningRate(lr),
    )


def reduce_on_plateau(
    factor: float = 0.1,
    patience: int = 10,
    rtol: float = 1e-4,
    atol: float = 0.0,
    cooldown: int = 0,
    accumulation_size: int = 1,
    min_scale: float = 0.0,
) -> ReduceOnPlateau:
    """Multiply the updates by a scale that drops when the loss stops improving (Optax's
    ``optax.contrib.reduce_on_plateau``).

    Its ``update`` needs the loss: ``update(updates, state, params, value=loss)``; inside a
    :func:`chain` (or :func:`apply_gradients`) pass ``value=loss`` to the chain, which hands it
    on. The scale starts at 1 and multiplies the updates (put it last in the chain, after the
    optimizer, so it scales the learning rate). The values are averaged over
    ``accumulation_size`` calls (1: every call), then, on each average ``a``:

    - it improves when ``a < (1 - rtol) * best - atol``; ``best = a`` then, and the plateau
      count restarts at 0; otherwise the plateau count grows by 1;
    - during a cooldown (``cooldown_count > 0``) the count goes down by 1 and the plateau
      count is held at 0;
    - otherwise, when the plateau count reaches ``patience``:
      ``scale = max(scale * factor, min_scale)``, the plateau count restarts and the cooldown
      begins (``cooldown_count = cooldown``).

    So the scale first drops after ``patience`` averages without improvement. (PyTorch's
    ``ReduceLROnPlateau`` drops it after ``patience + 1``: see
    :class:`~tapegrad.optim.ReduceLROnPlateau` for the stateful optimizers.)

    Args:
        factor: Multiplier of the scale on a plateau, in ``(0, 1)``.
        patience: Averages without improvement before the scale drops (an int ``>= 1``).
        rtol: Relative improvement needed, in ``[0, 1]``.
        atol: Absolute improvement needed (``>= 0``); ``rtol`` and ``atol`` are not both 0.
        cooldown: Averages to wait after a drop before counting again (an int ``>= 0``).
        accumulation_size: Number of values averaged per decision (an int ``>= 1``); use the
            number of minibatches per epoch to decide on the epoch's mean training loss.
        min_scale: The scale never drops below this, in ``[0, 1]``.

    Returns:
        A :class:`ReduceOnPlateau` transformation. Its updates have the input's structure,
        shapes and dtypes; the state holds Python numbers (0-d Tensors under ``tg.jit``).

    Raises:
        TypeError: if a hyperparameter has the wrong type; ``update`` raises it when
            ``value`` is missing or not a number.
        ValueError: on out-of-range hyperparameters; ``update`` raises it when ``value`` is
            not a real scalar.

    Example:
        >>> import numpy as np
        >>> import tapegrad as tg
        >>> from tapegrad import optim
        >>> tx = optim.chain(optim.sgd(0.1), optim.reduce_on_plateau(factor=0.5, patience=2))
        >>> params = {"w": tg.Tensor(np.array([1.0]))}
        >>> state = tx.init(params)
        >>> for loss in [3.0, 2.0, 2.0, 2.0, 2.0]:   # no improvement after the second value
        ...     params, state = optim.apply_gradients(
        ...         tx, {"w": tg.Tensor(np.array([1.0]))}, state, params, value=loss)
        >>> state[-1]["scale"]
        0.5
    """
    return ReduceOnPlateau(
        *_plateau_args("reduce_on_plateau", factor, patience, rtol, atol, cooldown,
                       accumulation_size, min_scale)
    )


def _plateau_args(where, factor, patience, rtol, atol, cooldown, accumulation_size, min_scale):
    """:func:`reduce_on_plateau`'s arguments, checked and converted (errors name ``where``)."""
    factor = _check_number(where, "factor", factor)
    if not 0.0 < factor < 1.0:
        raise ValueError(f"{where}: factor must be in (0, 1), got {factor!r}")
    rtol = _check_unit(where, "rtol", rtol, closed_high=True)
    atol = _check_nonneg(where, "atol", atol)
    if rtol == 0.0 and atol == 0.0:
        raise ValueError(f"{where}: rtol and atol cannot both be 0 (no change would count)")
    counts = [_count(where, name, value, low) for name, value, low in (
        ("patience", patience, 1), ("cooldown", cooldown, 0),
        ("accumulation_size", accumulation_size, 1))]
    min_scale = _check_unit(where, "min_scale", min_scale, closed_high=True)
    return factor, counts[0], rtol, atol, counts[1], counts[2], min_scale


def _add_same_tensors(params, updates):
    """``apply_updates``'s common case in one pass: the same structure, and every leaf a
    floating Tensor of its parameter's shape and dtype. Returns None otherwise (the general
    path then checks, converts and names the offending leaf)."""
    lp, tp = tree_flatten(params)
    lu, tu = tree_flatten(updates)
    if tp != tu:
        return None
    out = []
    for p, u in zip(lp, lu):
        if not (
            type(p) is Tensor
            and type(u) is Tensor
            and p.dtype == u.dtype
            and p.dtype.kind in "fV"
            and p.shape == u.shape
        ):
            return None
        out.append(tnp.add(p, u))
    return tree_unflatten(tp, out)


def _none_updates(params, updates):
    """``(param leaves, treedef, update leaves)`` with ``None`` counted as a leaf, when
    ``updates`` holds ``None`` where ``params`` has a leaf (a leaf that was not differentiated,
    such as a Module's random key); ``None`` otherwise."""
    lp, tp = optree.tree_flatten(params, none_is_leaf=True, namespace=NAMESPACE)
    try:
        lu = tp.flatten_up_to(updates)
    except ValueError:
        return None
    if not any(u is None and p is not None for p, u in zip(lp, lu)):
        return None
    return lp, tp, lu


def apply_updates(params, updates):
    """``params + updates`` leafwise, each result cast to its parameter's dtype.

    Leaf kinds are kept: Tensor parameters give Tensors, NumPy array parameters give NumPy
    arrays (new, read-only arrays; nothing is modified in place). Where ``updates`` holds
    ``None`` in place of a leaf, the parameter is kept as it is, whatever its kind (Equinox's
    ``apply_updates``): so ``params`` may be a whole model, random keys and integer counters
    included, and ``updates`` come from gradients that hold ``None`` there
    (``tg.grad(loss)(model, x)``, :func:`tapegrad.filter_grad`, :func:`tapegrad.core.tree.filter`).

    Args:
        params: Pytree of floating Tensors/arrays (other leaves only where ``updates`` holds
            ``None``).
        updates: Pytree with the same structure and leaf shapes (from ``update``).

    Returns:
        The new parameters, with ``params``' structure.

    Raises:
        TypeError: if the structures differ or a leaf is not floating.
        ValueError: if a leaf's shape differs from its parameter's.
    """
    where = "apply_updates"
    fast = _add_same_tensors(params, updates)
    if fast is not None:
        return fast
    held = _none_updates(params, updates)
    if held is not None:
        lp, tp, lu = held
        return tp.unflatten([p if u is None else apply_updates(p, u) for p, u in zip(lp, lu)])
    _check_match(where, updates, "updates", params, "params")
    raw = tree_leaves(params)
    p, treedef = _leaves(where, params, "params")
    u, _ = _leaves(where, updates, "updates")
    out = []
    for orig, pi, ui in zip(raw, p, u):
        new = tnp.astype(tnp.add(pi, tnp.astype(ui, pi.dtype)), pi.dtype)
        if isinstance(orig, Tensor):
            out.append(new)
        elif isinstance(orig, np.generic):
            out.append(new.numpy()[()])
        else:
            out.append(new._array)
    return tree_unflatten(treedef, out)


def apply_gradients(tx: GradientTransformation, grads, opt_state, params, **extra_args):
    """One optimizer step in one call: ``tx.update`` then :func:`apply_updates`.

    ``apply_gradients(tx, grads, opt_state, params)`` returns exactly what
    ``updates, opt_state = tx.update(grads, opt_state, params)`` followed by
    ``apply_updates(params, updates)`` gives (Flax's ``TrainState.apply_gradients``), and is
    just as pure: nothing the caller holds changes.

    Args:
        tx: A :class:`GradientTransformation` (``optim.sgd(...)``, a ``chain``, ...).
        grads: Pytree of gradients with ``params``' structure and shapes.
        opt_state: ``tx``'s state (from ``tx.init`` or the previous step).
        params: Pytree of floating Tensors/arrays.
        **extra_args: Keyword arguments passed on to the transformations that take them (for
            example ``value=loss`` for :func:`reduce_on_plateau`).

    Returns:
        ``(new_params, new_opt_state)``.

    Raises:
        TypeError / ValueError: as ``tx.update`` and :func:`apply_updates`.

    Example:
        >>> import numpy as np
        >>> import tapegrad as tg
        >>> from tapegrad import optim
        >>> params = {"w": tg.Tensor(np.array([1.0, -2.0]))}
        >>> tx = optim.sgd(0.1)
        >>> state = tx.init(params)
        >>> grads = {"w": tg.Tensor(np.array([3.0, 4.0]))}
        >>> params, state = optim.apply_gradients(tx, grads, state, params)
        >>> params["w"].numpy().round(6).tolist()
        [0.7, -2.4]
    """
    if extra_args:
        updates, new_state = _update_extra(tx, grads, opt_state, params, extra_args)
    else:
        updates, new_state = tx.update(grads, opt_state, params)
    return apply_updates(params, updates), new_state



# every public transformation and function refuses an unknown keyword, naming the closest valid
strict_all(globals(), __all__)
