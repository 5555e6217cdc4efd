"""Optax's wrappers of gradient transformations: ``masked``, ``multi_transform``, ``MultiSteps``.

- :func:`masked` runs a transformation on some leaves only (``mask`` True) and passes the other
  gradients through unchanged;
- :func:`multi_transform` runs a different transformation on each labelled group of leaves;
- :class:`MultiSteps` accumulates gradients over ``k`` calls and applies the wrapped
  transformation once, with their mean (gradient accumulation: a batch ``k`` times larger).

All three are frozen records like the other transformations; their ``update`` takes keyword
arguments (``value=loss``, ...) and hands them on to the wrapped transformations that take
them.

Example:
    >>> import numpy as np
    >>> import tapegrad as tg
    >>> from tapegrad import optim
    >>> params = {"w": tg.Tensor(np.array([1.0, 1.0])), "b": tg.Tensor(np.array([1.0]))}
    >>> tx = optim.chain(optim.masked(optim.add_decayed_weights(0.5), {"w": True, "b": False}),
    ...                  optim.sgd(1.0))
    >>> grads = {"w": tg.Tensor(np.array([0.0, 0.0])), "b": tg.Tensor(np.array([0.0]))}
    >>> new, _ = optim.apply_gradients(tx, grads, tx.init(params), params)
    >>> new["w"].numpy().tolist(), new["b"].numpy().tolist()   # decay on "w" only
    ([0.5, 0.5], [1.0])
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs
import numpy as np
import optree

from tapegrad import numpy as tnp
from tapegrad.core._keywords import strict_all
from tapegrad.core.tensor import Tensor
from tapegrad.core.tree import NAMESPACE, tree_flatten, tree_paths, tree_structure, tree_unflatten
from tapegrad.optim.transforms import (
    AddDecayedWeights,
    GradientTransformation,
    _check_match,
    _check_nonneg,
    _leaves,
    _traced,
    _update_extra,
    tree_zeros_like,
)

__all__ = [
    "Masked", "MultiTransform", "MultiSteps", "masked", "multi_transform", "add_decayed_weights",
]


# -- masks ------------------------------------------------------------------------------------
def _full_mask(where: str, mask, tree, tree_name: str) -> list:
    """One bool per leaf of ``tree`` from ``mask``, a pytree of bools whose structure is
    ``tree``'s or a prefix of it (a bool at a subtree applies to all its leaves)."""
    try:
        full = optree.tree_broadcast_prefix(mask, tree, namespace=NAMESPACE)
    except (ValueError, TypeError) as e:
        raise ValueError(
            f"{where}: the mask's structure must be {tree_name}' structure or a prefix of it "
            f"(a bool for a whole subtree):\n  mask:   {tree_structure(mask)}\n"
            f"  {tree_name}: {tree_structure(tree)}\n  ({e})"
        ) from None
    flat = optree.tree_leaves(full, namespace=NAMESPACE)
    for i, m in enumerate(flat):
        if not isinstance(m, (bool, np.bool_)):
            path = tree_paths(tree, prefix=tree_name)[i]
            raise TypeError(
                f"{where}: the mask's entry for {path} is a {type(m).__name__}; expected a "
                "Python bool (True: transform this leaf, False: pass it through)."
            )
    return [bool(m) for m in flat]


def _mask_tree(tree, flags: list):
    """``tree`` with every leaf whose flag is False replaced by ``None`` (an empty node, so the
    wrapped transformation sees only the selected leaves)."""
    leaves, treedef = tree_flatten(tree)
    return tree_unflatten(treedef, [x if f else None for x, f in zip(leaves, flags)])


def _resolve(spec, tree) -> Any:
    """A mask or label pytree: ``spec`` itself, or ``spec(tree)`` when it is callable."""
    return spec(tree) if callable(spec) else spec


