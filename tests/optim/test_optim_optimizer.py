"""Stateful Optimizer wrappers: the seeds' API over the pure transforms."""

import math

import numpy as np
import pytest

import tapegrad as tg
from tapegrad import io, optim


class FakeModule:
    """The Module interface the optimizers rely on: ``params`` and ``_set_params``."""

    def __init__(self, params):
        self._params = params
        self.set_calls = 0

    @property
    def params(self):
        return self._params

    def _set_params(self, params):
        self.set_calls += 1
        self._params = params


def _params(seed=0):
    rng = np.random.default_rng(seed)
    return {
        "layer": {"weight": tg.Tensor(rng.normal(size=(2, 3))), "bias": tg.Tensor(np.zeros(3))},
        "scale": tg.Tensor(np.asarray(1.5)),
    }


def _grads(params, seed):
    rng = np.random.default_rng(seed)
    return tg.tree.tree_map(lambda p: tg.Tensor(rng.normal(size=p.shape)), params)


def _leaves(tree):
    return [np.asarray(x.numpy()) for x in tg.tree.tree_leaves(tree)]


def _assert_trees_equal(a, b):
    assert tg.tree.tree_structure(a) == tg.tree.tree_structure(b)
    for x, y in zip(tg.tree.tree_leaves(a), tg.tree.tree_leaves(b)):
        if isinstance(x, tg.Tensor):
            assert isinstance(y, tg.Tensor) and x.dtype == y.dtype
            np.testing.assert_array_equal(x.numpy(), y.numpy())
        else:
            assert type(x) is type(y) and x == y


def ref_adam_steps(p, gs, lrs, b1, b2, eps, wd):
    m = [np.zeros_like(x) for x in p]
    v = [np.zeros_like(x) for x in p]
    for t, (g, lr) in enumerate(zip(gs, lrs), start=1):
        m = [b1 * a + (1 - b1) * gi for a, gi in zip(m, g)]
        v = [b2 * a + (1 - b2) * gi**2 for a, gi in zip(v, g)]
        p = [
            pi - lr * wd * pi - lr * (mi / (1 - b1**t)) / (np.sqrt(vi / (1 - b2**t)) + eps)
            for pi, mi, vi in zip(p, m, v)
        ]
    return p


def test_sgd_step_replaces_params_without_mutation():
    params = _params()
    before = _leaves(params)
    opt = optim.SGD(params, lr=0.1)
    g = _grads(params, 1)
    opt.step(g)
    assert opt.timestep == 1
    for new, old, gi in zip(_leaves(opt.params), before, _leaves(g)):
        np.testing.assert_allclose(new, old - 0.1 * gi, rtol=1e-12)
    for x, y in zip(_leaves(params), before):  # the caller's pytree is untouched
        np.testing.assert_array_equal(x, y)
    assert opt.params is not params


def test_built_from_module_writes_back():
    module = FakeModule(_params())
    opt = optim.Adam(module, lr=0.01)
    assert opt.module is module and opt.params is module.params
    old = module.params
    opt.step(_grads(old, 2))
    assert module.set_calls == 1
    assert module.params is opt.params and module.params is not old
    assert not np.allclose(_leaves(old)[0], _leaves(module.params)[0])
    # a parameter replaced on the module by someone else is what the next step starts from
    module._set_params(tg.tree.tree_map(lambda p: p * 0.0, module.params))
    opt.step(_grads(old, 3))
    assert np.all(np.abs(_leaves(module.params)[0]) < 0.011)


def test_adamw_and_decoupled_adam_match_reference_with_seeds_defaults_and_decay():
    params = _params()
    gs = [_grads(params, s) for s in range(5)]
    want = ref_adam_steps(
        _leaves(params), [_leaves(g) for g in gs], [0.01] * 5, 0.9, 0.999, 1e-7, 0.1
    )
    for opt in (optim.AdamW(params, lr=0.01, weight_decay=0.1),
                optim.Adam(params, lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)):
        assert opt.hyperparams["epsilon"] == 1e-7  # the seeds' default
        for g in gs:
            opt.step(g)
        for got, w in zip(_leaves(opt.params), want):
            np.testing.assert_allclose(got, w, rtol=1e-12, atol=1e-14)
    assert optim.AdamW(params, lr=0.1).hyperparams["weight_decay"] == 0.01


