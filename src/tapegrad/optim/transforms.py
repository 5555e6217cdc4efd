"""Pure gradient transformations in the Optax style.

A gradient transformation is a frozen record with two pure methods:

- ``init(params) -> state``: the initial optimizer state, a pytree (plain dicts, tuples and
  leaves, so it checkpoints with :mod:`tapegrad.io`);
- ``update(grads, state, params=None) -> (updates, state)``: turns gradients into updates and
  returns the new state. Nothing is modified in place.

``apply_updates(params, updates)`` adds the updates to the parameters; :func:`chain` composes
transformations left to right. The ready-made optimizers :func:`sgd`, :func:`adam` and
:func:`adamw` are chains of the building blocks below, with Optax's names and semantics
(``updates`` are already multiplied by ``-learning_rate``, so ``params + updates`` descends).

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
import math
from collections.abc import Callable
from typing import Any

import attrs
import numpy as np

from tapegrad import backend as _backend
from tapegrad import numpy as tnp
from tapegrad.tensor import Tensor
from tapegrad.tensor import const as _tconst
from tapegrad.tree import tree_flatten, tree_leaves, tree_paths, tree_unflatten

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
    "add_decayed_weights",
    "trace",
    "clip_by_global_norm",
    "chain",
    "sgd",
    "adam",
    "adamw",
    "apply_updates",
    "apply_gradients",
    "global_norm",
    "clip_by_norm",
    "tree_scale",
    "tree_add",
    "tree_zeros_like",
]

Schedule = Callable[[int], float]


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
    if t.dtype.kind != "f":
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
        if isinstance(v, Tensor) and v.dtype.kind == "f":
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


# -- base -------------------------------------------------------------------------------------
class GradientTransformation(abc.ABC):
    """Interface of a pure gradient transformation (an immutable record of hyperparameters).

    Subclasses are ``attrs`` frozen records implementing :meth:`init` and :meth:`update`.
    """

    @abc.abstractmethod
    def init(self, params) -> Any:
        """The initial state for ``params`` (a pytree of floating Tensors/arrays)."""

    @abc.abstractmethod
    def update(self, grads, state, params=None) -> tuple[Any, Any]:
        """``(updates, new_state)`` from ``grads`` (same structure and shapes as ``params``)."""


def _check_lr(where: str, learning_rate):
    if callable(learning_rate):
        return learning_rate
    if isinstance(learning_rate, bool) or not isinstance(learning_rate, (int, float)):
        raise TypeError(
            f"{where}: learning_rate must be a number or a schedule (step -> number), "
            f"got {type(learning_rate).__name__}"
        )
    if not math.isfinite(learning_rate) or learning_rate < 0:
        raise ValueError(f"{where}: learning_rate must be finite and >= 0, got {learning_rate}")
    return float(learning_rate)


def _check_unit(where: str, name: str, value: float, closed_high: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{where}: {name} must be a number, got {type(value).__name__}")
    if not (0.0 <= value <= 1.0 if closed_high else 0.0 <= value < 1.0):
        rng = "[0, 1]" if closed_high else "[0, 1)"
        raise ValueError(f"{where}: {name} must be in {rng}, got {value!r}")
    return float(value)


def _check_nonneg(where: str, name: str, value) -> float:
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
        raise ValueError(f"{where}: {name} must be a finite number >= 0, got {value!r}")
    return float(value)


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

    def init(self, params):
        return {}

    def update(self, grads, state, params=None):
        return tree_scale(grads, self.step_size), state


@attrs.frozen
class ScaleByLearningRate(GradientTransformation):
    """Multiplies gradients by ``-learning_rate`` (``learning_rate`` if ``flip_sign`` is False).

    With a schedule, the rate of update ``k`` (counting from 0) is ``learning_rate(k)`` and the
    state is ``{"count": k}`` (a Python int); with a number the state is ``{}``.
    """

    learning_rate: float | Schedule
    flip_sign: bool = True

    def init(self, params):
        return {"count": 0} if callable(self.learning_rate) else {}

    def update(self, grads, state, params=None):
        factor, state = self._factor(state)
        return tree_scale(grads, factor), state

    def _factor(self, state):
        """``(the signed rate of this update, the next state)``."""
        sign = -1.0 if self.flip_sign else 1.0
        if callable(self.learning_rate):
            count = state["count"]
            return sign * float(self.learning_rate(count)), {"count": count + 1}
        return sign * self.learning_rate, state


@attrs.frozen
class ScaleByAdam(GradientTransformation):
    """Adam's rescaling: ``m_hat / (sqrt(v_hat) + eps)`` with bias-corrected moments.

    ``m = b1 m + (1 - b1) g``, ``v = b2 v + (1 - b2) g**2``, ``m_hat = m / (1 - b1**t)``,
    ``v_hat = v / (1 - b2**t)`` with ``t`` the 1-based step count. State
    ``{"count": t, "mu": m, "nu": v}`` (``m``, ``v`` shaped like ``params``).

    References:
        Kingma and Ba, "Adam: A Method for Stochastic Optimization", ICLR 2015 (Algorithm 1).
    """

    b1: float = 0.9
    b2: float = 0.999
    eps: float = 1e-8

    def init(self, params):
        return {"count": 0, "mu": tree_zeros_like(params), "nu": tree_zeros_like(params)}

    def update(self, grads, state, params=None):
        where = "scale_by_adam"
        _check_match(where, grads, "grads", state["mu"], "state['mu']")
        g, treedef = _leaves(where, grads, "grads")
        mu = tree_leaves(state["mu"])
        nu = tree_leaves(state["nu"])
        t = state["count"] + 1
        c1, c2 = 1.0 - self.b1**t, 1.0 - self.b2**t
        new_mu, new_nu, out = [], [], []
        for gi, mi, vi in zip(g, mu, nu):
            m = tnp.add(tnp.multiply(mi, self.b1), tnp.multiply(gi, 1.0 - self.b1))
            v = tnp.add(tnp.multiply(vi, self.b2), tnp.multiply(tnp.square(gi), 1.0 - self.b2))
            m_hat = tnp.divide(m, c1)
            v_hat = tnp.divide(v, c2)
            out.append(tnp.divide(m_hat, tnp.add(tnp.sqrt(v_hat), self.eps)))
            new_mu.append(m)
            new_nu.append(v)
        new_state = {
            "count": t,
            "mu": tree_unflatten(treedef, new_mu),
            "nu": tree_unflatten(treedef, new_nu),
        }
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

    This is PyTorch's SGD momentum with ``dampening=0`` (the buffer starts at zero, so the first
    step's buffer is ``g``). State ``{"trace": t}``.

    References:
        Sutskever et al., "On the importance of initialization and momentum in deep
        learning", ICML 2013.
    """

    decay: float = 0.9
    nesterov: bool = False

    def init(self, params):
        return {"trace": tree_zeros_like(params)}

    def update(self, grads, state, params=None):
        where = "trace"
        _check_match(where, grads, "grads", state["trace"], "state['trace']")
        g, treedef = _leaves(where, grads, "grads")
        tr = tree_leaves(state["trace"])
        new_tr = [tnp.add(gi, tnp.multiply(ti, self.decay)) for gi, ti in zip(g, tr)]
        if self.nesterov:
            out = [tnp.add(gi, tnp.multiply(ti, self.decay)) for gi, ti in zip(g, new_tr)]
        else:
            out = new_tr
        return tree_unflatten(treedef, out), {"trace": tree_unflatten(treedef, new_tr)}