@attrs.frozen
class Masked(GradientTransformation):
    """Applies ``inner`` to the leaves whose mask is True; the others pass through unchanged.

    See :func:`masked`. State ``{"inner_state": <inner's state for the masked params>}``.
    """

    inner: GradientTransformation
    mask: Any

    def init(self, params):
        flags = _full_mask("masked", _resolve(self.mask, params), params, "params")
        return {"inner_state": self.inner.init(_mask_tree(params, flags))}

    def update(self, grads, state, params=None, **extra_args):
        where = "masked"
        if not isinstance(state, dict) or "inner_state" not in state:
            raise TypeError(f"{where}: state must be the dict from init, got {state!r:.80}")
        flags = _full_mask(where, _resolve(self.mask, grads), grads, "grads")
        leaves, treedef = tree_flatten(grads)
        out, new_inner = _update_selected(
            where, "the wrapped transformation", "the {} selected gradients", self.inner,
            flags, grads, leaves, state["inner_state"], params, extra_args)
        return tree_unflatten(treedef, out), {"inner_state": new_inner}


def _update_selected(where: str, what: str, selected: str, tx, flags: list, grads, out: list,
                     state, params, extra_args: dict) -> tuple[list, Any]:
    """Update the leaves of ``grads`` that ``flags`` selects with ``tx`` (its state
    ``state``): ``out`` (the update leaves so far) with those leaves replaced, and ``tx``'s new
    state. ``what`` names ``tx`` and ``selected`` (a format string taking their number) the
    selected gradients in the error for an update of another structure."""
    masked_params = None if params is None else _mask_tree(params, flags)
    new_u, new_state = _update_extra(tx, _mask_tree(grads, flags), state, masked_params,
                                     extra_args)
    new_leaves = optree.tree_leaves(new_u, namespace=NAMESPACE)
    if len(new_leaves) != sum(flags):
        raise ValueError(
            f"{where}: {what} returned {len(new_leaves)} update leaves for "
            f"{selected.format(sum(flags))}; it must keep their structure."
        )
    it = iter(new_leaves)
    return [next(it) if f else u for u, f in zip(out, flags)], new_state


def masked(inner: GradientTransformation, mask) -> Masked:
    """Apply ``inner`` only to the leaves selected by ``mask`` (Optax's ``masked``).

    Leaves whose mask is False keep their incoming gradients (updates) unchanged, and the inner
    transformation never sees them: its state covers the selected leaves only, and the others
    appear in it as ``None`` (an empty pytree node; Optax uses its ``MaskedNode``). The usual use
    is weight decay on the weight matrices only:
    ``chain(masked(add_decayed_weights(1e-4), lambda p: tree_map(lambda x: x.ndim > 1, p)),
    sgd(0.1))``.

    Args:
        inner: The transformation to apply to the selected leaves.
        mask: A pytree of Python bools with the parameters' structure or a prefix of it (a
            bool at a subtree applies to the whole subtree), or a callable returning one. As in
            Optax, a callable is called with ``params`` in ``init`` and with the incoming
            ``updates`` (which have the parameters' structure) in ``update``.

    Returns:
        A :class:`Masked` transformation. Its updates have the incoming updates' structure,
        shapes and dtypes; ``update`` passes ``params`` (masked alike) and any keyword
        arguments on to ``inner``.

    Raises:
        TypeError: if ``inner`` is not a transformation or ``mask`` neither a pytree nor
            callable; at ``init``/``update``, if a mask entry is not a bool.
        ValueError: at ``init``/``update``, if the mask's structure is not the parameters'
            (or a prefix of it).
    """
    if not isinstance(inner, GradientTransformation):
        raise TypeError(
            f"masked: inner must be a gradient transformation, got {type(inner).__name__}"
        )
    if isinstance(mask, (Tensor, np.ndarray)):
        raise TypeError(
            "masked: mask must be a pytree of Python bools or a callable returning one, got a "
            f"{type(mask).__name__} (an array is a single leaf: use a bool per parameter)"
        )
    return Masked(inner, mask)


