"""Skipping updates whose gradients are not finite: :func:`apply_if_finite` (Optax's)."""

from __future__ import annotations

from typing import Any, NamedTuple

import attrs
import numpy as np

from tapegrad import numpy as tnp
from tapegrad.core._keywords import strict_all
from tapegrad.core.tensor import Tensor
from tapegrad.core.tree import tree_leaves
from tapegrad.optim.transforms import GradientTransformation, _update_extra, tree_zeros_like

__all__ = ["apply_if_finite", "ApplyIfFinite", "ApplyIfFiniteState"]


class ApplyIfFiniteState(NamedTuple):
    """State of :func:`apply_if_finite` (Optax's fields).

    Attributes:
        notfinite_count: int32 0-d Tensor: consecutive updates with non-finite gradients.
        last_finite: bool 0-d Tensor: whether the latest gradients were all finite.
        total_notfinite: int32 0-d Tensor: all updates with non-finite gradients so far.
        inner_state: The wrapped transformation's state.
    """

    notfinite_count: Any
    last_finite: Any
    total_notfinite: Any
    inner_state: Any


def _all_finite(tree) -> Tensor:
    """A bool 0-d Tensor: every element of every leaf of ``tree`` is finite (True for none)."""
    out = Tensor(np.bool_(True))
    for leaf in tree_leaves(tree):
        if leaf is None:
            continue
        out = tnp.logical_and(out, tnp.all(tnp.isfinite(tnp.stop_gradient(tnp.asarray(leaf)))))
    return out


def _increment(count: Tensor) -> Tensor:
    """``count + 1``, saturating at int32's maximum (Optax's ``safe_increment``)."""
    top = np.iinfo(np.int32).max
    return tnp.where(count < top, count + 1, count).astype(np.int32)


@attrs.frozen
class ApplyIfFinite(GradientTransformation):
    """The transformation :func:`apply_if_finite` returns (see there).

    Attributes:
        inner: The wrapped transformation.
        max_consecutive_errors: Non-finite updates in a row skipped before one is applied.
    """

    inner: GradientTransformation
    max_consecutive_errors: int

    def __attrs_post_init__(self):
        if not isinstance(self.inner, GradientTransformation):
            raise TypeError(
                f"apply_if_finite: inner must be a gradient transformation (such as "
                f"optim.adam(1e-3)), got {type(self.inner).__name__}"
            )
        m = self.max_consecutive_errors
        if isinstance(m, (bool, np.bool_)) or not isinstance(m, (int, np.integer)):
            raise TypeError(
                f"apply_if_finite: max_consecutive_errors must be an int >= 0, got "
                f"{type(m).__name__}"
            )
        if m < 0:
            raise ValueError(f"apply_if_finite: max_consecutive_errors must be >= 0, got {m}")

    def init(self, params) -> ApplyIfFiniteState:
        """Zero counters, ``last_finite`` True, and ``inner``'s initial state."""
        return ApplyIfFiniteState(
            notfinite_count=Tensor(np.int32(0)),
            last_finite=Tensor(np.bool_(True)),
            total_notfinite=Tensor(np.int32(0)),
            inner_state=self.inner.init(params),
        )

    def update(self, grads, state, params=None, **extra_args) -> tuple[Any, Any]:
        """``inner``'s update when every gradient is finite (or after more than
        ``max_consecutive_errors`` non-finite ones in a row); otherwise zero updates and
        ``inner``'s state unchanged.

        Raises:
            TypeError: if ``state`` is not an :class:`ApplyIfFiniteState`.
        """
        if not isinstance(state, ApplyIfFiniteState):
            raise TypeError(
                f"apply_if_finite: state must be the ApplyIfFiniteState that init returned, "
                f"got {type(state).__name__}"
            )
        finite = _all_finite(grads)
        count = tnp.asarray(state.notfinite_count)
        total = tnp.asarray(state.total_notfinite)
        notfinite_count = tnp.where(finite, tnp.zeros((), np.int32), _increment(count))
        total_notfinite = tnp.where(finite, total, _increment(total))
        if bool(tnp.logical_or(finite, notfinite_count > self.max_consecutive_errors)):
            updates, inner_state = _update_extra(self.inner, grads, state.inner_state, params,
                                                 extra_args)
        else:
            updates, inner_state = tree_zeros_like(grads), state.inner_state
        return updates, ApplyIfFiniteState(
            notfinite_count=notfinite_count.astype(np.int32),
            last_finite=finite,
            total_notfinite=total_notfinite.astype(np.int32),
            inner_state=inner_state,
        )


def apply_if_finite(inner: GradientTransformation, max_consecutive_errors: int) -> ApplyIfFinite:
    """Skip updates whose gradients hold a NaN or an infinity (Optax's ``apply_if_finite``).

    Each ``update`` checks every gradient leaf. When all are finite, ``inner`` is updated as
    usual. Otherwise the update is all zeros, ``inner``'s state is kept, and the counters note
    it; after more than ``max_consecutive_errors`` non-finite updates in a row the update is
    passed to ``inner`` anyway (so that a run that only ever sees non-finite gradients fails
    loudly rather than silently standing still). Used with dynamic loss scaling
    (:class:`tapegrad.mixed_precision.DynamicLossScale`), whose overflowing steps it skips.

    Args:
        inner: The transformation to protect, such as ``optim.adam(1e-3)``.
        max_consecutive_errors: An int ``>= 0``: non-finite updates in a row that are skipped.

    Returns:
        A transformation whose state is an :class:`ApplyIfFiniteState` (``notfinite_count``,
        ``last_finite``, ``total_notfinite``, ``inner_state``: Optax's fields; counters are
        int32 0-d Tensors, ``last_finite`` a bool one).

    Raises:
        TypeError: if ``inner`` is not a transformation or ``max_consecutive_errors`` not an
            int.
        ValueError: if ``max_consecutive_errors`` is negative.

    Example:
        >>> import numpy as np
        >>> import tapegrad as tg
        >>> from tapegrad import optim
        >>> tx = optim.apply_if_finite(optim.sgd(1.0), max_consecutive_errors=2)
        >>> params = {"w": tg.Tensor(np.array([1.0]))}
        >>> state = tx.init(params)
        >>> params, state = optim.apply_gradients(
        ...     tx, {"w": tg.Tensor(np.array([np.inf]))}, state, params)
        >>> params["w"].numpy().tolist(), int(state.total_notfinite), bool(state.last_finite)
        ([1.0], 1, False)

    References:
        Optax, ``optax.apply_if_finite``.
    """
    return ApplyIfFinite(inner, max_consecutive_errors)


strict_all(globals(), ["apply_if_finite"])  # an unknown keyword: a TypeError naming the closest
