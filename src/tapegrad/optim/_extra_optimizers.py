"""PyTorch's ``NAdam``, ``RAdam``, ``Adamax``, ``Adadelta`` and ``LBFGS`` as stateful
optimizers, thin shells over the pure blocks of :mod:`tapegrad.optim._extra` and
:mod:`tapegrad.optim._extra_lbfgs` (which hold the math).

Each takes PyTorch's arguments in PyTorch's order, with PyTorch's defaults, and steps as
``torch.optim`` does (checked step by step in float64 in the tests); beyond PyTorch's they take
``lr_scheduler_kwargs``, ``maximize`` and ``max_grad_norm`` like the other optimizers (LBFGS
takes exactly PyTorch's arguments).

Example:
    >>> import numpy as np
    >>> import tapegrad as tg
    >>> import tapegrad.numpy as tnp
    >>> from tapegrad import optim
    >>> opt = optim.LBFGS({"w": tg.Tensor(np.zeros(2))}, line_search_fn="strong_wolfe")
    >>> def closure():
    ...     loss, grads = tg.value_and_grad(
    ...         lambda p: tnp.sum(tnp.square(p["w"] - tg.Tensor(np.array([3.0, -1.0])))))(
    ...         opt.params)
    ...     return loss, grads
    >>> first_loss = opt.step(closure)
    >>> opt.params["w"].numpy().round(6).tolist()
    [3.0, -1.0]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tapegrad import numpy as tnp
from tapegrad.core._keywords import strict_all
from tapegrad.core.tensor import Tensor
from tapegrad.core.tree import tree_flatten, tree_unflatten
from tapegrad.optim import _extra as X
from tapegrad.optim import _extra_lbfgs as L
from tapegrad.optim import transforms as T
from tapegrad.optim.optimizer import _TORCH_HINTS, Optimizer
from tapegrad.transforms.jit import implicit_state

__all__ = ["NAdam", "RAdam", "Adamax", "Adadelta", "LBFGS"]


def _pair(who: str, betas, open_high: bool = True) -> tuple:
    """PyTorch's ``betas=(beta1, beta2)``, each checked."""
    if not isinstance(betas, (tuple, list)) or len(betas) != 2:
        raise TypeError(f"{who}: betas must be a pair (beta1, beta2), got {betas!r:.60}")
    return (T._check_unit(who, "betas[0]", betas[0], closed_high=not open_high),
            T._check_unit(who, "betas[1]", betas[1], closed_high=not open_high))


def _with_decay(block, weight_decay: float, decoupled: bool, lr: float):
    """PyTorch's weight decay around ``block``: L2 (added to the gradient first) or decoupled
    (``p *= 1 - lr * weight_decay``, as AdamW), then the learning rate."""
    scale = T.ScaleByLearningRate(lr)
    if not weight_decay:
        return T.chain(block, scale)
    if decoupled:
        return T.chain(block, T.AddDecayedWeights(weight_decay), scale)
    return T.chain(T.AddDecayedWeights(weight_decay), block, scale)


class _Decayed(Optimizer):
    """A PyTorch optimizer whose update is one pure block (``_block(hyperparams)``) with
    PyTorch's weight decay around it (:func:`_with_decay`; decoupled where the hyperparameter
    ``decoupled_weight_decay`` says so), its hyperparameters checked by ``_checks``."""

    _keyword_hints = _TORCH_HINTS
    _checks = {"betas": lambda who, name, betas: _pair(who, betas), "eps": T._check_nonneg,
               "weight_decay": T._check_nonneg, "decoupled_weight_decay": T._check_bool}

    def _block(self, h: dict) -> T.GradientTransformation:
        raise NotImplementedError  # pragma: no cover - each subclass builds its block

    def _make_transform(self):
        h = self._hyperparams
        return _with_decay(self._block(h), h["weight_decay"],
                           h.get("decoupled_weight_decay", False), self.lr)