def test_sgd_momentum_nesterov_matches_pure_transform():
    params = _params()
    gs = [_grads(params, s) for s in range(4)]
    opt = optim.SGD(params, lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01)
    tx = optim.sgd(0.05, momentum=0.9, nesterov=True, weight_decay=0.01)
    state, p = tx.init(params), params
    for g in gs:
        opt.step(g)
        u, state = tx.update(g, state, p)
        p = optim.apply_updates(p, u)
    _assert_trees_equal(opt.params, p)


def test_cosine_scheduler_through_lr_scheduler_kwargs():
    params = _params()
    kw = {"lr_scheduler_cls": optim.CosineScheduler, "warmup_steps": 2, "lr_decay_iters": 6,
          "min_lr": 1e-4}  # fmt: skip
    opt = optim.Adam(params, lr=0.01, lr_scheduler_kwargs=kw)
    sched = optim.CosineScheduler(warmup_steps=2, lr_decay_iters=6, min_lr=1e-4)
    assert opt.lr == 0.01 and opt.timestep == 0
    gs = [_grads(params, s) for s in range(8)]
    lrs = []
    for g in gs:
        opt.step(g)
        lrs.append(opt.lr)
    # as in the seeds: step() increments timestep, then update_lr(), then updates with lr
    assert lrs == [sched(t, 0.01, None) for t in range(1, 9)]
    want = ref_adam_steps(_leaves(params), [_leaves(g) for g in gs], lrs, 0.9, 0.999, 1e-7, 0.0)
    for got, w in zip(_leaves(opt.params), want):
        np.testing.assert_allclose(got, w, rtol=1e-12, atol=1e-14)


def test_update_lr_and_lr_setter():
    opt = optim.SGD(_params(), lr=0.5)
    opt.update_lr()  # no scheduler: no change
    assert opt.lr == 0.5
    opt.lr = 0.25
    assert opt.lr == 0.25 and opt.initial_lr == 0.5
    with pytest.raises(ValueError, match="lr: expected a number >= 0"):
        opt.lr = -1.0
    with pytest.raises(TypeError, match="lr: expected a number"):
        opt.lr = "0.1"


def test_gradient_helpers():
    params = _params()
    opt = optim.SGD(params, lr=0.1)
    assert opt.grads is None and opt.grad_l2_norm() == 0.0 and opt.gradient_arrays() == {}
    g = _grads(params, 4)
    opt.set_grads(g)
    flat = np.concatenate([x.ravel() for x in _leaves(g)])
    assert opt.grad_l2_norm() == pytest.approx(np.linalg.norm(flat), rel=1e-12)
    names = opt.gradient_arrays()
    assert list(names) == ["layer.bias", "layer.weight", "scale"]
    np.testing.assert_array_equal(names["layer.weight"], g["layer"]["weight"].numpy())

    opt.scale_gradients(0.5)
    assert opt.grad_l2_norm() == pytest.approx(0.5 * np.linalg.norm(flat), rel=1e-12)

    norm = opt.clip_grad_norm(0.1)
    assert norm == pytest.approx(0.5 * np.linalg.norm(flat), rel=1e-12)
    assert opt.grad_l2_norm() == pytest.approx(0.1, rel=1e-12)
    assert opt.clip_grad_norm(1.0) == pytest.approx(0.1)  # below the bound: unchanged
    assert opt.grad_l2_norm() == pytest.approx(0.1, rel=1e-12)

    opt.set_grads(g)
    opt.clip_grad_norm(0.2, norm_type=1.0)
    assert np.abs(np.concatenate([x.ravel() for x in _leaves(opt.grads)])).sum() == pytest.approx(
        0.2
    )
    opt.set_grads(g)
    opt.clip_grad_norm(0.2, norm_type=math.inf)
    assert np.abs(np.concatenate([x.ravel() for x in _leaves(opt.grads)])).max() == pytest.approx(
        0.2
    )

    opt.zero_grad()
    assert opt.grads is None
    with pytest.raises(ValueError, match="no gradients held"):
        opt.step()
    with pytest.raises(ValueError, match="no gradients held"):
        opt.clip_grad_norm(1.0)


def test_clip_then_step_uses_clipped_grads_and_accumulate():
    params = _params()
    g = _grads(params, 5)
    a = optim.SGD(params, lr=1.0)
    a.set_grads(g)
    a.clip_grad_norm(0.5)
    a.step()
    b = optim.SGD(params, lr=1.0, max_grad_norm=0.5)  # the seeds' hyperparameter
    b.step(g)
    for x, y in zip(_leaves(a.params), _leaves(b.params)):
        np.testing.assert_allclose(x, y, rtol=1e-12)

    c = optim.SGD(params, lr=1.0)
    c.accumulate_grads(g)
    c.accumulate_grads(g)
    for x, y in zip(_leaves(c.grads), _leaves(g)):
        np.testing.assert_allclose(x, 2 * y)