@attrs.frozen
class MultiTransform(GradientTransformation):
    """Applies ``transforms[label]`` to the leaves labelled ``label``; see
    :func:`multi_transform`. State ``{"inner_states": {label: masked state}}``."""

    transforms: tuple  # ((label, transformation), ...) in the order given
    param_labels: Any


    def _labels(self, where: str, tree, name: str) -> list:
        labels = _resolve(self.param_labels, tree)
        try:
            full = optree.tree_broadcast_prefix(labels, tree, namespace=NAMESPACE)
        except (ValueError, TypeError) as e:
            raise ValueError(
                f"{where}: param_labels' structure must be {name}' structure or a prefix of "
                f"it:\n  labels: {tree_structure(labels)}\n  {name}: {tree_structure(tree)}\n"
                f"  ({e})"
            ) from None
        flat = optree.tree_leaves(full, namespace=NAMESPACE)
        known = [k for k, _ in self.transforms]
        for i, label in enumerate(flat):
            if label not in known:
                path = tree_paths(tree, prefix=name)[i]
                raise ValueError(
                    f"{where}: {path} has label {label!r}, which has no transformation; "
                    f"transforms has labels {known}."
                )
        return flat

    def init(self, params):
        labels = self._labels("multi_transform", params, "params")
        return {
            "inner_states": {
                k: tx.init(_mask_tree(params, [x == k for x in labels]))
                for k, tx in self.transforms
            }
        }

    def update(self, grads, state, params=None, **extra_args):
        where = "multi_transform"
        inner = state.get("inner_states") if isinstance(state, dict) else None
        if not isinstance(inner, dict) or set(inner) != {k for k, _ in self.transforms}:
            raise TypeError(
                f"{where}: state must be the dict from init, with one inner state per label "
                f"{[k for k, _ in self.transforms]}"
            )
        labels = self._labels(where, grads, "grads")
        leaves, treedef = tree_flatten(grads)
        out = list(leaves)
        new_states = {}
        for k, tx in self.transforms:
            out, new_states[k] = _update_selected(
                where, f"the transformation for {k!r}", "its {} gradients", tx,
                [x == k for x in labels], grads, out, inner[k], params, extra_args)
        return tree_unflatten(treedef, out), {"inner_states": new_states}


def multi_transform(transforms: Mapping, param_labels) -> MultiTransform:
    """Apply a different transformation to each labelled group of leaves (Optax's
    ``multi_transform``).

    Every leaf gets a label; ``transforms[label]`` updates the leaves with that label, as if
    wrapped in :func:`masked` with the mask ``label == that label``. Each leaf is updated by
    exactly one transformation; a transformation whose label no leaf has keeps an empty state.

    Args:
        transforms: Mapping from label (a string, or any hashable, sortable value) to a
            :class:`GradientTransformation`.
        param_labels: A pytree of labels with the parameters' structure or a prefix of it, or a
            callable returning one (called with ``params`` in ``init`` and with the incoming
            updates in ``update``, as in Optax).

    Returns:
        A :class:`MultiTransform` transformation, with state
        ``{"inner_states": {label: <that transformation's state>}}``, each for its own leaves
        (the others appear as ``None``). Its updates have the incoming updates' structure,
        shapes and dtypes.

    Raises:
        TypeError: if ``transforms`` is not a mapping of transformations.
        ValueError: at ``init``/``update``, if a leaf's label has no transformation or the
            labels' structure does not match the parameters'.

    Example:
        >>> import numpy as np
        >>> import tapegrad as tg
        >>> from tapegrad import optim
        >>> params = {"w": tg.Tensor(np.array([1.0])), "b": tg.Tensor(np.array([1.0]))}
        >>> tx = optim.multi_transform({"fast": optim.sgd(1.0), "frozen": optim.sgd(0.0)},
        ...                            {"w": "fast", "b": "frozen"})
        >>> g = {"w": tg.Tensor(np.array([0.5])), "b": tg.Tensor(np.array([0.5]))}
        >>> new, _ = optim.apply_gradients(tx, g, tx.init(params), params)
        >>> new["w"].numpy().tolist(), new["b"].numpy().tolist()
        ([0.5], [1.0])
    """
    if not isinstance(transforms, Mapping):
        raise TypeError(
            "multi_transform: transforms must be a mapping label -> transformation, got "
            f"{type(transforms).__name__}"
        )
    for k, tx in transforms.items():
        if not isinstance(tx, GradientTransformation):
            raise TypeError(
                f"multi_transform: transforms[{k!r}] is a {type(tx).__name__}, expected a "
                "gradient transformation"
            )
    return MultiTransform(tuple(transforms.items()), param_labels)


