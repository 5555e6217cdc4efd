"""``tapegrad.optim``: pure gradient transformations, schedules and stateful optimizers.

The pure layer follows Optax: a transform has ``init(params) -> opt_state`` and
``update(grads, opt_state, params) -> (updates, opt_state)``; ``apply_updates(params, updates)``
gives the new parameters, and ``apply_gradients(tx, grads, opt_state, params)`` does both in one
faster call. The stateful :class:`Optimizer` family (:class:`SGD`, :class:`Adam`,
:class:`AdamW`, :class:`RMSprop`, :class:`Adagrad`, :class:`Lion`) keeps PyTorch's API on top
of it, with PyTorch's schedulers (:class:`ReduceLROnPlateau`, :class:`LambdaLR`,
:class:`MultiStepLR`, :class:`CosineAnnealingWarmRestarts`, :class:`CyclicLR`,
:class:`OneCycleLR`). See ``docs/optim.md``.
"""

from tapegrad.optim import combinators, optimizer, schedules, transforms
from tapegrad.optim._finite import ApplyIfFinite, apply_if_finite
from tapegrad.optim._finite import ApplyIfFiniteState as ApplyIfFiniteState  # (Optax's NamedTuple)
from tapegrad.optim.combinators import MultiSteps, add_decayed_weights, masked, multi_transform
from tapegrad.optim.optimizer import *  # noqa: F401,F403
from tapegrad.optim.schedules import (
    CosineAnnealingWarmRestarts,
    CosineScheduler,
    CyclicLR,
    LambdaLR,
    LRScheduler,
    MultiStepLR,
    OneCycleLR,
    constant_schedule,
    cosine_decay_schedule,
    cosine_onecycle_schedule,
    exponential_decay,
    join_schedules,
    linear_onecycle_schedule,
    linear_schedule,
    piecewise_constant_schedule,
    piecewise_interpolate_schedule,
    polynomial_schedule,
    sgdr_schedule,
    step_decay_schedule,
    warmup_cosine_decay_schedule,
    warmup_cosine_schedule,
    warmup_exponential_decay_schedule,
)
from tapegrad.optim.transforms import (
    GradientTransformation,
    adagrad,
    adam,
    adamw,
    apply_gradients,
    apply_updates,
    chain,
    clip_by_global_norm,
    clip_by_norm,
    global_norm,
    identity,
    lion,
    reduce_on_plateau,
    rmsprop,
    scale,
    scale_by_adam,
    scale_by_learning_rate,
    scale_by_lion,
    sgd,
    trace,
    tree_add,
    tree_scale,
    tree_zeros_like,
)

__all__ = [
    "schedules",
    "transforms",
    "combinators",
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
    "rmsprop",
    "adagrad",
    "lion",
    "scale_by_lion",
    "reduce_on_plateau",
    "masked",
    "multi_transform",
    "MultiSteps",
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
    "linear_schedule",
    "piecewise_constant_schedule",
    "polynomial_schedule",
    "cosine_decay_schedule",
    "join_schedules",
    "warmup_cosine_decay_schedule",
    "warmup_exponential_decay_schedule",
    "piecewise_interpolate_schedule",
    "linear_onecycle_schedule",
    "cosine_onecycle_schedule",
    "sgdr_schedule",
    "LRScheduler",
    "CosineScheduler",
    "LambdaLR",
    "MultiStepLR",
    "CosineAnnealingWarmRestarts",
    "CyclicLR",
    "OneCycleLR",
    "apply_if_finite",
    "ApplyIfFinite",
]
# the stateful optimizers (PyTorch's API)
__all__ += optimizer.__all__

# -- more optimizers and wrappers: Optax's (pure) and PyTorch's (stateful) ---------------------
from tapegrad.optim import _extra_optimizers  # noqa: E402
from tapegrad.optim._extra import (  # noqa: E402
    adabelief,
    adadelta,
    adafactor,
    adamax,
    add_noise,
    centralize,
    clip_by_block_rms,
    ema,
    incremental_update,
    lamb,
    lars,
    nadam,
    noisy_sgd,
    novograd,
    parameter_ema,
    periodic_update,
    radam,
    scale_by_adadelta,
    scale_by_adamax,
    scale_by_belief,
    scale_by_factored_rms,
    scale_by_novograd,
    scale_by_param_block_rms,
    scale_by_radam,
    scale_by_schedule,
    scale_by_sm3,
    scale_by_trust_ratio,
    sm3,
    zero_nans,
)
from tapegrad.optim._extra_combinators import (  # noqa: E402
    LookaheadParams,
    inject_hyperparams,
    lookahead,
)
from tapegrad.optim._extra_lbfgs import (  # noqa: E402
    lbfgs,
    scale_by_lbfgs,
    scale_by_zoom_linesearch,
    value_and_grad_from_state,
)
from tapegrad.optim._extra_optimizers import *  # noqa: E402,F401,F403
from tapegrad.optim._extra_schedule_free import (  # noqa: E402
    schedule_free,
    schedule_free_adamw,
    schedule_free_eval_params,
    schedule_free_sgd,
)

__all__ += [
    "nadam", "radam", "adamax", "adadelta", "adabelief", "lamb", "lars", "adafactor", "sm3",
    "novograd", "noisy_sgd", "lbfgs",
    "scale_by_radam", "scale_by_adamax", "scale_by_adadelta", "scale_by_belief",
    "scale_by_trust_ratio", "scale_by_factored_rms", "scale_by_sm3", "scale_by_novograd",
    "scale_by_schedule", "scale_by_param_block_rms", "clip_by_block_rms", "centralize",
    "zero_nans", "add_noise", "ema", "parameter_ema", "incremental_update", "periodic_update",
    "scale_by_lbfgs", "scale_by_zoom_linesearch", "value_and_grad_from_state",
    "inject_hyperparams", "lookahead", "LookaheadParams",
    "schedule_free", "schedule_free_sgd", "schedule_free_adamw", "schedule_free_eval_params",
]  # fmt: skip
__all__ += _extra_optimizers.__all__