def test_state_dict_round_trip_exact_and_resume(tmp_path):
    params = _params()
    gs = [_grads(params, s) for s in range(6)]
    kw = {"lr_scheduler_cls": optim.CosineScheduler, "warmup_steps": 1, "lr_decay_iters": 5}
    a = optim.Adam(params, lr=0.02, weight_decay=0.05, lr_scheduler_kwargs=kw)
    for g in gs[:3]:
        a.step(g)
    sd = a.state_dict()
    assert set(sd) == {"hyperparams", "states"} and sd["states"]["timestep"] == 3

    path = tmp_path / "opt.safetensors"
    io.save(path, {"params": a.params, "opt": sd})
    ck = io.load(path)

    b = optim.Adam(ck["params"], lr=0.02, weight_decay=0.05, lr_scheduler_kwargs=kw)
    b.load_state_dict(ck["opt"])
    _assert_trees_equal(b.state_dict(), sd)
    assert b.timestep == 3 and b.lr == a.lr
    for g in gs[3:]:
        a.step(g)
        b.step(g)
    _assert_trees_equal(a.params, b.params)
    _assert_trees_equal(a.state_dict(), b.state_dict())


def test_load_state_dict_errors_leave_optimizer_unchanged():
    params = _params()
    opt = optim.Adam(params, lr=0.1)
    opt.step(_grads(params, 0))
    good = opt.state_dict()
    with pytest.raises(TypeError, match="expected \\{'hyperparams'"):
        opt.load_state_dict({"states": {}})
    other = optim.Adam({"w": tg.Tensor(np.ones(2))}, lr=0.1).state_dict()
    with pytest.raises(TypeError, match="opt_state structure differs"):
        opt.load_state_dict(other)
    bad = optim.Adam(tg.tree.tree_map(lambda p: p.astype(np.float32), params), lr=0.1)
    with pytest.raises(ValueError, match="dtype float32; expected shape"):
        opt.load_state_dict({**bad.state_dict(), "hyperparams": {"lr": 9.0}})
    _assert_trees_equal(opt.state_dict(), good)


def test_base_optimizer_with_transform_and_errors():
    params = _params()
    opt = optim.Optimizer(params, lr=0.1, transform=lambda lr: optim.sgd(lr))
    g = _grads(params, 7)
    opt.step(g)
    ref = optim.SGD(params, lr=0.1)
    ref.step(g)
    _assert_trees_equal(opt.params, ref.params)
    with pytest.raises(TypeError, match="transform= is for the base Optimizer"):
        optim.Adam(params, lr=0.1, transform=lambda lr: optim.sgd(lr))
    with pytest.raises(TypeError, match="needs transform="):
        optim.Optimizer(params, lr=0.1)
    with pytest.raises(TypeError, match="lr_scheduler_cls"):
        optim.SGD(params, lr=0.1, lr_scheduler_kwargs={"warmup_steps": 3})
    with pytest.raises(ValueError, match="lr must be finite"):
        optim.SGD(params, lr=-0.1)
    with pytest.raises(ValueError, match="nesterov"):
        optim.SGD(params, lr=0.1, nesterov=True)
    with pytest.raises(TypeError, match="different pytree structures"):
        optim.SGD(params, lr=0.1).step({"w": g["scale"]})
    with pytest.raises(ValueError, match="must match exactly"):
        optim.SGD(params, lr=0.1).step({**g, "scale": tg.Tensor(np.ones(3))})


# -- RMSprop, Adagrad, Lion -----------------------------------------------------------------------
STATEFUL = [
    (lambda p: optim.RMSprop(p, momentum=0.5, centered=True, weight_decay=0.01),
     lambda lr: optim.rmsprop(lr, momentum=0.5, centered=True, weight_decay=0.01)),
    (lambda p: optim.Adagrad(p, lr_decay=0.05, initial_accumulator_value=0.1),
     lambda lr: optim.adagrad(lr, lr_decay=0.05, initial_accumulator_value=0.1)),
    (lambda p: optim.Lion(p, lr=1e-3, beta1=0.8, weight_decay=0.1),
     lambda lr: optim.lion(lr, b1=0.8, weight_decay=0.1)),
]  # fmt: skip