# -- gradient accumulation ------------------------------------------------------------------------
def _select(emit: Tensor, new, old):
    """``new`` where ``emit`` else ``old``, leafwise, for states whose counters are Tensors
    (``tg.jit``). The dtype is ``new``'s (the transformation's own, so an int64 counter stays
    one), else ``old``'s (Python ints as int64, Python floats as float64)."""

    def pick(n, o):
        if isinstance(n, Tensor):
            dtype = n.dtype
        elif isinstance(o, Tensor) or hasattr(o, "dtype"):
            dtype = o.dtype
        elif isinstance(o, (bool, np.bool_)):
            dtype = np.bool_
        elif isinstance(o, (int, np.integer)):
            dtype = np.int64
        else:
            dtype = np.float64
        o = o if isinstance(o, Tensor) else Tensor(np.asarray(o, dtype))
        n = n if isinstance(n, Tensor) else Tensor(np.asarray(n, dtype))
        return tnp.astype(tnp.where(emit, n, o), dtype)

    if tree_structure(new) != tree_structure(old):
        raise ValueError(
            "MultiSteps: the wrapped transformation's state changed structure in update:\n"
            f"  before: {tree_structure(old)}\n  after:  {tree_structure(new)}"
        )
    return optree.tree_map(pick, new, old, namespace=NAMESPACE)


