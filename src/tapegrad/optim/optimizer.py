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

import difflib
import math
from collections.abc import Callable
from typing import Any

import optree

from tapegrad.core._keywords import strict_all, strict_init, unexpected_keyword
from tapegrad.core.tensor import Tensor
from tapegrad.core.tree import (
    NAMESPACE,
    tree_flatten,
    tree_flatten_with_path,
    tree_structure,
    tree_unflatten,
)
from tapegrad.optim import transforms as T
from tapegrad.transforms.jit import implicit_state

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


def _takes(tx) -> set | None:
    """The extra keyword arguments some transformation in ``tx`` takes (``None``: any)."""
    names = T._extra_names(tx)
    if names is not None:
        return set(names)
    subs = []
    inner = getattr(tx, "inner", None)
    if isinstance(inner, T.GradientTransformation):
        subs.append(inner)
    for t in getattr(tx, "transforms", ()):
        t = t[1] if isinstance(t, tuple) else t
        if isinstance(t, T.GradientTransformation):
            subs.append(t)
    if not subs:  # a transformation taking **kwargs of its own: any argument
        return None
    out: set = set()
    for sub in subs:
        got = _takes(sub)
        if got is None:
            return None
        out |= got
    return out


def _check_extra_args(who: str, tx, extra_args: dict) -> None:
    """Refuse a keyword argument of ``step`` that no transformation of the optimizer takes (it
    would be dropped: a misspelt ``value=``, or PyTorch's ``closure=``)."""
    accepted = _takes(tx)
    if accepted is None:
        return
    for k in extra_args:
        if k not in accepted:
            hint = ("PyTorch's closure is not supported: compute the loss and its gradients, "
                    "then call step(grads)") if k == "closure" else (
                "no transformation of this optimizer takes it")
            raise unexpected_keyword(who, k, ["grads", *sorted(accepted)], {k: hint})


def _refuse_param_groups(who: str, model_parameters) -> None:
    """PyTorch's parameter groups (a list of dicts with ``"params"``) are not a pytree of
    parameters here: refuse them rather than treat their options as parameters."""
    if isinstance(model_parameters, (list, tuple)) and any(
        isinstance(g, dict) and "params" in g for g in model_parameters
    ):
        raise TypeError(
            f"{who}: PyTorch's parameter groups ([{{'params': ..., 'lr': ...}}, ...]) are not "
            "supported; pass the parameter pytree (or the Module) and give groups their own "
            "options with optim.multi_transform({...}, labels) in optim.Optimizer(params, lr, "
            "transform=...)."
        )


#: The arguments of a subclass constructor that :meth:`Optimizer._init_from` gives the shell.
_SHELL_ARGS = ("self", "model_parameters", "lr", "lr_scheduler_kwargs", "maximize",
               "max_grad_norm")