@pytest.mark.parametrize("make, make_tx", STATEFUL, ids=["RMSprop", "Adagrad", "Lion"])
def test_new_stateful_optimizers_equal_their_pure_transforms(make, make_tx):
    params = _params()
    opt = make(params)
    tx = make_tx(opt.lr)
    state, p = tx.init(params), params
    for s in range(4):
        g = _grads(params, s)
        opt.step(g)
        u, state = tx.update(g, state, p)
        p = optim.apply_updates(p, u)
    _assert_trees_equal(opt.params, p)
    assert opt.timestep == 4


def test_new_stateful_optimizers_have_pytorch_defaults():
    params = _params()
    assert optim.RMSprop(params).hyperparams == {
        "lr": 0.01, "initial_lr": 0.01, "alpha": 0.99, "eps": 1e-8, "weight_decay": 0.0,
        "momentum": 0.0, "centered": False,
    }  # fmt: skip
    assert optim.Adagrad(params).hyperparams == {
        "lr": 0.01, "initial_lr": 0.01, "lr_decay": 0.0, "weight_decay": 0.0,
        "initial_accumulator_value": 0.0, "eps": 1e-10,
    }  # fmt: skip
    h = optim.Lion(params, lr=1e-4).hyperparams
    assert (h["beta1"], h["beta2"], h["weight_decay"]) == (0.9, 0.99, 1e-3)  # Optax's
    with pytest.raises(ValueError, match="RMSprop: alpha must be in"):
        optim.RMSprop(params, alpha=2.0)
    with pytest.raises(ValueError, match="Adagrad: eps must be"):
        optim.Adagrad(params, eps=-1.0)
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'lr'"):
        optim.Lion(params)


def test_new_stateful_optimizers_match_torch_where_installed():
    torch = pytest.importorskip("torch")
    params = _params()
    gs = [_grads(params, s) for s in range(5)]
    cases = [
        (optim.RMSprop(params, lr=0.01, momentum=0.9, centered=True),
         lambda ps: torch.optim.RMSprop(ps, lr=0.01, momentum=0.9, centered=True)),
        (optim.Adagrad(params, lr=0.1, lr_decay=0.01, weight_decay=0.1),
         lambda ps: torch.optim.Adagrad(ps, lr=0.1, lr_decay=0.01, weight_decay=0.1)),
    ]  # fmt: skip
    for opt, make_torch in cases:
        tp = [torch.tensor(x, requires_grad=True) for x in _leaves(params)]
        topt = make_torch(tp)
        for g in gs:
            opt.step(g)
            for t, gi in zip(tp, _leaves(g)):
                t.grad = torch.tensor(gi)
            topt.step()
            for t, mine in zip(tp, _leaves(opt.params)):
                np.testing.assert_allclose(t.detach().numpy(), mine, rtol=1e-10, atol=1e-13)


def test_new_stateful_optimizers_state_dict_round_trip(tmp_path):
    params = _params()
    gs = [_grads(params, s) for s in range(5)]
    for make, _ in STATEFUL:
        a = make(params)
        for g in gs[:2]:
            a.step(g)
        io.save(tmp_path / "o", {"params": a.params, "opt": a.state_dict()})
        ck = io.load(tmp_path / "o")
        b = make(ck["params"])
        b.load_state_dict(ck["opt"])
        for g in gs[2:]:
            a.step(g)
            b.step(g)
        _assert_trees_equal(a.params, b.params)
        _assert_trees_equal(a.state_dict(), b.state_dict())


def test_step_passes_extra_arguments_to_the_transform():
    params = _params()
    opt = optim.Optimizer(
        params,
        lr=0.1,
        transform=lambda lr: optim.chain(
            optim.sgd(lr), optim.reduce_on_plateau(patience=1, factor=0.5)
        ),
    )
    for loss in [1.0, 1.0]:  # the second value does not improve: the scale halves
        opt.step(_grads(params, 0), value=loss)
    assert opt.opt_state[-1]["scale"] == 0.5
    before = opt.state_dict()
    with pytest.raises(TypeError, match="update needs the loss"):
        opt.step(_grads(params, 0))
    _assert_trees_equal(opt.state_dict(), before)  # a failed step changes nothing
    assert opt.timestep == 2