class NAdam(_Decayed):
    """NAdam with PyTorch's signature, defaults and semantics (``torch.optim.NAdam``).

    With ``mu_t = beta1 * (1 - 0.5 * 0.96**(t * momentum_decay))`` (Dozat's momentum schedule)
    and ``P_t = mu_1 ... mu_t``::

        g = g + weight_decay * p                         (decoupled: p *= 1 - lr * weight_decay)
        m = beta1 m + (1 - beta1) g,   v = beta2 v + (1 - beta2) g**2
        d = sqrt(v / (1 - beta2**t)) + eps
        p = p - lr (1 - mu_t) / (1 - P_t) g / d - lr mu_{t+1} / (1 - P_t mu_{t+1}) m / d

    Optax's :func:`~tapegrad.optim.nadam` has no momentum schedule; the two differ.

    Args:
        model_parameters: Parameter pytree or Module (see :class:`~tapegrad.optim.Optimizer`).
        lr: Learning rate (2e-3).
        betas: ``(beta1, beta2)``, each in ``[0, 1)``.
        eps: Added to the denominator (``>= 0``).
        weight_decay: Coefficient ``>= 0``.
        momentum_decay: ``psi`` of the momentum schedule (``>= 0``).
        decoupled_weight_decay: Decouple the weight decay (NAdamW).
        __SHELL__

    References:
        Dozat, "Incorporating Nesterov Momentum into Adam", ICLR 2016 workshop.
    """

    _checks = {**_Decayed._checks, "momentum_decay": T._check_nonneg}

    def __init__(self, model_parameters: Any, lr: float = 2e-3, betas: tuple = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0, momentum_decay: float = 4e-3,
                 decoupled_weight_decay: bool = False, lr_scheduler_kwargs: dict | None = None,
                 *, maximize: bool = False, max_grad_norm: float | None = None) -> None:
        self._init_from(dict(locals()))

    def _block(self, h: dict) -> T.GradientTransformation:
        return X.ScaleByTorchNAdam(h["betas"][0], h["betas"][1], h["eps"], h["momentum_decay"])


class RAdam(_Decayed):
    """RAdam with PyTorch's signature, defaults and semantics (``torch.optim.RAdam``).

    With ``rho_inf = 2 / (1 - beta2) - 1`` and ``rho_t = rho_inf - 2 t beta2**t / (1 -
    beta2**t)``: while ``rho_t <= 5`` the step is ``lr * m / (1 - beta1**t)`` (SGD with
    momentum); after, ``lr * r_t * m / (1 - beta1**t) * sqrt(1 - beta2**t) / (sqrt(v) + eps)``
    with the rectification ``r_t`` (see :class:`~tapegrad.optim._extra.ScaleByTorchRAdam`).
    Weight decay as :class:`NAdam`. Optax's :func:`~tapegrad.optim.radam` switches at
    ``rho_t >= 5`` and adds ``eps`` to ``sqrt(v_hat)``.

    Args:
        model_parameters: Parameter pytree or Module (see :class:`~tapegrad.optim.Optimizer`).
        lr: Learning rate (1e-3).
        betas: ``(beta1, beta2)``, each in ``[0, 1)``.
        eps: Added to ``sqrt(v)`` (``>= 0``).
        weight_decay: Coefficient ``>= 0``.
        decoupled_weight_decay: Decouple the weight decay (RAdamW).
        __SHELL__

    References:
        Liu et al., "On the Variance of the Adaptive Learning Rate and Beyond", ICLR 2020.
    """

    def __init__(self, model_parameters: Any, lr: float = 1e-3, betas: tuple = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0,
                 decoupled_weight_decay: bool = False, lr_scheduler_kwargs: dict | None = None,
                 *, maximize: bool = False, max_grad_norm: float | None = None) -> None:
        self._init_from(dict(locals()))

    def _block(self, h: dict) -> T.GradientTransformation:
        return X.ScaleByTorchRAdam(h["betas"][0], h["betas"][1], h["eps"])


class Adamax(_Decayed):
    """Adamax with PyTorch's signature, defaults and semantics (``torch.optim.Adamax``)::

        g = g + weight_decay * p
        m = beta1 m + (1 - beta1) g,   u = max(beta2 u, |g| + eps)
        p = p - lr / (1 - beta1**t) * m / u

    (the steps of Optax's :func:`~tapegrad.optim.adamax`, plus the L2 weight decay).

    Args:
        model_parameters: Parameter pytree or Module (see :class:`~tapegrad.optim.Optimizer`).
        lr: Learning rate (2e-3).
        betas: ``(beta1, beta2)``, each in ``[0, 1)``.
        eps: Added to ``|g|`` (``>= 0``).
        weight_decay: L2 coefficient ``>= 0``.
        __SHELL__

    References:
        Kingma and Ba, "Adam: A Method for Stochastic Optimization", ICLR 2015, section 7.1.
    """

    def __init__(self, model_parameters: Any, lr: float = 2e-3, betas: tuple = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0,
                 lr_scheduler_kwargs: dict | None = None, *, maximize: bool = False,
                 max_grad_norm: float | None = None) -> None:
        self._init_from(dict(locals()))

    def _block(self, h: dict) -> T.GradientTransformation:
        return X.ScaleByAdamax(h["betas"][0], h["betas"][1], h["eps"])