@attrs.frozen
class MultiSteps(GradientTransformation):
    """Gradient accumulation: apply ``inner`` once every ``k`` calls (Optax's ``MultiSteps``).

    Each call adds its gradients to an accumulator (a running mean, or a sum if
    ``use_grad_mean`` is False) and returns zero updates, except every ``k``-th call, which
    passes the accumulated gradients to ``inner`` (with ``params`` and any keyword arguments),
    returns ``inner``'s updates and restarts the accumulator. ``k`` training steps on batches of
    ``n`` then make one step of ``inner`` on the mean gradient of ``k * n`` examples, and
    ``inner``'s state (its step count, moments, schedule) advances once per ``k`` calls.

    Formally, with ``j`` the mini-step (0-based, within the current group of ``k``)::

        acc = acc + (g - acc) / (j + 1)     (mean; acc + g for the sum)
        j < k - 1:   updates = 0,                        j = j + 1
        j = k - 1:   updates, s = inner.update(acc, s),  j = 0, acc = 0, gradient_step += 1

    Args:
        inner: The transformation to apply to the accumulated gradients.
        every_k_schedule: ``k``, an int ``>= 1``, or a callable ``gradient_step -> k`` (the
            number of inner updates so far, an int) to vary the effective batch size.
        use_grad_mean: Average the accumulated gradients (default); False sums them.

    State ``{"mini_step": j, "gradient_step": int, "inner_opt_state": ..., "acc_grads": ...}``
    (Optax's names); the counters are Python ints, ``acc_grads`` has the gradients' shapes and
    dtypes (Optax accumulates in float32 by default; here each leaf keeps its own dtype).
    Under ``tg.jit`` the counters arrive as Tensors: the update is then computed without
    Python decisions (``inner`` runs at every call and its result is selected with
    ``tnp.where``, as Optax does under ``jax.jit``), so a recorded step replays for every
    mini-step, and the counters stay int64.

    Raises:
        TypeError: if ``inner`` is not a transformation or ``every_k_schedule`` neither an int
            nor callable; at ``update``, if the schedule does not return an int ``>= 1``.
        ValueError: if ``every_k_schedule`` is an int ``< 1``.

    Example:
        >>> import numpy as np
        >>> import tapegrad as tg
        >>> from tapegrad import optim
        >>> tx = optim.MultiSteps(optim.sgd(1.0), every_k_schedule=2)
        >>> params = {"w": tg.Tensor(np.array([0.0]))}
        >>> state = tx.init(params)
        >>> for g in [1.0, 3.0]:
        ...     params, state = optim.apply_gradients(
        ...         tx, {"w": tg.Tensor(np.array([g]))}, state, params)
        ...     print(params["w"].numpy().tolist(), tx.has_updated(state))
        [0.0] False
        [-2.0] True

    References:
        Optax, ``optax.MultiSteps``; Welford, "Note on a Method for Calculating Corrected Sums
        of Squares and Products", Technometrics 4(3), 1962 (the running mean).
    """

    inner: GradientTransformation
    every_k_schedule: int | Callable[[int], int]
    use_grad_mean: bool = True

    def __attrs_post_init__(self):
        if not isinstance(self.inner, GradientTransformation):
            raise TypeError(
                f"MultiSteps: inner must be a gradient transformation, got "
                f"{type(self.inner).__name__}"
            )
        k = self.every_k_schedule
        if isinstance(k, bool) or not (isinstance(k, (int, np.integer)) or callable(k)):
            raise TypeError(
                "MultiSteps: every_k_schedule must be an int >= 1 or a callable "
                f"gradient_step -> int, got {type(k).__name__}"
            )
        if not callable(k) and k < 1:
            raise ValueError(f"MultiSteps: every_k_schedule must be >= 1, got {k}")

    @property
    def inner_opt(self) -> GradientTransformation:
        """The wrapped transformation (Optax's name)."""
        return self.inner

    def gradient_transformation(self) -> MultiSteps:
        """This object (Optax's ``MultiSteps`` needs the call; here it is already a
        transformation)."""
        return self

    def _k(self, gradient_step):
        k = self.every_k_schedule
        if not callable(k):
            return int(k)
        k = _traced(k(gradient_step))
        if isinstance(k, Tensor):
            if k.shape != () or k.dtype.kind not in "iu":
                raise TypeError(
                    f"MultiSteps: every_k_schedule returned a Tensor of shape {k.shape} and "
                    f"dtype {k.dtype}; expected an int >= 1"
                )
            if not bool(tnp.greater_equal(k, 1)):  # checked at every step (tg.jit: a guard)
                raise ValueError(
                    f"MultiSteps: every_k_schedule returned {int(k)} at gradient step "
                    f"{int(gradient_step) if isinstance(gradient_step, Tensor) else gradient_step}"
                    "; expected an int >= 1"
                )
            return k
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
            raise TypeError(f"MultiSteps: every_k_schedule returned {k!r}; expected an int >= 1")
        if k < 1:
            raise ValueError(
                f"MultiSteps: every_k_schedule returned {k} at gradient step {gradient_step}; "
                "expected an int >= 1"
            )
        return int(k)

    def init(self, params):
        return {
            "mini_step": 0,
            "gradient_step": 0,
            "inner_opt_state": self.inner.init(params),
            "acc_grads": tree_zeros_like(params),
        }

    def has_updated(self, state) -> bool | Tensor:
        """Whether the last ``update`` applied ``inner`` (Optax's ``has_updated``): the
        mini-step is back at 0 and at least one inner update happened. A bool Tensor when the
        counters are Tensors."""
        j, n = state["mini_step"], state["gradient_step"]
        if isinstance(j, Tensor) or isinstance(n, Tensor):
            return tnp.logical_and(tnp.equal(j, 0), tnp.greater(n, 0))
        return j == 0 and n > 0

    def update(self, grads, state, params=None, **extra_args):
        where = "MultiSteps"
        keys = {"mini_step", "gradient_step", "inner_opt_state", "acc_grads"}
        if not isinstance(state, dict) or set(state) != keys:
            raise TypeError(f"{where}: state must be the dict from init with keys {sorted(keys)}")
        numbers: dict[str, Any] = {  # Python numbers tg.jit traces: as exact Tensors
            k: optree.tree_map(_traced, v, namespace=NAMESPACE) for k, v in state.items()
        }
        state = numbers
        _check_match(where, grads, "grads", state["acc_grads"], "state['acc_grads']")
        g, treedef = _leaves(where, grads, "grads")
        acc, _ = _leaves(where, state["acc_grads"], "state['acc_grads']")
        j, n = state["mini_step"], state["gradient_step"]
        if isinstance(j, Tensor) or isinstance(n, Tensor):
            return self._update_tensors(g, acc, treedef, state, params, extra_args)
        k = self._k(n)
        if self.use_grad_mean:
            new_acc = [tnp.add(a, tnp.divide(tnp.subtract(gi, a), j + 1)) for gi, a in zip(g, acc)]
        else:
            new_acc = [tnp.add(gi, a) for gi, a in zip(g, acc)]
        if j < k - 1:
            zeros = tree_zeros_like(grads)
            return zeros, {
                "mini_step": j + 1,
                "gradient_step": n,
                "inner_opt_state": state["inner_opt_state"],
                "acc_grads": tree_unflatten(treedef, new_acc),
            }
        updates, inner_state = _update_extra(
            self.inner,
            tree_unflatten(treedef, new_acc),
            state["inner_opt_state"],
            params,
            extra_args,
        )
        return updates, {
            "mini_step": 0,
            "gradient_step": n + 1,
            "inner_opt_state": inner_state,
            "acc_grads": tree_zeros_like(grads),
        }

    def _update_tensors(self, g, acc, treedef, state, params, extra_args):
        """The update without Python decisions on the counters (``tg.jit``)."""

        def i64(x):
            return (
                tnp.astype(x, np.int64)
                if isinstance(x, Tensor)
                else Tensor(np.asarray(x, np.int64))
            )

        j, n = i64(state["mini_step"]), i64(state["gradient_step"])
        k = self._k(n)
        if self.use_grad_mean:
            new_acc = [
                tnp.add(a, tnp.divide(tnp.subtract(gi, a), tnp.astype(tnp.add(j, 1), gi.dtype)))
                for gi, a in zip(g, acc)
            ]
        else:
            new_acc = [tnp.add(gi, a) for gi, a in zip(g, acc)]
        emit = tnp.equal(j, k - 1 if isinstance(k, int) else tnp.subtract(k, 1))
        inner_updates, inner_state = _update_extra(
            self.inner,
            tree_unflatten(treedef, new_acc),
            state["inner_opt_state"],
            params,
            extra_args,
        )
        updates = optree.tree_map(
            lambda u: tnp.where(emit, u, tnp.zeros_like(u)), inner_updates, namespace=NAMESPACE
        )
        return updates, {
            "mini_step": tnp.remainder(tnp.add(j, 1), k),
            "gradient_step": tnp.where(emit, tnp.add(n, 1), n),
            "inner_opt_state": _select(emit, inner_state, state["inner_opt_state"]),
            "acc_grads": tree_unflatten(
                treedef, [tnp.where(emit, tnp.zeros_like(a), a) for a in new_acc]
            ),
        }