#: The Args entries and the Raises section every optimizer built on the shell shares: a class
#: docstring's line ``__SHELL__`` (indented as an Args entry) is replaced by them.
_SHELL_DOC = """        lr_scheduler_kwargs: See :class:`~tapegrad.optim.Optimizer`.
        maximize: Ascend instead of descending.
        max_grad_norm: Clip the gradients' global L2 norm first.

    Raises:
        TypeError / ValueError: on an unknown keyword, or hyperparameters of the wrong type or
            out of range."""


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
        maximize: Keyword-only; ascend instead of descending (the gradients are negated
            first, as PyTorch's ``maximize=True``).
        max_grad_norm: Keyword-only; clip the gradients' global L2 norm to it at each step,
            before the update (``None``: no clipping).
        **hyperparams: A subclass's own hyperparameters (passed by its constructor, read by
            its ``_make_transform``), kept in ``state_dict()["hyperparams"]``. The base class
            with ``transform=`` takes none: its update is ``transform(lr)`` alone.

    Attributes:
        params: The current parameter pytree (the Module's, if built from one).
        grads: The latest gradients given to :meth:`step`/:meth:`set_grads`, or ``None``.
        lr: Current learning rate (settable).
        timestep: Number of steps taken.
        opt_state: The pure transform's state (a pytree).

    Raises:
        TypeError: if ``lr`` is not a number, ``lr_scheduler_kwargs`` lacks a class, or the
            base class with ``transform=`` gets another keyword (naming the closest valid).
        ValueError: if ``lr`` is negative or not finite, or ``max_grad_norm`` is not positive.
    """

    #: ``{keyword: explanation}`` added to the error for an unknown constructor keyword.
    _keyword_hints: dict = {}
    #: ``{hyperparameter: check(who, name, value) -> value}``, applied by :meth:`_init_from`.
    _checks: dict = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        strict_init(cls)  # an unknown keyword is a TypeError naming the closest valid one
        if cls.__doc__:  # the shell's own arguments and errors, written out (see _SHELL_DOC)
            cls.__doc__ = cls.__doc__.replace("        __SHELL__", _SHELL_DOC)

    def __init__(
        self,
        model_parameters: Any,
        lr: float,
        lr_scheduler_kwargs: dict | None = None,
        *,
        transform: Callable[[float], T.GradientTransformation] | None = None,
        maximize: bool = False,
        max_grad_norm: float | None = None,
        **hyperparams: Any,
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
        if transform is not None and hyperparams:
            valid = ["model_parameters", "lr", "lr_scheduler_kwargs", "transform", "maximize",
                     "max_grad_norm"]
            bad = next(iter(hyperparams))
            hint = None if difflib.get_close_matches(bad, valid, n=1, cutoff=0.6) else {
                bad: "the update is transform(lr) alone: set it in the transform you build"}
            raise unexpected_keyword(name, bad, valid, hint)
        T._check_bool(name, "maximize", maximize)
        if max_grad_norm is not None:
            T._check_positive(name, "max_grad_norm", max_grad_norm)
        hyperparams = dict(hyperparams)
        if max_grad_norm is not None:
            hyperparams["max_grad_norm"] = float(max_grad_norm)
        if maximize:
            hyperparams["maximize"] = True
        self._transform_fn = transform
        _refuse_param_groups(name, model_parameters)
        self._module = model_parameters if is_module(model_parameters) else None
        self._params = None if self._module is not None else model_parameters
        self._hyperparams: dict[str, Any] = {"lr": float(lr), "initial_lr": float(lr)}
        self._hyperparams.update(hyperparams)
        self.lr_scheduler = self._build_scheduler(lr_scheduler_kwargs)
        self._timestep = 0
        self._grads = None
        self._opt_state = self._full_transform().init(self.params)

    # -- construction helpers ----------------------------------------------------------------
    def _init_from(self, arguments: dict[str, Any], *, drop: tuple = (), **values: Any) -> None:
        """Run :class:`Optimizer`'s constructor from a subclass constructor's arguments
        (``dict(locals())`` taken first thing): ``model_parameters``, ``lr``,
        ``lr_scheduler_kwargs``, ``maximize`` and ``max_grad_norm`` go to the shell; every other
        argument but those in ``drop`` (an alias already read) is a hyperparameter, checked by
        ``_checks`` where it names one. ``values`` replace arguments by already checked ones."""
        who = type(self).__name__
        hyper = {k: v for k, v in arguments.items() if k not in _SHELL_ARGS and k not in drop}
        hyper = {k: self._checks[k](who, k, v) if k in self._checks else v
                 for k, v in hyper.items()}
        hyper.update(values)
        Optimizer.__init__(self, arguments["model_parameters"], arguments["lr"],
                           arguments.get("lr_scheduler_kwargs"),
                           maximize=arguments.get("maximize", False),
                           max_grad_norm=arguments.get("max_grad_norm"), **hyper)

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
        if self._hyperparams.get("maximize"):  # PyTorch's maximize: negate the gradients first
            first = T.chain(first, T.Scale(-1.0))
        return T.chain(first, self._make_transform())

    # -- properties ------------------------------------------------------------------------
    @property
    def params(self):
        """The current parameter pytree (read live from the Module when built from one)."""
        return self._module.params if self._module is not None else self._read("_params")

    @property
    def module(self):
        """The Module this optimizer writes into, or ``None``."""
        return self._module

    @property
    def grads(self):
        """The latest gradients held (``None`` after :meth:`zero_grad`)."""
        return self._read("_grads")

    @property
    def opt_state(self):
        """The pure transform's state pytree."""
        return self._read("_opt_state")

    @property
    def lr(self) -> float:
        """The current learning rate."""
        cap = implicit_state.capture
        if cap is not None:  # a jit recording: an input of the program, read at every call
            return cap.read(self, ("_hyperparams", "lr"), self._hyperparams["lr"])
        return self._hyperparams["lr"]

    # -- tg.jit: what a jitted function reads of this optimizer is read at every call ----------
    def _read(self, group: str):
        """The pytree ``group`` (``_params``, ``_grads``, ``_opt_state``); while ``tg.jit``
        records, its leaves are implicit inputs of the program (read afresh at every call)."""
        tree = self.__dict__[group]
        cap = implicit_state.capture
        if cap is None:
            return tree
        leaves, treedef = tree_flatten(tree)
        cap.read(self, (group, "structure"), treedef)  # a program for this structure only
        return tree_unflatten(treedef, [cap.read(self, (group, i), v) for i, v in
                                        enumerate(leaves)])

    def _implicit_get(self, slot: tuple):
        if slot[0] == "_hyperparams":
            return self._hyperparams[slot[1]]
        if slot[0] == "_timestep":
            return self._timestep
        leaves, treedef = tree_flatten(self.__dict__[slot[0]])
        return treedef if slot[1] == "structure" else leaves[slot[1]]

    def _implicit_set(self, slot: tuple, value) -> None:
        if slot[0] in ("_hyperparams", "_timestep"):
            raise TypeError(f"{type(self).__name__}: its {slot[0]} is not written under jit")
        leaves, treedef = tree_flatten(self.__dict__[slot[0]])
        leaves[slot[1]] = value
        self.__dict__[slot[0]] = tree_unflatten(treedef, leaves)

    def _implicit_snapshot(self) -> tuple:
        return (0,)  # what a jitted function reads of it is checked read by read

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
        cap = implicit_state.capture
        if cap is not None:  # a jit recording: an input of the program, read at every call
            return cap.read(self, ("_timestep",), self._timestep)
        return self._timestep

    @property
    def hyperparams(self) -> dict:
        """A copy of the hyperparameters (``lr``, ``initial_lr`` and the optimizer's own)."""
        return dict(self._hyperparams)

    # -- gradients -----------------------------------------------------------------------------
    def _as_params_tree(self, grads):
        """Model-shaped gradients (``tg.grad(loss)(model, x)``, a Module holding gradients) as
        the parameter pytree they hold, for an optimizer built from a Module."""
        if self._module is not None and is_module(grads) and not is_module(self.params):
            return grads.params
        return grads

    def set_grads(self, grads) -> None:
        """Hold ``grads`` (a pytree shaped like ``params``) as the latest gradients.

        For an optimizer built from a Module, ``grads`` may also be model-shaped: the gradient
        ``tg.grad(loss)(model, x)`` returns (a Module whose parameters hold the gradients); its
        parameter pytree is held.

        Raises:
            TypeError: if the structure differs from ``params``.
            ValueError: if a leaf shape differs.
        """
        grads = self._as_params_tree(grads)
        T._check_match(f"{type(self).__name__}.set_grads", grads, "grads", self.params, "params")
        self._grads = grads

    def accumulate_grads(self, grads) -> None:
        """Add ``grads`` to the held gradients (hold them if none are held), as repeated
        ``backward()`` calls accumulate ``.grad`` in PyTorch."""
        grads = self._as_params_tree(grads)
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
        """Set ``lr`` from the scheduler at the current ``timestep`` (no-op without one).

        Raises:
            TypeError: if the scheduler returns something other than a number.
            ValueError: if it returns a negative or non-finite rate (naming the value and the
                step): a negative rate would ascend.
        """
        if self.lr_scheduler is not None:
            name = type(self.lr_scheduler).__name__
            value: Any = self.lr_scheduler(self.timestep, self.initial_lr, self.lr)  # pyright: ignore[reportCallIssue]
            try:
                rate = float(value)
            except (TypeError, ValueError):
                raise TypeError(
                    f"{type(self).__name__}.update_lr: the scheduler {name} returned "
                    f"{value!r:.60} at step {self.timestep}; it must return a number"
                ) from None
            if not (math.isfinite(rate) and rate >= 0):
                raise ValueError(
                    f"{type(self).__name__}.update_lr: the scheduler {name} returned the "
                    f"learning rate {rate} at step {self.timestep}; a rate must be finite and "
                    ">= 0 (a negative rate ascends). Fix the scheduler."
                )
            self.lr = rate

    def step(self, grads=None, **extra_args) -> None:
        """One optimization step: ``timestep += 1``, ``update_lr()``, then
        the update with the new ``lr``. If the transform raises, its error propagates and
        ``timestep``, ``lr``, the parameters and the state are left as they were.

        Args:
            grads: Gradients shaped like ``params`` (or, for an optimizer built from a Module,
                shaped like the model: see :meth:`set_grads`), held as :attr:`grads`; ``None``
                uses the gradients already held.
            **extra_args: Passed on to the transformations that take them (for example
                ``value=loss`` to a custom ``transform`` ending in
                :func:`~tapegrad.optim.reduce_on_plateau`).

        Raises:
            ValueError: if no gradients are given or held, or shapes differ.
            TypeError: if the structure differs from ``params``.
        """
        if implicit_state.capture is not None:
            raise TypeError(
                f"{type(self).__name__}.step inside tg.jit: the optimizer's state (its moments, "
                "step count and learning rate) would be frozen into the recorded program. Call "
                "step outside the jitted function (jit the loss and gradient: "
                "tg.jit(tg.value_and_grad(loss))), or jit a pure update: "
                "optim.apply_gradients(tx, grads, opt_state, params) with opt_state an argument."
            )
        if extra_args:
            _check_extra_args(f"{type(self).__name__}.step", self._full_transform(), extra_args)
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
            TypeError: if sections are missing, a hyperparameter is not this optimizer's, or
                the state structure differs.
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
        known = set(old) | {"max_grad_norm", "maximize"}
        for k in state_dict["hyperparams"]:
            if k not in known:  # another optimizer's (or a misspelt) hyperparameter
                raise unexpected_keyword(name, k, sorted(known), {
                    k: f"not a hyperparameter of {type(self).__name__}; was the checkpoint "
                    "saved by another optimizer?"})
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


def _betas(who: str, beta1, beta2, betas, defaults) -> tuple:
    """``(beta1, beta2)`` from the two numbers or PyTorch's pair ``betas`` (one form, not
    both)."""
    if betas is not None:
        if beta1 is not None or beta2 is not None:
            raise TypeError(
                f"{who}: give betas=(beta1, beta2) (PyTorch's form) or beta1/beta2, not both"
            )
        if not isinstance(betas, (tuple, list)) or len(betas) != 2:
            raise TypeError(f"{who}: betas must be a pair (beta1, beta2), got {betas!r}")
        return tuple(betas)
    for name, v in (("beta1", beta1), ("beta2", beta2)):
        if isinstance(v, (tuple, list)):
            raise TypeError(
                f"{who}: {name} must be a number, got {v!r}; for PyTorch's pair pass "
                "betas=(beta1, beta2)"
            )
    return (defaults[0] if beta1 is None else beta1, defaults[1] if beta2 is None else beta2)


_TORCH_IMPL = "a PyTorch implementation switch with no meaning here; leave it out"
_TORCH_HINTS = {"foreach": _TORCH_IMPL, "fused": _TORCH_IMPL, "capturable": _TORCH_IMPL,
                "differentiable": _TORCH_IMPL, "params": "PyTorch's name; here it is "
                "model_parameters", "transform": "transform= is for the base Optimizer; this "
                "class builds its own update from its hyperparameters"}  # fmt: skip


class _FromPure(Optimizer):
    """A stateful optimizer whose update is one pure builder, ``_pure(who, lr, *values)``, the
    values being its hyperparameters named in ``_pure_args`` (in the builder's order)."""

    _keyword_hints = _TORCH_HINTS
    _pure: Callable[..., T.GradientTransformation]
    _pure_args: tuple[str, ...] = ()

    def _make_transform(self):
        h = self._hyperparams
        return type(self)._pure(type(self).__name__, self.lr, *[h[k] for k in self._pure_args])


class SGD(_FromPure):
    """Stochastic gradient descent with PyTorch's signature and semantics
    (``torch.optim.SGD``), via :func:`~tapegrad.optim.sgd`.

    With ``g`` the gradient (negated with ``maximize``) and ``b`` the momentum buffer::

        g = g + weight_decay * p
        b = g (first step),  b = momentum * b + (1 - dampening) * g (later steps)
        p = p - lr * (g + momentum * b if nesterov else b)     (momentum > 0)
        p = p - lr * g                                          (momentum = 0)

    Args:
        model_parameters: Parameter pytree or Module (see :class:`Optimizer`).
        lr: Learning rate.
        momentum: Momentum coefficient in ``[0, 1]`` (0: none).
        dampening: Dampening of the momentum buffer's update, in ``[0, 1]``.
        weight_decay: L2 coefficient ``>= 0`` (added to the gradient).
        nesterov: Nesterov momentum (needs ``momentum > 0`` and ``dampening == 0``).
        lr_scheduler_kwargs: See :class:`Optimizer`.
        maximize: Ascend (maximize the objective) instead of descending.
        max_grad_norm: Clip the gradients' global L2 norm first (see :class:`Optimizer`).

    Raises:
        TypeError: on a keyword it does not take (naming the closest valid one) or a
            hyperparameter of the wrong type (``nesterov`` not a bool).
        ValueError: on out-of-range hyperparameters.
    """

    _pure = staticmethod(T._sgd)
    _pure_args = ("momentum", "nesterov", "weight_decay", "dampening")

    def __init__(
        self,
        model_parameters: Any,
        lr: float,
        momentum: float = 0.0,
        dampening: float = 0.0,
        weight_decay: float = 0.0,
        nesterov: bool = False,
        lr_scheduler_kwargs: dict | None = None,
        *,
        maximize: bool = False,
        max_grad_norm: float | None = None,
    ) -> None:
        self._init_from(dict(locals()))


class Adam(Optimizer):
    """Adam with PyTorch's semantics (``torch.optim.Adam``), via the blocks of
    :func:`~tapegrad.optim.adam`.

    ``p <- p - lr * m_hat / (sqrt(v_hat) + epsilon)`` with the moments of ``g = grad +
    weight_decay * p``: the weight decay is PyTorch's ``Adam`` L2 penalty, added to the
    gradient before the moments (``decoupled_weight_decay=True``, or :class:`AdamW`, applies it
    to the parameters instead). ``amsgrad`` uses the running maximum of ``v`` (PyTorch's
    AMSGrad). Note ``epsilon=1e-7`` by default (PyTorch's ``Adam`` uses ``1e-8``).

    Args:
        model_parameters: Parameter pytree or Module (see :class:`Optimizer`).
        lr: Learning rate.
        beta1, beta2: Moment decay rates in ``[0, 1)`` (defaults 0.9, 0.999); or PyTorch's
            pair ``betas=(beta1, beta2)``.
        epsilon: Added to ``sqrt(v_hat)``; ``eps`` is PyTorch's spelling (give one of them).
        weight_decay: L2 coefficient ``>= 0``.
        lr_scheduler_kwargs: See :class:`Optimizer`.
        amsgrad: PyTorch's AMSGrad variant.
        decoupled_weight_decay: Decouple the weight decay (AdamW).
        maximize: Ascend instead of descending.
        max_grad_norm: Clip the gradients' global L2 norm first.

    Raises:
        TypeError: on a keyword it does not take, both ``betas`` and ``beta1``/``beta2``, or
            both ``epsilon`` and ``eps``.
        ValueError: on out-of-range hyperparameters.

    References:
        Kingma and Ba, ICLR 2015; Reddi, Kale and Kumar, "On the Convergence of Adam and
        Beyond", ICLR 2018 (AMSGrad); Loshchilov and Hutter, ICLR 2019.
    """

    _keyword_hints = _TORCH_HINTS
    _default_weight_decay = 0.0
    _decoupled = False

    def __init__(
        self,
        model_parameters: Any,
        lr: float,
        beta1: float | None = None,
        beta2: float | None = None,
        epsilon: float | None = None,
        weight_decay: float | None = None,
        lr_scheduler_kwargs: dict | None = None,
        *,
        betas: tuple | None = None,
        eps: float | None = None,
        amsgrad: bool = False,
        decoupled_weight_decay: bool = False,
        maximize: bool = False,
        max_grad_norm: float | None = None,
    ) -> None:
        arguments = dict(locals())
        who = type(self).__name__
        beta1, beta2 = _betas(who, beta1, beta2, betas, (0.9, 0.999))
        if epsilon is not None and eps is not None:
            raise TypeError(f"{who}: give epsilon or eps (PyTorch's spelling), not both")
        epsilon = 1e-7 if epsilon is None and eps is None else (eps if epsilon is None
                                                                 else epsilon)
        if weight_decay is None:
            weight_decay = self._default_weight_decay
        for name, flag in (("amsgrad", amsgrad), ("decoupled_weight_decay",
                                                  decoupled_weight_decay)):
            T._check_bool(who, name, flag)
        T._check_unit(who, "beta1", beta1)
        T._check_unit(who, "beta2", beta2)
        T._check_nonneg(who, "epsilon", epsilon)
        T._check_nonneg(who, "weight_decay", weight_decay)
        self._init_from(arguments, drop=("betas", "eps"), beta1=beta1, beta2=beta2,
                        epsilon=epsilon, weight_decay=weight_decay, amsgrad=bool(amsgrad),
                        decoupled_weight_decay=bool(decoupled_weight_decay) or self._decoupled)

    def _make_transform(self):
        h = self._hyperparams
        block = T.ScaleByAdam(h["beta1"], h["beta2"], h["epsilon"], h.get("amsgrad", False))
        wd = h["weight_decay"]
        lr = T.ScaleByLearningRate(self.lr)
        if not wd:
            return T.chain(block, lr)
        if h.get("decoupled_weight_decay", self._decoupled):
            return T.chain(block, T.AddDecayedWeights(wd), lr)
        return T.chain(T.AddDecayedWeights(wd), block, lr)


class AdamW(Adam):
    """Adam with decoupled weight decay (PyTorch's ``torch.optim.AdamW``, default
    ``weight_decay=0.01``): ``p <- p - lr * (m_hat / (sqrt(v_hat) + epsilon) + weight_decay *
    p)``, via :func:`~tapegrad.optim.adamw`. Arguments as :class:`Adam`.
    """

    _default_weight_decay = 0.01
    _decoupled = True


class RMSprop(_FromPure):
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
        __SHELL__
    """

    _pure = staticmethod(T._rmsprop)
    _pure_args = ("alpha", "eps", "weight_decay", "momentum", "centered")

    def __init__(
        self,
        model_parameters: Any,
        lr: float = 0.01,
        alpha: float = 0.99,
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        momentum: float = 0.0,
        centered: bool = False,
        lr_scheduler_kwargs: dict | None = None,
        *,
        maximize: bool = False,
        max_grad_norm: float | None = None,
    ) -> None:
        self._init_from(dict(locals()))


class Adagrad(_FromPure):
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
        __SHELL__
    """

    _pure = staticmethod(T._adagrad)
    _pure_args = ("lr_decay", "weight_decay", "initial_accumulator_value", "eps")

    def __init__(
        self,
        model_parameters: Any,
        lr: float = 0.01,
        lr_decay: float = 0.0,
        weight_decay: float = 0.0,
        initial_accumulator_value: float = 0.0,
        eps: float = 1e-10,
        lr_scheduler_kwargs: dict | None = None,
        *,
        maximize: bool = False,
        max_grad_norm: float | None = None,
    ) -> None:
        self._init_from(dict(locals()))


class Lion(_FromPure):
    """Lion with Optax's defaults and semantics (``optax.lion``), via
    :func:`~tapegrad.optim.lion`.

    ``p <- p - lr * (sign((1 - beta1) * g + beta1 * m) + weight_decay * p)``, then
    ``m = (1 - beta2) * g + beta2 * m``. ``beta1``/``beta2`` are Optax's ``b1``/``b2``, named
    as in :class:`Adam` (or the pair ``betas=(beta1, beta2)``).

    Args:
        model_parameters: Parameter pytree or Module (see :class:`Optimizer`).
        lr: Learning rate (typically 3-10 times smaller than AdamW's).
        beta1, beta2: In ``[0, 1]`` (defaults 0.9, 0.99); or ``betas=(beta1, beta2)``.
        weight_decay: Decoupled weight-decay coefficient ``>= 0``.
        __SHELL__

    References:
        Chen et al., "Symbolic Discovery of Optimization Algorithms", NeurIPS 2023.
    """

    _pure = staticmethod(T._lion)
    _pure_args = ("beta1", "beta2", "weight_decay")

    def __init__(
        self,
        model_parameters: Any,
        lr: float,
        beta1: float | None = None,
        beta2: float | None = None,
        weight_decay: float = 1e-3,
        lr_scheduler_kwargs: dict | None = None,
        *,
        betas: tuple | None = None,
        maximize: bool = False,
        max_grad_norm: float | None = None,
    ) -> None:
        arguments = dict(locals())
        beta1, beta2 = _betas("Lion", beta1, beta2, betas, (0.9, 0.99))
        T._check_unit("Lion", "beta1", beta1, closed_high=True)
        T._check_unit("Lion", "beta2", beta2, closed_high=True)
        self._init_from(arguments, drop=("betas",), beta1=beta1, beta2=beta2)


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


strict_all(globals(), ["ReduceLROnPlateau", "is_module"])  # unknown keywords: a clear TypeError