# -- ReduceLROnPlateau (PyTorch's rule, for the stateful optimizers) ----------------------------
def ref_torch_plateau(values, lr, mode="min", factor=0.1, patience=10, threshold=1e-4,
                      threshold_mode="rel", cooldown=0, min_lr=0.0, eps=1e-8):  # fmt: skip
    """PyTorch's documented ReduceLROnPlateau, written out: the rate after each value."""
    best = math.inf if mode == "min" else -math.inf
    bad = cool = 0
    out = []
    for v in values:
        if mode == "min":
            better = v < (best * (1 - threshold) if threshold_mode == "rel" else best - threshold)
        else:
            better = v > (best * (1 + threshold) if threshold_mode == "rel" else best + threshold)
        if better:
            best, bad = v, 0
        else:
            bad += 1
        if cool > 0:
            cool, bad = cool - 1, 0
        if bad > patience:
            new = max(lr * factor, min_lr)
            if lr - new > eps:
                lr = new
            cool, bad = cooldown, 0
        out.append(lr)
    return out


PLATEAU_METRICS = [1.0, 0.9, 0.9, 0.95, 0.9, 0.5, 0.5, 0.5, 0.5, 0.49999, 0.5, 0.5, 0.5, 0.5]
TORCH_PLATEAU_KW = [
    {"patience": 1},
    {"patience": 2, "factor": 0.5, "cooldown": 2},
    {"patience": 0, "factor": 0.5, "min_lr": 0.02, "threshold_mode": "abs", "threshold": 0.01},
    {"patience": 1, "mode": "max", "factor": 0.5},
]


@pytest.mark.parametrize("kw", TORCH_PLATEAU_KW)
def test_reduce_lr_on_plateau_matches_reference(kw):
    opt = optim.SGD(_params(), lr=0.1)
    sched = optim.ReduceLROnPlateau(opt, **kw)
    lrs = []
    for m in PLATEAU_METRICS:
        sched.step(m)
        lrs.append(opt.lr)
    want = ref_torch_plateau(PLATEAU_METRICS, 0.1, **kw)
    assert lrs == pytest.approx(want, rel=1e-15)
    assert min(want) < 0.1 and sched.last_epoch == len(PLATEAU_METRICS)


@pytest.mark.parametrize("kw", TORCH_PLATEAU_KW)
def test_reduce_lr_on_plateau_matches_torch_where_installed(kw):
    torch = pytest.importorskip("torch")
    opt = optim.SGD(_params(), lr=0.1)
    sched = optim.ReduceLROnPlateau(opt, **kw)
    lrs = []
    for m in PLATEAU_METRICS:
        sched.step(m)
        lrs.append(opt.lr)
    w = torch.zeros(1, requires_grad=True)
    topt = torch.optim.SGD([w], lr=0.1)
    tsched = torch.optim.lr_scheduler.ReduceLROnPlateau(topt, **kw)
    tl = []
    for m in PLATEAU_METRICS:
        tsched.step(m)
        tl.append(topt.param_groups[0]["lr"])
    assert lrs == pytest.approx(tl, rel=1e-15)


def test_reduce_lr_on_plateau_state_and_errors():
    opt = optim.Adam(_params(), lr=0.1)
    sched = optim.ReduceLROnPlateau(opt, patience=1)
    sched.step(tg.Tensor(np.asarray(1.0)))
    sched.step(np.float64(2.0))
    sd = sched.state_dict()
    assert sd == {"best": 1.0, "num_bad_epochs": 1, "cooldown_counter": 0, "last_epoch": 2}
    other = optim.ReduceLROnPlateau(opt, patience=1)
    other.load_state_dict(sd)
    other.step(2.0)
    assert opt.lr == pytest.approx(0.01)
    with pytest.raises(TypeError, match="expected the keys"):
        other.load_state_dict({"best": 1.0})
    with pytest.raises(TypeError, match="metrics must be a real scalar"):
        sched.step("low")
    with pytest.raises(TypeError, match="has an lr_scheduler"):
        kw = {"lr_scheduler_cls": optim.CosineScheduler}
        optim.ReduceLROnPlateau(optim.SGD(_params(), lr=0.1, lr_scheduler_kwargs=kw))
    with pytest.raises(TypeError, match="optimizer must be an optim.Optimizer"):
        optim.ReduceLROnPlateau(_params())
    with pytest.raises(ValueError, match="mode must be 'min' or 'max'"):
        optim.ReduceLROnPlateau(opt, mode="down")
    with pytest.raises(ValueError, match=r"factor must be a number in \(0, 1\)"):
        optim.ReduceLROnPlateau(opt, factor=1.5)
    with pytest.raises(ValueError, match="patience must be an int >= 0"):
        optim.ReduceLROnPlateau(opt, patience=-1)
