"""Every optimizer, transformation and schedule checks its hyperparameters where it is built,
with an error that names the function the user called and the argument (never an internal
building block), and checks a schedule's value when the step runs."""

import inspect
import math

import numpy as np
import pytest

import tapegrad as tg
from tapegrad import optim
from tapegrad.optim import (
    _extra,
    _extra_combinators,
    _extra_lbfgs,
    _extra_schedule_free,
    schedules,
    transforms,
)

# Valid values for required arguments, so that one argument at a time can be made bad.
REQUIRED = {
    "learning_rate": 0.1, "decay": 0.9, "step_size": 2, "max_norm": 1.0, "peak_lr": 1.0,
    "init_value": 1.0, "transition_steps": 4, "decay_rate": 0.5, "end_value": 0.5,
    "value": 1.0, "lr": 0.1, "warmup_steps": 2, "lr_decay_iters": 10, "min_lr": 0.0,
    "gamma": 0.5, "power": 1.0, "decay_steps": 10, "peak_value": 1.0,
    "interpolate_type": "linear",
    # the optimizers and wrappers of _extra*.py
    "inner_factory": optim.sgd, "fast_optimizer": optim.sgd(0.1), "sync_period": 2,
    "slow_step_size": 0.5, "step_size_fn": lambda step: 0.1, "max_linesearch_steps": 10,
    "threshold": 1.0, "eta": 0.01, "key": tg.random.key(0), "line_search_fn": "strong_wolfe",
    "base_optimizer": optim.sgd(0.1),
}  # fmt: skip
# Arguments whose default (None) is refused: they must be given.
NEEDED = {"key"}
# Arguments that are not hyperparameters (structures, callables) or take any number.
NOT_CHECKED = {"inner", "mask", "transforms", "param_labels", "boundaries_and_scales",
               "every_k_schedule", "model_parameters", "lr_scheduler_kwargs", "transform",
               "weight_decay_mask", "trust_ratio_mask", "inner_factory", "static_args",
               "fast_optimizer", "linesearch", "step_size_fn", "base_optimizer"}

FACTORIES = [
    optim.scale, optim.scale_by_learning_rate, optim.scale_by_adam, optim.add_decayed_weights,
    optim.trace, optim.clip_by_global_norm, optim.sgd, optim.adam, optim.adamw, optim.rmsprop,
    optim.adagrad, optim.lion, optim.scale_by_lion, optim.reduce_on_plateau,
    optim.constant_schedule, optim.warmup_cosine_schedule, optim.step_decay_schedule,
    optim.exponential_decay, optim.linear_schedule, optim.piecewise_constant_schedule,
    optim.polynomial_schedule, optim.cosine_decay_schedule, optim.warmup_cosine_decay_schedule,
    optim.warmup_exponential_decay_schedule, optim.piecewise_interpolate_schedule,
    optim.linear_onecycle_schedule, optim.cosine_onecycle_schedule,
    optim.nadam, optim.radam, optim.adamax, optim.adadelta, optim.adabelief, optim.lamb,
    optim.lars, optim.adafactor, optim.sm3, optim.novograd, optim.noisy_sgd, optim.lbfgs,
    optim.scale_by_radam, optim.scale_by_adamax, optim.scale_by_adadelta, optim.scale_by_belief,
    optim.scale_by_trust_ratio, optim.scale_by_factored_rms, optim.scale_by_sm3,
    optim.scale_by_novograd, optim.scale_by_schedule, optim.scale_by_param_block_rms,
    optim.clip_by_block_rms, optim.centralize, optim.zero_nans, optim.add_noise, optim.ema,
    optim.parameter_ema, optim.scale_by_lbfgs, optim.scale_by_zoom_linesearch,
    optim.inject_hyperparams, optim.lookahead, optim.schedule_free, optim.schedule_free_sgd,
    optim.schedule_free_adamw,
]
CLASSES = [
    transforms.Scale, transforms.ScaleByLearningRate, transforms.ScaleByAdam,
    transforms.AddDecayedWeights, transforms.Trace, transforms.ClipByGlobalNorm,
    transforms.ScaleByRMSprop, transforms.ScaleByAdagrad, transforms.ScaleByLion,
    transforms.ReduceOnPlateau, schedules.ConstantSchedule, schedules.WarmupCosineSchedule,
    schedules.StepDecaySchedule, schedules.ExponentialDecaySchedule, schedules.LinearSchedule,
    optim.CosineScheduler, optim.SGD, optim.Adam, optim.AdamW, optim.RMSprop, optim.Adagrad,
    optim.Lion,
    _extra.ScaleByOptaxAdam, _extra.ScaleByRAdam, _extra.ScaleByAdamax, _extra.ScaleByAdaDelta,
    _extra.ScaleByBelief, _extra.ScaleByTrustRatio, _extra.ScaleByFactoredRMS,
    _extra.ClipByBlockRMS, _extra.ScaleByParamBlockRMS, _extra.ScaleBySM3,
    _extra.ScaleByNovograd, _extra.ScaleBySchedule, _extra.AddNoise, _extra.EMA,
    _extra.ParameterEMA, _extra.ScaleByTorchNAdam, _extra.ScaleByTorchRAdam,
    _extra_combinators.Lookahead, _extra_lbfgs.ScaleByLBFGS, _extra_lbfgs.ScaleByZoomLinesearch,
    optim.NAdam, optim.RAdam, optim.Adamax, optim.Adadelta, optim.LBFGS,
    _extra_schedule_free.ScheduleFree,
]