class Adadelta(_Decayed):
    """Adadelta with PyTorch's signature, defaults and semantics (``torch.optim.Adadelta``)::

        g = g + weight_decay * p
        E[g2] = rho E[g2] + (1 - rho) g**2
        d = sqrt(E[dx2] + eps) / sqrt(E[g2] + eps) * g,   E[dx2] = rho E[dx2] + (1 - rho) d**2
        p = p - lr * d

    (Optax's :func:`~tapegrad.optim.adadelta` with ``learning_rate=lr``).

    Args:
        model_parameters: Parameter pytree or Module (see :class:`~tapegrad.optim.Optimizer`).
        lr: Learning rate (1.0).
        rho: Decay rate of both averages, in ``[0, 1]``.
        eps: Added inside the square roots (``>= 0``).
        weight_decay: L2 coefficient ``>= 0``.
        __SHELL__

    References:
        Zeiler, "ADADELTA: An Adaptive Learning Rate Method", arXiv:1212.5701, 2012.
    """

    _checks = {**_Decayed._checks,
               "rho": lambda who, name, rho: T._check_unit(who, name, rho, closed_high=True)}

    def __init__(self, model_parameters: Any, lr: float = 1.0, rho: float = 0.9,
                 eps: float = 1e-6, weight_decay: float = 0.0,
                 lr_scheduler_kwargs: dict | None = None, *, maximize: bool = False,
                 max_grad_norm: float | None = None) -> None:
        self._init_from(dict(locals()))

    def _block(self, h: dict) -> T.GradientTransformation:
        return X.ScaleByAdaDelta(h["rho"], h["eps"])


