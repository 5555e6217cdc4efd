"""Stateful optimizers with a PyTorch-like API, as thin wrappers over the pure transforms.

An :class:`Optimizer` holds one parameter pytree (or a Module's), the pure transform's state,
the latest gradients given to it (where PyTorch keeps ``.grad``), the learning rate and the step
count. ``step(grads)`` calls the pure transform and applies its updates
(:func:`~tapegrad.optim.apply_gradients`), then replaces the parameters wholesale: no array
anyone can see is modified in place. There is no math here.

Module interface (duck-typed; ``tapegrad.optim`` never imports ``tapegrad.nn``): an object with
a ``params`` attribute (its parameter pytree) and a method ``_set_params(new_params)`` that
replaces that pytree wholesale. An optimizer built from such an object reads ``module.params``
at every step and writes the new parameters back with ``module._set_params``.

Example:
    >>> import numpy as np
    >>> import tapegrad as tg
    >>> from tapegrad import optim
    >>> params = {"w": tg.Tensor(np.array([1.0, 2.0]))}
    >>> opt = optim.SGD(params, lr=0.1)
    >>> grads = tg.grad(lambda p: (p["w"] * p["w"]).sum())(opt.params)
    >>> opt.step(grads)
    >>> opt.params["w"].numpy().tolist(), opt.timestep
    ([0.8, 1.6], 1)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import optree

from tapegrad.optim import transforms as T
from tapegrad.tensor import Tensor
from tapegrad.tree import NAMESPACE, tree_flatten_with_path, tree_structure

__all__ = [
    "Optimizer",
    "SGD",
    "Adam",
    "AdamW",
    "RMSprop",
    "Adagrad",
    "Lion",
    "ReduceLROnPlateau",
    "is_module",
]


def is_module(obj) -> bool:
    """Whether ``obj`` has the Module interface the optimizers use (``params`` and
    ``_set_params``)."""
    return hasattr(obj, "params") and hasattr(obj, "_set_params")


def _named_leaves(tree) -> dict[str, Any]:
    """Leaves of ``tree`` keyed by dotted names (``"layers.0.weight"``), in flatten order."""
    paths, leaves, _ = optree.tree_flatten_with_path(tree, namespace=NAMESPACE)
    out: dict[str, Any] = {}
    for path, leaf in zip(paths, leaves):
        name = ".".join(str(k) for k in path)
        if name in out:
            raise ValueError(
                f"Optimizer: two parameters share the dotted name {name!r}; rename a key "
                "(dict keys containing '.' can collide with nesting)."
            )
        out[name] = leaf
    return out


def _array(leaf):
    return leaf._array if isinstance(leaf, Tensor) else leaf


class Optimizer:
    """Base stateful optimizer (as PyTorch's ``Optimizer``) over a pure gradient transform.

    Args:
        model_parameters: A parameter pytree (for example ``model.parameters()`` or
            ``model.params``) or a Module (an object with ``params`` and ``_set_params``; the
            new parameters are written back into it at each step).
        lr: Learning rate (``>= 0``), the value passed to the transform at each step.
        lr_scheduler_kwargs: Optional dict with key ``"lr_scheduler_cls"`` (a class such as
            :class:`~tapegrad.optim.schedules.CosineScheduler`, whose instances are called as
            ``scheduler(step, initial_lr, current_lr)``) and the keyword arguments of that
            class. ``update_lr()`` (run at each ``step``) sets ``lr`` from it.
        transform: Keyword-only; ``lr -> GradientTransformation`` building the pure update for
            the current learning rate (for example ``lambda lr: optim.adam(lr)``). Subclasses
            provide it from their hyperparameters.
        **kwargs: Further hyperparameters, kept in ``state_dict()["hyperparams"]``.
            ``max_grad_norm`` clips the gradients' global L2 norm at each
            step, before the update.

    Attributes:
        params: The current parameter pytree (the Module's, if built from one).
        grads: The latest gradients given to :meth:`step`/:meth:`set_grads`, or ``None``.
        lr: Current learning rate (settable).
        timestep: Number of steps taken.
        opt_state: The pure transform's state (a pytree).

    Raises:
        TypeError: if ``lr`` is not a number, or ``lr_scheduler_kwargs`` lacks a class.
        ValueError: if ``lr`` is negative or not finite.
    """

    def __init__(
        self,
        model_parameters: Any,
        lr: float,
        lr_scheduler_kwargs: dict | None = None,
        *,
        transform: Callable[[float], T.GradientTransformation] | None = None,
        **kwargs: Any,
    ) -> None:
        name = type(self).__name__
        if isinstance(lr, bool) or not isinstance(lr, (int, float)):
            raise TypeError(f"{name}: lr must be a number, got {type(lr).__name__}")
        if not math.isfinite(lr) or lr < 0:
            raise ValueError(f"{name}: lr must be finite and >= 0, got {lr}")
        if transform is None and type(self)._make_transform is Optimizer._make_transform:
            raise TypeError(
                "Optimizer: the base class needs transform=(lr -> GradientTransformation), "
                "for example Optimizer(params, lr=0.1, transform=lambda lr: optim.sgd(lr)); "
                "or use optim.SGD / optim.Adam / optim.AdamW."
            )
        if transform is not None and type(self)._make_transform is not Optimizer._make_transform:
            raise TypeError(
                f"{name}: transform= is for the base Optimizer; {name} builds its own update "
                "from its hyperparameters."
            )
        if "max_grad_norm" in kwargs:
            T.clip_by_global_norm(kwargs["max_grad_norm"])  # validates
        self._transform_fn = transform
        self._module = model_parameters if is_module(model_parameters) else None
        self._params = None if self._module is not None else model_parameters
        self._hyperparams: dict[str, Any] = {"lr": float(lr), "initial_lr": float(lr)}
        self._hyperparams.update(kwargs)
        self.lr_scheduler = self._build_scheduler(lr_scheduler_kwargs)
        self._timestep = 0
        self._grads = None
        self._opt_state = self._full_transform().init(self.params)

    # -- construction helpers ----------------------------------------------------------------
    @staticmethod
    def _build_scheduler(kwargs: dict | None):
        if kwargs is None:
            return None
        kwargs = dict(kwargs)
        cls = kwargs.pop("lr_scheduler_cls", None)
        if cls is None:
            raise TypeError(
                "Optimizer: lr_scheduler_kwargs needs 'lr_scheduler_cls' (for example "
                "optim.CosineScheduler) beside that class's keyword arguments"
            )
        scheduler = cls(**kwargs)
        if not callable(scheduler):
            raise TypeError(
                f"Optimizer: {cls.__name__} instances must be callable as "
                "scheduler(step, initial_lr, current_lr)"
            )
        return scheduler

    def _make_transform(self) -> T.GradientTransformation:
        """The pure update for the current hyperparameters (subclasses override)."""
        return self._transform_fn(self.lr)  # pyright: ignore[reportArgumentType, reportOptionalCall]

    def _full_transform(self) -> T.GradientTransformation:
        clip = self._hyperparams.get("max_grad_norm")
        first = T.identity() if clip is None else T.clip_by_global_norm(clip)
        return T.chain(first, self._make_transform())

    # -- properties ------------------------------------------------------------------------
    @property
    def params(self):
        """The current parameter pytree (read live from the Module when built from one)."""
        return self._module.params if self._module is not None else self._params

    @property
    def module(self):
        """The Module this optimizer writes into, or ``None``."""
        return self._module

    @property
    def grads(self):
        """The latest gradients held (``None`` after :meth:`zero_grad`)."""
        return self._grads

    @property
    def opt_state(self):
        """The pure transform's state pytree."""
        return self._opt_state

    @property
    def lr(self) -> float:
        """The current learning rate."""
        return self._hyperparams["lr"]

    @lr.setter
    def lr(self, value: float) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{type(self).__name__}.lr: expected a number, got {value!r}")
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"{type(self).__name__}.lr: expected a number >= 0, got {value!r}")
        self._hyperparams["lr"] = float(value)

    @property
    def initial_lr(self) -> float:
        """The learning rate given at construction (the scheduler's peak)."""
        return self._hyperparams["initial_lr"]

    @property
    def timestep(self) -> int:
        """The number of steps taken (the global step the scheduler sees)."""
        return self._timestep

    @property
    def hyperparams(self) -> dict:
        """A copy of the hyperparameters (``lr``, ``initial_lr`` and the optimizer's own)."""
        return dict(self._hyperparams)

    # -- gradients -----------------------------------------------------------------------------
    def set_grads(self, grads) -> None:
        """Hold ``grads`` (a pytree shaped like ``params``) as the latest gradients.

        Raises:
            TypeError: if the structure differs from ``params``.
            ValueError: if a leaf shape differs.
        """
        T._check_match(f"{type(self).__name__}.set_grads", grads, "grads", self.params, "params")
        self._grads = grads

    def accumulate_grads(self, grads) -> None:
        """Add ``grads`` to the held gradients (hold them if none are held), as repeated
        ``backward()`` calls accumulate ``.grad`` in PyTorch."""
        if self._grads is None:
            self.set_grads(grads)
        else:
            T._check_match(
                f"{type(self).__name__}.accumulate_grads", grads, "grads", self.params, "params"
            )
            self._grads = T.tree_add(self._grads, grads)

    def zero_grad(self) -> None:
        """Forget the held gradients (PyTorch's ``zero_grad``; ``grads`` becomes ``None``)."""
        self._grads = None

    def _need_grads(self, where: str):
        if self._grads is None:
            raise ValueError(
                f"{type(self).__name__}.{where}: no gradients held; pass them with "
                "step(grads) or set_grads(grads) first."
            )
        return self._grads

    def clip_grad_norm(self, max_norm: float, norm_type: float = 2.0) -> float:
        """Rescale the held gradients so that their global ``norm_type``-norm is at most
        ``max_norm``: ``g * max_norm / norm`` when ``norm > max_norm``.

        Implements section 10.11.1 "Clipping Gradients" of Goodfellow et al., *Deep Learning*
        (see :func:`~tapegrad.optim.clip_by_norm`).

        Args:
            max_norm: Bound, ``> 0``.
            norm_type: Norm order ``> 0`` or ``math.inf`` (default 2, the Euclidean norm).

        Returns:
            The global norm before clipping, as a float (like PyTorch's ``clip_grad_norm_``).

        Raises:
            ValueError: if no gradients are held, or on invalid ``max_norm``/``norm_type``.
        """
        grads = self._need_grads("clip_grad_norm")
        clipped, norm = T.clip_by_norm(grads, max_norm, norm_type)
        self._grads = clipped
        return float(norm)

    def scale_gradients(self, scale) -> None:
        """Multiply the held gradients by ``scale`` (a number or 0-d Tensor).

        Raises:
            ValueError: if no gradients are held.
        """
        self._grads = T.tree_scale(self._need_grads("scale_gradients"), scale)

    def grad_l2_norm(self) -> float:
        """The global L2 norm of the held gradients (``0.0`` if none are held)."""
        if self._grads is None:
            return 0.0
        return float(T.global_norm(self._grads, 2.0))

    def gradient_arrays(self) -> dict[str, Any]:
        """The held gradients as backend arrays keyed by dotted parameter name
        (``{}`` if none are held)."""
        if self._grads is None:
            return {}
        return {k: _array(v) for k, v in _named_leaves(self._grads).items()}

    # -- stepping -------------------------------------------------------------------------------
    def update_lr(self) -> None:
        """Set ``lr`` from the scheduler at the current ``timestep`` (no-op without one)."""
        if self.lr_scheduler is not None:
            self.lr = float(self.lr_scheduler(self.timestep, self.initial_lr, self.lr))  # pyright: ignore[reportArgumentType]

    def step(self, grads=None, **extra_args) -> None:
        """One optimization step: ``timestep += 1``, ``update_lr()``, then
        the update with the new ``lr``. If the transform raises, its error propagates and
        ``timestep``, ``lr``, the parameters and the state are left as they were.

        Args:
            grads: Gradients shaped like ``params`` (held as :attr:`grads`); ``None`` uses the
                gradients already held.
            **extra_args: Passed on to the transformations that take them (for example
                ``value=loss`` to a custom ``transform`` ending in
                :func:`~tapegrad.optim.reduce_on_plateau`).

        Raises:
            ValueError: if no gradients are given or held, or shapes differ.
            TypeError: if the structure differs from ``params``.
        """
        if grads is not None:
            self.set_grads(grads)
        grads = self._need_grads("step")
        params = self.params
        old_timestep, old_lr = self._timestep, self.lr
        self._timestep += 1
        try:
            self.update_lr()
            new_params, new_state = T.apply_gradients(
                self._full_transform(), grads, self._opt_state, params, **extra_args
            )
        except BaseException:  # a failed step changes nothing
            self._timestep, self._hyperparams["lr"] = old_timestep, old_lr
            raise
        self._opt_state = new_state
        if self._module is not None:
            self._module._set_params(new_params)
        else:
            self._params = new_params

    # -- checkpoints ----------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The optimizer's state for checkpointing (parameters are not included).

        Layout (two sections)::

            {"hyperparams": {"lr": ..., "initial_lr": ..., <optimizer's own>},
             "states": {"timestep": int, "opt_state": <pure transform state pytree>}}

        Leaves are shared, not copied (they are immutable); containers are fresh. Save it with
        ``tapegrad.io.save``.
        """
        return {
            "hyperparams": dict(self._hyperparams),
            "states": {"timestep": self._timestep, "opt_state": self._opt_state},
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore hyperparameters, ``timestep`` and the transform state from
        :meth:`state_dict` output (for example read back with ``tapegrad.io.load``).

        The state must match what this optimizer's transform would build for ``params``
        (structure, shapes, dtypes); nothing is changed if it does not.

        Raises:
            TypeError: if sections are missing or the state structure differs.
            ValueError: if a state leaf's shape or dtype differs.
        """
        name = f"{type(self).__name__}.load_state_dict"
        if (
            not isinstance(state_dict, dict)
            or not isinstance(state_dict.get("hyperparams"), dict)
            or not isinstance(state_dict.get("states"), dict)
            or "timestep" not in state_dict["states"]
            or "opt_state" not in state_dict["states"]
        ):
            raise TypeError(
                f"{name}: expected {{'hyperparams': dict, 'states': {{'timestep', 'opt_state'}}}}"
                " as returned by state_dict()"
            )
        timestep = state_dict["states"]["timestep"]
        if isinstance(timestep, bool) or not isinstance(timestep, int) or timestep < 0:
            raise TypeError(f"{name}: states['timestep'] must be an int >= 0, got {timestep!r}")
        old = self._hyperparams
        self._hyperparams = {**old, **state_dict["hyperparams"]}
        try:
            expected = self._full_transform().init(self.params)
            _check_state(name, state_dict["states"]["opt_state"], expected)
        except BaseException:
            self._hyperparams = old
            raise
        self._timestep = timestep
        self._opt_state = state_dict["states"]["opt_state"]


def _check_state(where: str, got, expected) -> None:
    sg, se = tree_structure(got), tree_structure(expected)
    if sg != se:
        raise TypeError(
            f"{where}: opt_state structure differs from this optimizer's:\n  got:      {sg}\n"
            f"  expected: {se}"
        )
    paths, gl, _ = tree_flatten_with_path(got, prefix="opt_state")
    el = tree_flatten_with_path(expected)[1]
    for p, a, b in zip(paths, gl, el):
        if hasattr(b, "shape"):
            if not hasattr(a, "shape") or tuple(a.shape) != tuple(b.shape) or a.dtype != b.dtype:
                got_desc = (
                    f"shape {tuple(a.shape)}, dtype {a.dtype}"
                    if hasattr(a, "shape")
                    else type(a).__name__
                )
                raise ValueError(
                    f"{where}: {p} has {got_desc}; expected shape {tuple(b.shape)}, dtype {b.dtype}"
                )
        elif type(a) is not type(b):
            raise TypeError(f"{where}: {p} is a {type(a).__name__}; expected a {type(b).__name__}")


class SGD(Optimizer):
    """Stochastic gradient descent (as PyTorch's ``SGD``), via :func:`~tapegrad.optim.sgd`.

    ``p <- p - lr * g`` by default; ``momentum``, ``nesterov`` and ``weight_decay`` (L2,
    added to the gradient) follow PyTorch's ``torch.optim.SGD`` with ``dampening=0``.

    Args:
        model_parameters: Parameter pytree or Module (see :class:`Optimizer`).
        lr: Learning rate.
        momentum: Momentum coefficient in ``[0, 1]`` (0: none).
        nesterov: Nesterov momentum (needs ``momentum > 0``).
        weight_decay: L2 coefficient ``>= 0``.
        **kwargs: ``lr_scheduler_kwargs``, ``max_grad_norm`` and further hyperparameters
            (see :class:`Optimizer`).

    Raises:
        ValueError: on out-of-range hyperparameters.
    """

    def __init__(
        self,
        model_parameters: Any,
        lr: float,
        momentum: float = 0.0,
        nesterov: bool = False,
        weight_decay: float = 0.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            model_parameters,
            lr,
            momentum=momentum,
            nesterov=nesterov,
            weight_decay=weight_decay,
            **kwargs,
        )

    def _make_transform(self):
        h = self._hyperparams
        return T.sgd(self.lr, h["momentum"], h["nesterov"], h["weight_decay"])


class Adam(Optimizer):
    """Adam with decoupled weight decay, via :func:`~tapegrad.optim.adamw`.

    ``p <- p - lr * (m_hat / (sqrt(v_hat) + epsilon) + weight_decay * p)``; with
    ``weight_decay=0`` (the default) this is Adam. Defaults as above; note ``epsilon=1e-7``
    (PyTorch's ``Adam`` uses ``1e-8``).

    Args:
        model_parameters: Parameter pytree or Module (see :class:`Optimizer`).
        lr: Learning rate.
        beta1, beta2: Moment decay rates in ``[0, 1)``.
        epsilon: Added to ``sqrt(v_hat)``.
        weight_decay: Decoupled weight-decay coefficient ``>= 0``.
        **kwargs: ``lr_scheduler_kwargs``, ``max_grad_norm`` and further hyperparameters.

    Raises:
        ValueError: on out-of-range hyperparameters.

    References:
        Kingma and Ba, ICLR 2015; Loshchilov and Hutter, ICLR 2019.
    """

    def __init__(
        self,
        model_parameters: Any,
        lr: float,
        beta1: float = 0.9,
        beta2: float = 0.999,
        epsilon: float = 1e-7,
        weight_decay: float = 0.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            model_parameters,
            lr,
            beta1=beta1,
            beta2=beta2,
            epsilon=epsilon,
            weight_decay=weight_decay,
            **kwargs,
        )

    def _make_transform(self):
        h = self._hyperparams
        return T.adamw(self.lr, h["beta1"], h["beta2"], h["epsilon"], h["weight_decay"])


class AdamW(Adam):
    """:class:`Adam` with PyTorch's AdamW default ``weight_decay=0.01``."""

    def __init__(
        self,
        model_parameters: Any,
        lr: float,
        beta1: float = 0.9,
        beta2: float = 0.999,
        epsilon: float = 1e-7,
        weight_decay: float = 0.01,
        **kwargs: Any,
    ) -> None:
        super().__init__(model_parameters, lr, beta1, beta2, epsilon, weight_decay, **kwargs)


class RMSprop(Optimizer):
    """RMSprop with PyTorch's defaults and semantics (``torch.optim.RMSprop``), via
    :func:`~tapegrad.optim.rmsprop`.

    ``v = alpha * v + (1 - alpha) * g**2``; ``p <- p - lr * g / (sqrt(v) + eps)``, with the
    centered variant, momentum and L2 weight decay as in :func:`~tapegrad.optim.rmsprop`.

    Args:
        model_parameters: Parameter pytree or Module (see :class:`Optimizer`).
        lr: Learning rate (PyTorch's default 0.01).
        alpha: Smoothing constant in ``[0, 1]``.
        eps: Added to the denominator, outside the square root.
        weight_decay: L2 coefficient ``>= 0`` (added to the gradient).
        momentum: Momentum coefficient in ``[0, 1]``.
        centered: Normalize by the gradient's estimated standard deviation.
        **kwargs: ``lr_scheduler_kwargs``, ``max_grad_norm`` and further hyperparameters.

    Raises:
        TypeError / ValueError: on hyperparameters of the wrong type or out of range.
    """

    def __init__(
        self,
        model_parameters: Any,
        lr: float = 0.01,
        alpha: float = 0.99,
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        momentum: float = 0.0,
        centered: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            model_parameters,
            lr,
            alpha=alpha,
            eps=eps,
            weight_decay=weight_decay,
            momentum=momentum,
            centered=centered,
            **kwargs,
        )

    def _make_transform(self):
        h = self._hyperparams
        return T.rmsprop(
            self.lr, h["alpha"], h["eps"], h["weight_decay"], h["momentum"], h["centered"]
        )


class Adagrad(Optimizer):
    """Adagrad with PyTorch's defaults and semantics (``torch.optim.Adagrad``), via
    :func:`~tapegrad.optim.adagrad`.

    ``s = s + g**2``; ``p <- p - lr / (1 + (t - 1) * lr_decay) * g / (sqrt(s) + eps)``.

    Args:
        model_parameters: Parameter pytree or Module (see :class:`Optimizer`).
        lr: Learning rate (PyTorch's default 0.01).
        lr_decay: Learning-rate decay ``>= 0``.
        weight_decay: L2 coefficient ``>= 0`` (added to the gradient).
        initial_accumulator_value: Starting value of ``s`` (``>= 0``).
        eps: Added to ``sqrt(s)``.
        **kwargs: ``lr_scheduler_kwargs``, ``max_grad_norm`` and further hyperparameters.

    Raises:
        TypeError / ValueError: on hyperparameters of the wrong type or out of range.
    """

    def __init__(
        self,
        model_parameters: Any,
        lr: float = 0.01,
        lr_decay: float = 0.0,
        weight_decay: float = 0.0,
        initial_accumulator_value: float = 0.0,
        eps: float = 1e-10,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            model_parameters,
            lr,
            lr_decay=lr_decay,
            weight_decay=weight_decay,
            initial_accumulator_value=initial_accumulator_value,
            eps=eps,
            **kwargs,
        )

    def _make_transform(self):
        h = self._hyperparams
        return T.adagrad(
            self.lr, h["lr_decay"], h["weight_decay"], h["initial_accumulator_value"], h["eps"]
        )


class Lion(Optimizer):
    """Lion with Optax's defaults and semantics (``optax.lion``), via
    :func:`~tapegrad.optim.lion`.

    ``p <- p - lr * (sign((1 - beta1) * g + beta1 * m) + weight_decay * p)``, then
    ``m = (1 - beta2) * g + beta2 * m``. ``beta1``/``beta2`` are Optax's ``b1``/``b2``, named
    as in :class:`Adam`.

    Args:
        model_parameters: Parameter pytree or Module (see :class:`Optimizer`).
        lr: Learning rate (typically 3-10 times smaller than AdamW's).
        beta1, beta2: In ``[0, 1]``.
        weight_decay: Decoupled weight-decay coefficient ``>= 0``.
        **kwargs: ``lr_scheduler_kwargs``, ``max_grad_norm`` and further hyperparameters.

    Raises:
        TypeError / ValueError: on hyperparameters of the wrong type or out of range.

    References:
        Chen et al., "Symbolic Discovery of Optimization Algorithms", NeurIPS 2023.
    """

    def __init__(
        self,
        model_parameters: Any,
        lr: float,
        beta1: float = 0.9,
        beta2: float = 0.99,
        weight_decay: float = 1e-3,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            model_parameters,
            lr,
            beta1=beta1,
            beta2=beta2,
            weight_decay=weight_decay,
            **kwargs,
        )

    def _make_transform(self):
        h = self._hyperparams
        return T.lion(self.lr, h["beta1"], h["beta2"], h["weight_decay"])


class ReduceLROnPlateau:
    """Lower a stateful optimizer's ``lr`` when a metric stops improving (PyTorch's
    ``torch.optim.lr_scheduler.ReduceLROnPlateau``).

    Call :meth:`step` with the metric (a validation loss, say) once per epoch, after the
    optimizer's steps. With ``mode="min"`` and ``threshold_mode="rel"`` a value ``a`` improves
    on the best so far when ``a < best * (1 - threshold)`` (``"abs"``: ``a < best -
    threshold``; ``mode="max"`` mirrors both). After more than ``patience`` values without
    improvement, ``lr = max(lr * factor, min_lr)`` (skipped when that changes ``lr`` by no more
    than ``eps``), the bad-value count restarts and ``cooldown`` values are ignored.

    This is PyTorch's rule, which drops the rate after ``patience + 1`` bad values; the pure
    :func:`~tapegrad.optim.reduce_on_plateau` (Optax's rule) drops it after ``patience``.

    Args:
        optimizer: An :class:`Optimizer` built without ``lr_scheduler_kwargs`` (a scheduler
            there would overwrite ``lr`` at every step).
        mode: ``"min"`` (a loss) or ``"max"`` (an accuracy).
        factor: Multiplier of the rate, in ``(0, 1)``.
        patience: Bad values tolerated before lowering the rate (an int ``>= 0``).
        threshold: Improvement needed (``>= 0``), relative or absolute per ``threshold_mode``.
        threshold_mode: ``"rel"`` or ``"abs"``.
        cooldown: Values ignored after a reduction (an int ``>= 0``).
        min_lr: Lower bound of the rate (``>= 0``).
        eps: Smallest change of the rate that is applied (``>= 0``).

    Attributes:
        best: Best metric so far.
        num_bad_epochs: Values since the last improvement.
        cooldown_counter: Values still to ignore.
        last_epoch: Number of :meth:`step` calls.

    Raises:
        TypeError: if ``optimizer`` is not an :class:`Optimizer` or has an ``lr_scheduler``.
        ValueError: on invalid arguments.

    Example:
        >>> import numpy as np
        >>> import tapegrad as tg
        >>> from tapegrad import optim
        >>> opt = optim.SGD({"w": tg.Tensor(np.zeros(2))}, lr=0.1)
        >>> plateau = optim.ReduceLROnPlateau(opt, factor=0.5, patience=1)
        >>> for val_loss in [1.0, 0.9, 0.9, 0.9]:
        ...     plateau.step(val_loss)
        >>> opt.lr
        0.05
    """

    def __init__(
        self,
        optimizer: Optimizer,
        mode: str = "min",
        factor: float = 0.1,
        patience: int = 10,
        threshold: float = 1e-4,
        threshold_mode: str = "rel",
        cooldown: int = 0,
        min_lr: float = 0.0,
        eps: float = 1e-8,
    ) -> None:
        where = "ReduceLROnPlateau"
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{where}: optimizer must be an optim.Optimizer, got {optimizer!r}")
        if optimizer.lr_scheduler is not None:
            raise TypeError(
                f"{where}: the optimizer has an lr_scheduler, which sets lr at every step and "
                "would undo the reductions; build it without lr_scheduler_kwargs."
            )
        if mode not in ("min", "max"):
            raise ValueError(f"{where}: mode must be 'min' or 'max', got {mode!r}")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError(
                f"{where}: threshold_mode must be 'rel' or 'abs', got {threshold_mode!r}"
            )
        if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 0 < factor < 1:
            raise ValueError(f"{where}: factor must be a number in (0, 1), got {factor!r}")
        for name, value in (("patience", patience), ("cooldown", cooldown)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{where}: {name} must be an int >= 0, got {value!r}")
        for name, value in (("threshold", threshold), ("min_lr", min_lr), ("eps", eps)):
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not (math.isfinite(value) and value >= 0)
            ):
                raise ValueError(f"{where}: {name} must be a finite number >= 0, got {value!r}")
        self.optimizer = optimizer
        self.mode, self.threshold_mode = mode, threshold_mode
        self.factor, self.patience, self.threshold = float(factor), patience, float(threshold)
        self.cooldown, self.min_lr, self.eps = cooldown, float(min_lr), float(eps)
        self.best = math.inf if mode == "min" else -math.inf
        self.num_bad_epochs = 0
        self.cooldown_counter = 0
        self.last_epoch = 0

    def _is_better(self, a: float) -> bool:
        rel = self.threshold_mode == "rel"
        if self.mode == "min":
            return a < (self.best * (1.0 - self.threshold) if rel else self.best - self.threshold)
        return a > (self.best * (1.0 + self.threshold) if rel else self.best + self.threshold)

    def step(self, metrics) -> None:
        """Record one value of the metric and lower ``optimizer.lr`` on a plateau.

        Args:
            metrics: The metric, a real number or 0-d Tensor/array.

        Raises:
            TypeError: if ``metrics`` is not a real scalar.
        """
        try:
            current = float(metrics)
        except (TypeError, ValueError):
            raise TypeError(
                f"ReduceLROnPlateau.step: metrics must be a real scalar, got {metrics!r:.60}"
            ) from None
        self.last_epoch += 1
        if self._is_better(current):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            old = self.optimizer.lr
            new = max(old * self.factor, self.min_lr)
            if old - new > self.eps:
                self.optimizer.lr = new
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0

    def state_dict(self) -> dict[str, Any]:
        """The scheduler's counters (Python numbers), for ``tapegrad.io.save``."""
        return {
            "best": self.best,
            "num_bad_epochs": self.num_bad_epochs,
            "cooldown_counter": self.cooldown_counter,
            "last_epoch": self.last_epoch,
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore the counters from :meth:`state_dict` output.

        Raises:
            TypeError: if a key is missing or has the wrong type.
        """
        where = "ReduceLROnPlateau.load_state_dict"
        kinds = {"best": (int, float), "num_bad_epochs": int, "cooldown_counter": int,
                 "last_epoch": int}  # fmt: skip
        if not isinstance(state_dict, dict) or set(state_dict) != set(kinds):
            raise TypeError(f"{where}: expected the keys {sorted(kinds)} from state_dict()")
        for k, kind in kinds.items():
            v = state_dict[k]
            if isinstance(v, bool) or not isinstance(v, kind):
                raise TypeError(f"{where}: {k} must be {kind}, got {v!r}")
        self.best = float(state_dict["best"])
        self.num_bad_epochs = state_dict["num_bad_epochs"]
        self.cooldown_counter = state_dict["cooldown_counter"]
        self.last_epoch = state_dict["last_epoch"]
