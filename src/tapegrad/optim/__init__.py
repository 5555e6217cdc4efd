"""``tapegrad.optim``: pure gradient transformations, schedules and stateful optimizers.

The pure layer follows Optax: a transform has ``init(params) -> opt_state`` and
``update(grads, opt_state, params) -> (updates, opt_state)``; ``apply_updates(params, updates)``
gives the new parameters, and ``apply_gradients(tx, grads, opt_state, params)`` does both in one
faster call. The stateful :class:`Optimizer` family (:class:`SGD`, :class:`Adam`,
:class:`AdamW`) keeps the seeds' API on top of it. See ``docs/optim.md``.
"""

from tapegrad.optim import schedules, transforms
from tapegrad.optim.optimizer import SGD, Adam, AdamW, Optimizer, is_module
from tapegrad.optim.schedules import (
    CosineScheduler,
    LRScheduler,
    constant_schedule,
    exponential_decay,
    step_decay_schedule,
    warmup_cosine_schedule,
)
from tapegrad.optim.transforms import (
    GradientTransformation,
    adam,
    adamw,
    add_decayed_weights,
    apply_gradients,
    apply_updates,
    chain,
    clip_by_global_norm,
    clip_by_norm,
    global_norm,
    identity,
    scale,
    scale_by_adam,
    scale_by_learning_rate,
    sgd,
    trace,
    tree_add,
    tree_scale,
    tree_zeros_like,
)

__all__ = [
    "schedules",
    "transforms",
    "GradientTransformation",
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
    "constant_schedule",
    "warmup_cosine_schedule",
    "step_decay_schedule",
    "exponential_decay",
    "LRScheduler",
    "CosineScheduler",
    "Optimizer",
    "SGD",
    "Adam",
    "AdamW",
    "is_module",
]