class LBFGS(Optimizer):
    """L-BFGS with PyTorch's signature, defaults and semantics (``torch.optim.LBFGS``).

    ``step(closure)`` runs up to ``max_iter`` L-BFGS iterations (each evaluating the
    closure once, or several times in the strong-Wolfe line search) and returns the loss the
    closure gave first. The iterations follow PyTorch's, decision for decision: the direction
    from the last ``history_size`` pairs of steps and gradient changes, a step of ``lr`` (of
    ``min(1, 1 / ||g||_1) * lr`` at the very first iteration) or, with
    ``line_search_fn="strong_wolfe"``, the step a strong-Wolfe search finds (``c1=1e-4``,
    ``c2=0.9``), and the same stopping tests (``tolerance_grad`` on the largest gradient
    element, ``tolerance_change`` on the step and the loss, ``max_eval`` evaluations). The
    history is kept between steps (``opt_state``).

    The closure evaluates the loss and its gradients at the optimizer's current parameters
    (``opt.params``, or the Module's, into which each trial point is written) and either
    returns ``(loss, grads)`` or returns ``loss`` after ``opt.set_grads(grads)`` (PyTorch's
    ``loss.backward()``)::

        def closure():
            loss, grads = tg.value_and_grad(loss_fn)(opt.params, x, y)
            return loss, grads

        opt.step(closure)

    The parameters (and the gradients) are flattened into one vector in the dtype they
    promote to; the scalars of the iteration (step sizes, directional derivatives) are Python
    floats, float64.

    Args:
        model_parameters: Parameter pytree or Module (see :class:`~tapegrad.optim.Optimizer`).
        lr: Step size (1).
        max_iter: Iterations per ``step`` (an int ``>= 1``; 20).
        max_eval: Closure evaluations per ``step`` (an int ``>= 1``; default
            ``max_iter * 5 // 4``).
        tolerance_grad: Stop when ``max |g| <= tolerance_grad`` (``>= 0``; 1e-7).
        tolerance_change: Stop when the step or the loss change is below it (``>= 0``; 1e-9).
        history_size: Pairs kept (an int ``>= 1``; 100).
        line_search_fn: ``None`` or ``"strong_wolfe"``.

    Raises:
        TypeError / ValueError: on an unknown keyword, or arguments of the wrong type or out
            of range.

    References:
        Nocedal and Wright, *Numerical Optimization*, 2nd ed., 2006, Algorithms 3.5, 3.6 and
        7.4; Liu and Nocedal, "On the limited memory BFGS method for large scale
        optimization", Mathematical Programming 45, 1989.
    """

    _keyword_hints = {"params": _TORCH_HINTS["params"]}

    def __init__(self, model_parameters: Any, lr: float = 1.0, max_iter: int = 20,
                 max_eval: int | None = None, tolerance_grad: float = 1e-7,
                 tolerance_change: float = 1e-9, history_size: int = 100,
                 line_search_fn: str | None = None) -> None:
        who = type(self).__name__
        max_iter = T._count(who, "max_iter", max_iter, 1)
        max_eval = max_iter * 5 // 4 if max_eval is None else T._count(who, "max_eval", max_eval, 1)
        if line_search_fn is not None:
            if not isinstance(line_search_fn, str):
                raise TypeError(f"{who}: line_search_fn must be None or 'strong_wolfe', got "
                                f"{line_search_fn!r:.60}")
            if line_search_fn != "strong_wolfe":
                raise ValueError(f"{who}: line_search_fn must be None or 'strong_wolfe', got "
                                 f"{line_search_fn!r} (PyTorch supports only 'strong_wolfe')")
        super().__init__(model_parameters, lr, None, max_iter=max_iter, max_eval=max_eval,
                         tolerance_grad=T._check_nonneg(who, "tolerance_grad", tolerance_grad),
                         tolerance_change=T._check_nonneg(who, "tolerance_change",
                                                          tolerance_change),
                         history_size=T._count(who, "history_size", history_size, 1),
                         line_search_fn=line_search_fn)
        self._opt_state = L.torch_lbfgs_init()

    def _make_transform(self):
        return T.identity()  # the iteration is in step(); nothing to chain

    # -- flat vectors ---------------------------------------------------------------------
    def _flatten(self, tree, name: str) -> Tensor:
        leaves, _ = T._leaves(f"{type(self).__name__}.step", tree, name)
        dtype = np.result_type(*[t.dtype for t in leaves]) if leaves else np.float64
        parts = [tnp.reshape(tnp.astype(t, dtype), (-1,)) for t in leaves]
        return tnp.concatenate(parts) if parts else tnp.zeros((0,), dtype=dtype)

    def _unflatten(self, x: Tensor, like):
        raw, treedef = tree_flatten(like)
        leaves, _ = T._leaves(f"{type(self).__name__}.step", like, "params")
        out, start = [], 0
        for orig, t in zip(raw, leaves):
            part = tnp.astype(tnp.reshape(x[start:start + t.size], t.shape), t.dtype)
            start += t.size
            if isinstance(orig, Tensor):
                out.append(part)
            elif isinstance(orig, np.generic):
                out.append(part.numpy()[()])
            else:  # a NumPy/CuPy array parameter stays one (a new, read-only array)
                arr = part._array.copy()
                if isinstance(arr, np.ndarray):
                    arr.flags.writeable = False
                out.append(arr)
        return tree_unflatten(treedef, out)

    def _write(self, params) -> None:
        if self._module is not None:
            self._module._set_params(params)
        else:
            self._params = params

    def _evaluate(self, closure, template):
        """Run the closure at the current parameters: ``(raw loss, float loss, flat grad)``."""
        who = f"{type(self).__name__}.step"
        self._grads = None
        out = closure()
        if isinstance(out, tuple):
            if len(out) != 2:
                raise TypeError(f"{who}: the closure must return loss or (loss, grads), got a "
                                f"tuple of {len(out)}")
            loss, grads = out
            self.set_grads(grads)
        else:
            loss = out
            if self._grads is None:
                raise ValueError(
                    f"{who}: the closure returned the loss but held no gradients; return "
                    "(loss, grads) from it, or call opt.set_grads(grads) in it (PyTorch's "
                    "loss.backward())."
                )
        try:
            value = float(loss)
        except (TypeError, ValueError):
            raise TypeError(f"{who}: the closure's loss must be a real scalar, got "
                            f"{loss!r:.60}") from None
        T._check_match(who, self._grads, "grads", template, "params")
        return loss, value, self._flatten(self._grads, "grads")

    def step(self, closure) -> Any:  # pyright: ignore[reportIncompatibleMethodOverride]
        """Run up to ``max_iter`` L-BFGS iterations; see the class docstring.

        Args:
            closure: A function of no arguments that evaluates the loss at the optimizer's
                current parameters and returns ``(loss, grads)``, or returns ``loss`` having
                called ``set_grads(grads)``.

        Returns:
            The loss the closure returned first (at the parameters before the step).

        Raises:
            TypeError: if ``closure`` is missing or not callable, or returns something else;
                if called inside ``tg.jit``.
            ValueError: if the closure holds no gradients. An error leaves the parameters,
                the state and ``timestep`` as they were.
        """
        who = f"{type(self).__name__}.step"
        if implicit_state.capture is not None:
            raise TypeError(f"{who} inside tg.jit: the optimizer's state would be frozen into "
                            "the recorded program; call step outside the jitted function.")
        if not callable(closure):
            raise TypeError(f"{who}: closure must be a function re-evaluating the loss and "
                            f"its gradients (PyTorch's closure), got {type(closure).__name__}")
        start = self.params
        old = (self._opt_state, self._grads, self._timestep)
        h = self._hyperparams
        first: list = []

        def evaluate(x):
            self._write(self._unflatten(x, start))
            raw, value, g = self._evaluate(closure, start)
            if not first:
                first.append(raw)
            return value, g

        try:
            self._timestep += 1
            self.update_lr()
            x, new_state, _ = L.torch_lbfgs_step(
                evaluate, self._flatten(start, "params"), self._opt_state, lr=self.lr,
                max_iter=h["max_iter"], max_eval=h["max_eval"],
                tolerance_grad=h["tolerance_grad"], tolerance_change=h["tolerance_change"],
                history_size=h["history_size"], line_search_fn=h["line_search_fn"])
        except BaseException:
            self._write(start)
            self._opt_state, self._grads, self._timestep = old
            raise
        self._write(self._unflatten(x, start))
        self._opt_state = new_state
        return first[0]

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore hyperparameters, ``timestep`` and the L-BFGS history from
        :meth:`state_dict` output.

        Raises:
            TypeError: if sections or history keys are missing or of the wrong kind.
        """
        name = f"{type(self).__name__}.load_state_dict"
        keys = set(L.torch_lbfgs_init())
        try:
            hp = state_dict["hyperparams"]
            states = state_dict["states"]
            opt_state, timestep = states["opt_state"], states["timestep"]
        except (TypeError, KeyError):
            raise TypeError(f"{name}: expected {{'hyperparams': dict, 'states': {{'timestep', "
                            "'opt_state'}}} as returned by state_dict()") from None
        if not isinstance(opt_state, dict) or set(opt_state) != keys:
            raise TypeError(f"{name}: states['opt_state'] must have the keys {sorted(keys)}")
        if isinstance(timestep, bool) or not isinstance(timestep, int) or timestep < 0:
            raise TypeError(f"{name}: states['timestep'] must be an int >= 0, got {timestep!r}")
        unknown = set(hp) - set(self._hyperparams)
        if unknown:
            raise TypeError(f"{name}: {sorted(unknown)} are not hyperparameters of "
                            f"{type(self).__name__}; was the checkpoint saved by another "
                            "optimizer?")
        for k in ("old_dirs", "old_stps", "ro"):
            if not isinstance(opt_state[k], (list, tuple)):
                raise TypeError(f"{name}: opt_state[{k!r}] must be a list")
        if not (len(opt_state["old_dirs"]) == len(opt_state["old_stps"]) == len(opt_state["ro"])):
            raise TypeError(f"{name}: opt_state's old_dirs, old_stps and ro differ in length")
        self._hyperparams = {**self._hyperparams, **hp}
        self._timestep = timestep
        self._opt_state = {**opt_state, **{k: list(opt_state[k])
                                           for k in ("old_dirs", "old_stps", "ro")}}


strict_all(globals(), __all__)  # unknown keywords: a clear TypeError naming the closest valid