@attrs.frozen
class ClipByGlobalNorm(GradientTransformation):
    """Rescales the gradients so that their global L2 norm is at most ``max_norm``; state ``{}``.

    See :func:`clip_by_norm`.
    """

    max_norm: float

    def init(self, params):
        return {}

    def update(self, grads, state, params=None):
        return clip_by_norm(grads, self.max_norm)[0], state


@attrs.frozen
class Chain(GradientTransformation):
    """Applies ``transforms`` in order; the state is the tuple of their states."""

    transforms: tuple

    def init(self, params):
        return tuple(t.init(params) for t in self.transforms)

    def update(self, grads, state, params=None):
        grads, new_states = self._update_first(len(self.transforms), grads, state, params)
        return grads, tuple(new_states)

    def _update_first(self, k: int, grads, state, params):
        """Run the first ``k`` transforms: ``(their updates, the list of their new states)``."""
        if type(state) is not tuple or len(state) != len(self.transforms):
            raise TypeError(
                f"chain: state must be a tuple of {len(self.transforms)} states (one per "
                f"transform, from init), got {type(state).__name__}"
                + (f" of length {len(state)}" if isinstance(state, (tuple, list)) else "")
            )
        new_states = []
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
    """
    if isinstance(step_size, bool) or not isinstance(step_size, (int, float)):
        raise TypeError(f"scale: step_size must be a number, got {type(step_size).__name__}")
    return Scale(float(step_size))


def scale_by_learning_rate(
    learning_rate: float | Schedule, *, flip_sign: bool = True
) -> ScaleByLearningRate:
    """Multiply gradients by ``-learning_rate`` (a number, or a schedule ``step -> rate``).

    Raises:
        TypeError: if ``learning_rate`` is neither a number nor callable.
        ValueError: if a numeric ``learning_rate`` is negative or not finite.
    """
    return ScaleByLearningRate(_check_lr("scale_by_learning_rate", learning_rate), flip_sign)


def scale_by_adam(b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8) -> ScaleByAdam:
    """Adam's moment rescaling without the learning rate (see :class:`ScaleByAdam`).

    Raises:
        ValueError: if ``b1``/``b2`` are outside ``[0, 1)`` or ``eps`` is negative.
    """
    where = "scale_by_adam"
    return ScaleByAdam(
        _check_unit(where, "b1", b1), _check_unit(where, "b2", b2), _check_nonneg(where, "eps", eps)
    )


def add_decayed_weights(weight_decay: float = 0.0) -> AddDecayedWeights:
    """Add ``weight_decay * params`` to the gradients (see :class:`AddDecayedWeights`).

    Raises:
        ValueError: if ``weight_decay`` is negative or not finite.
    """
    return AddDecayedWeights(_check_nonneg("add_decayed_weights", "weight_decay", weight_decay))


def trace(decay: float, nesterov: bool = False) -> Trace:
    """Momentum accumulation (see :class:`Trace`).

    Raises:
        ValueError: if ``decay`` is outside ``[0, 1]``.
    """
    return Trace(_check_unit("trace", "decay", decay, closed_high=True), bool(nesterov))


def clip_by_global_norm(max_norm: float) -> ClipByGlobalNorm:
    """Clip gradients to global L2 norm ``max_norm`` (Optax's ``clip_by_global_norm``).

    Raises:
        ValueError: if ``max_norm`` is not a positive number.
    """
    if not (isinstance(max_norm, (int, float)) and max_norm > 0):
        raise ValueError(f"clip_by_global_norm: max_norm must be a number > 0, got {max_norm!r}")
    return ClipByGlobalNorm(float(max_norm))


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
) -> Chain:
    """Stochastic gradient descent with optional momentum, Nesterov momentum and L2 decay.

    ``g = grad + weight_decay * p``; with momentum ``b = momentum * b + g`` and the step uses
    ``b`` (or ``g + momentum * b`` with Nesterov); ``p <- p - lr * step``. This is PyTorch's
    ``torch.optim.SGD`` with ``dampening=0`` and Optax's ``sgd`` (plus its weight decay).

    Args:
        learning_rate: Number ``>= 0`` or schedule ``step -> rate``.
        momentum: ``None`` or 0 for none, else the momentum coefficient in ``[0, 1]``.
        nesterov: Use Nesterov momentum (needs ``momentum > 0``).
        weight_decay: L2 coefficient ``>= 0``, added to the gradient before momentum.

    Returns:
        ``chain(add_decayed_weights(weight_decay), trace(momentum, nesterov),
        scale_by_learning_rate(learning_rate))`` (blocks with zero coefficients omitted).

    Raises:
        ValueError: on out-of-range hyperparameters, or ``nesterov`` without momentum.
    """
    lr = _check_lr("sgd", learning_rate)
    parts = []
    if weight_decay:
        parts.append(add_decayed_weights(weight_decay))
    if momentum:
        parts.append(trace(momentum, nesterov))
    elif nesterov:
        raise ValueError("sgd: nesterov=True needs momentum > 0")
    elif momentum is not None:
        _check_unit("sgd", "momentum", momentum, closed_high=True)
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
    return chain(scale_by_adam(b1, b2, eps), ScaleByLearningRate(lr))


def adamw(
    learning_rate: float | Schedule,
    b1: float = 0.9,
    b2: float = 0.999,
    eps: float = 1e-8,
    weight_decay: float = 1e-4,
) -> Chain:
    """AdamW: Adam with decoupled weight decay.

    ``p <- p - lr * (m_hat / (sqrt(v_hat) + eps) + weight_decay * p)``: the decay is applied to
    the parameters, not added to the gradient before the moments. This is the seeds'
    ``Adam(weight_decay=...)`` step and PyTorch's ``torch.optim.AdamW``; defaults as Optax
    (``weight_decay=1e-4``). With ``weight_decay=0`` it equals :func:`adam`.

    Raises:
        ValueError: on out-of-range hyperparameters.

    References:
        Loshchilov and Hutter, "Decoupled Weight Decay Regularization", ICLR 2019.
    """
    lr = _check_lr("adamw", learning_rate)
    return chain(
        scale_by_adam(b1, b2, eps), add_decayed_weights(weight_decay), ScaleByLearningRate(lr)
    )


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
            and p.dtype.kind == "f"
            and p.shape == u.shape
        ):
            return None
        out.append(tnp.add(p, u))
    return tree_unflatten(tp, out)


def apply_updates(params, updates):
    """``params + updates`` leafwise, each result cast to its parameter's dtype.

    Leaf kinds are kept: Tensor parameters give Tensors, NumPy array parameters give NumPy
    arrays (new, read-only arrays; nothing is modified in place).

    Args:
        params: Pytree of floating Tensors/arrays.
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


def apply_gradients(tx: GradientTransformation, grads, opt_state, params):
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
    updates, new_state = tx.update(grads, opt_state, params)
    return apply_updates(params, updates), new_state