# -- weight decay on the leaves a mask selects -------------------------------------------------
def add_decayed_weights(weight_decay: float = 0.0, mask: Any = None) -> GradientTransformation:
    """Add ``weight_decay * params`` to the gradients (see :class:`AddDecayedWeights`), on the
    leaves ``mask`` selects (Optax's ``add_decayed_weights``).

    Args:
        weight_decay: Coefficient ``>= 0``.
        mask: ``None`` (every leaf), or which leaves get the decay, as
            :func:`~tapegrad.optim.masked` takes it: a pytree of Python bools with the
            parameters' structure or a prefix of it, or a callable ``params -> that pytree``
            (for example ``lambda p: tg.tree.tree_map(lambda x: x.ndim > 1, p)``: the weight
            matrices, not the biases). The other leaves pass unchanged.

    Returns:
        :class:`AddDecayedWeights`, or ``masked(AddDecayedWeights(weight_decay), mask)``.

    Raises:
        TypeError: if ``weight_decay`` is not a number or ``mask`` is an array; at
            ``init``/``update``, if a mask entry is not a bool.
        ValueError: if ``weight_decay`` is negative or not finite; at ``init``/``update``, if
            the mask's structure does not match the parameters'.

    Example:
        >>> import numpy as np
        >>> import tapegrad as tg
        >>> from tapegrad import optim
        >>> params = {"w": tg.Tensor(np.array([[2.0]])), "b": tg.Tensor(np.array([2.0]))}
        >>> tx = optim.add_decayed_weights(0.5, mask=lambda p: {k: v.ndim > 1
        ...                                                     for k, v in p.items()})
        >>> zeros = optim.tree_zeros_like(params)
        >>> u, _ = tx.update(zeros, tx.init(params), params)
        >>> u["w"].numpy().tolist(), u["b"].numpy().tolist()
        ([[1.0]], [0.0])
    """
    block = AddDecayedWeights(_check_nonneg("add_decayed_weights", "weight_decay", weight_decay))
    if mask is None:
        return block
    return masked(block, mask)


strict_all(globals(), __all__)  # an unknown keyword is a TypeError naming the closest valid one