def _signature(obj):
    sig = inspect.signature(obj)
    return [p for p in sig.parameters.values()
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def _call(obj, **overrides):
    kwargs = {}
    for p in _signature(obj):
        if p.name == "model_parameters":
            kwargs[p.name] = {"w": tg.Tensor(np.ones(2))}
        elif p.default is inspect.Parameter.empty or (p.name in NEEDED and p.default is None):
            kwargs[p.name] = REQUIRED[p.name]
    kwargs.update(overrides)
    return obj(**kwargs)


def _cases():
    for obj in FACTORIES + CLASSES:
        for p in _signature(obj):
            if p.name not in NOT_CHECKED:
                yield obj, p


CASES = list(_cases())


@pytest.mark.parametrize("obj,param", CASES,
                         ids=[f"{o.__name__}.{p.name}" for o, p in CASES])
def test_a_bad_hyperparameter_names_the_function_called_and_the_argument(obj, param):
    _call(obj)  # the defaults are valid
    who = obj.__name__
    prefix = f"{who}: {param.name}" if param.name != "betas" else f"{who}: betas"
    default = param.default
    is_flag = isinstance(default, bool)
    is_text = isinstance(REQUIRED.get(param.name, default), str)
    with pytest.raises(TypeError) as info:  # the wrong kind
        _call(obj, **{param.name: 0.5 if is_flag or is_text else "x"})
    assert str(info.value).startswith(prefix) or "learning_rate" in str(info.value), info.value
    if is_flag or is_text:
        return
    raised = 0
    for bad in (-0.5, math.nan, math.inf, 2.0):  # out of range
        try:
            _call(obj, **{param.name: bad})
        except (TypeError, ValueError) as e:  # an int argument given -0.5 is the wrong kind
            raised += 1
            msg = str(e)
            assert msg.startswith(f"{who}: "), msg
            assert param.name in msg or (param.name == "lr" and "learning_rate" in msg), msg
    assert raised, f"{who}({param.name}=...) accepts -0.5, nan, inf and 2.0"


def test_sgd_negative_momentum_names_sgd_and_momentum():
    with pytest.raises(ValueError, match="^sgd: momentum must be in \\[0, 1\\], got -0.5$"):
        optim.sgd(0.1, momentum=-0.5)
    with pytest.raises(ValueError, match="^SGD: momentum must be in \\[0, 1\\]"):
        optim.SGD({"w": tg.Tensor(np.ones(2))}, lr=0.1, momentum=-0.5)
    with pytest.raises(ValueError, match="^adamw: weight_decay must be"):
        optim.adamw(0.1, weight_decay=-1.0)
    with pytest.raises(ValueError, match="^adam: b1 must be in"):
        optim.adam(0.1, b1=1.0)


def _negative_after(k):
    return lambda step: 0.1 - 0.05 * step if not isinstance(step, tg.Tensor) else (
        0.1 - 0.05 * tg.numpy.astype(step, np.float64))


def test_a_schedule_going_negative_is_refused_when_the_step_runs():
    params = {"w": tg.Tensor(np.ones(2))}
    g = {"w": tg.Tensor(np.ones(2))}
    for tx in (optim.sgd(_negative_after(3)), optim.adam(_negative_after(3)),
               optim.chain(optim.clip_by_global_norm(1.0), optim.lion(_negative_after(3)))):
        state = tx.init(params)
        p = params
        for _ in range(3):  # rates 0.1, 0.05, 0.0
            p, state = optim.apply_gradients(tx, g, state, p)
        with pytest.raises(ValueError, match="schedule returned -0.05.* at step 3; a rate must "
                           "be finite and >= 0"):
            optim.apply_gradients(tx, g, state, p)
    tx = optim.sgd(lambda step: math.nan)
    with pytest.raises(ValueError, match="returned nan at step 0"):
        tx.update(g, tx.init(params), params)


def test_a_schedule_going_negative_is_refused_under_jit():
    params = {"w": tg.Tensor(np.ones(2))}
    g = {"w": tg.Tensor(np.ones(2))}
    tx = optim.sgd(_negative_after(3))
    step = tg.jit(lambda p, s: optim.apply_gradients(tx, g, s, p))
    p, state = params, tx.init(params)
    for _ in range(3):
        p, state = step(p, state)
    with pytest.raises(ValueError, match="at step 3; a rate must be finite and >= 0"):
        step(p, state)


def test_the_stateful_scheduler_is_checked_too():
    class Down:
        def __init__(self, slope):
            self.slope = slope

        def __call__(self, step, initial_lr, current_lr):
            return initial_lr - self.slope * step

    opt = optim.SGD({"w": tg.Tensor(np.ones(2))}, lr=0.1,
                    lr_scheduler_kwargs={"lr_scheduler_cls": Down, "slope": 0.05})
    g = {"w": tg.Tensor(np.ones(2))}
    opt.step(g)
    opt.step(g)
    with pytest.raises(ValueError, match="SGD.update_lr: the scheduler Down returned the "
                       "learning rate -0.05.* at step 3"):
        opt.step(g)
    assert opt.timestep == 2  # a failed step changes nothing


def test_multisteps_schedule_is_checked_when_it_runs():
    params = {"w": tg.Tensor(np.ones(2))}
    g = {"w": tg.Tensor(np.ones(2))}
    tx = optim.MultiSteps(optim.sgd(0.1), lambda n: 2 - n)
    state = tx.init(params)
    for _ in range(3):
        _, state = tx.update(g, state, params)
    with pytest.raises(ValueError, match="every_k_schedule returned 0 at gradient step 2"):
        tx.update(g, state, params)
