"""The stateful optimizers' PyTorch spellings work with PyTorch's meaning (checked step by step
against torch.optim where it is installed) or raise; none is silently dropped."""

import numpy as np
import pytest

import tapegrad as tg
from tapegrad import optim


def _params(seed=0):
    rng = np.random.default_rng(seed)
    return {"a": tg.Tensor(rng.normal(size=(3, 2))), "b": tg.Tensor(rng.normal(size=(4,)))}


def _grads(params, seed):
    rng = np.random.default_rng(100 + seed)
    return tg.tree.tree_map(lambda p: tg.Tensor(rng.normal(size=p.shape)), params)


def _np(tree):
    return [x.numpy() for x in tg.tree.tree_leaves(tree)]


def _against_torch(ours, theirs, steps=5):
    torch = pytest.importorskip("torch")
    params = _params()
    opt = ours(params)
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)  # PyTorch keeps scalar state (NAdam's) in it
    try:
        tp = [torch.tensor(x.copy(), requires_grad=True) for x in _np(params)]
        topt = theirs(torch, tp)
        for k in range(steps):
            g = _grads(params, k)
            opt.step(g)
            for t, gi in zip(tp, _np(g)):
                t.grad = torch.tensor(gi.copy())
            topt.step()
            for t, mine in zip(tp, _np(opt.params)):
                np.testing.assert_allclose(mine, t.detach().numpy(), rtol=1e-10, atol=1e-12)
    finally:
        torch.set_default_dtype(old)


CASES = {
    "adam betas eps": (
        lambda p: optim.Adam(p, lr=0.1, betas=(0.5, 0.6), eps=1e-3),
        lambda torch, p: torch.optim.Adam(p, lr=0.1, betas=(0.5, 0.6), eps=1e-3)),
    "adam L2 weight_decay": (
        lambda p: optim.Adam(p, lr=0.05, weight_decay=0.3, eps=1e-8),
        lambda torch, p: torch.optim.Adam(p, lr=0.05, weight_decay=0.3)),
    "adam amsgrad": (
        lambda p: optim.Adam(p, lr=0.05, amsgrad=True, eps=1e-8, betas=(0.9, 0.5)),
        lambda torch, p: torch.optim.Adam(p, lr=0.05, amsgrad=True, betas=(0.9, 0.5))),
    "adam maximize": (
        lambda p: optim.Adam(p, lr=0.05, maximize=True, eps=1e-8, weight_decay=0.1),
        lambda torch, p: torch.optim.Adam(p, lr=0.05, maximize=True, weight_decay=0.1)),
    "adam decoupled": (
        lambda p: optim.Adam(p, lr=0.05, weight_decay=0.2, decoupled_weight_decay=True,
                             eps=1e-8),
        lambda torch, p: torch.optim.AdamW(p, lr=0.05, weight_decay=0.2)),
    "adamw": (
        lambda p: optim.AdamW(p, lr=0.05, betas=(0.8, 0.9), eps=1e-8),
        lambda torch, p: torch.optim.AdamW(p, lr=0.05, betas=(0.8, 0.9))),
    "sgd dampening": (
        lambda p: optim.SGD(p, lr=0.1, momentum=0.9, dampening=0.3, weight_decay=0.01),
        lambda torch, p: torch.optim.SGD(p, lr=0.1, momentum=0.9, dampening=0.3,
                                         weight_decay=0.01)),
    "sgd positional order": (
        lambda p: optim.SGD(p, 0.1, 0.9, 0.0, 0.01, True),
        lambda torch, p: torch.optim.SGD(p, 0.1, 0.9, 0.0, 0.01, True)),
    "sgd maximize": (
        lambda p: optim.SGD(p, lr=0.1, momentum=0.5, maximize=True, weight_decay=0.1),
        lambda torch, p: torch.optim.SGD(p, lr=0.1, momentum=0.5, maximize=True,
                                         weight_decay=0.1)),
    "rmsprop maximize": (
        lambda p: optim.RMSprop(p, lr=0.01, momentum=0.5, centered=True, maximize=True),
        lambda torch, p: torch.optim.RMSprop(p, lr=0.01, momentum=0.5, centered=True,
                                             maximize=True)),
    "adagrad maximize": (
        lambda p: optim.Adagrad(p, lr=0.1, lr_decay=0.01, maximize=True),
        lambda torch, p: torch.optim.Adagrad(p, lr=0.1, lr_decay=0.01, maximize=True)),
    "nadam defaults": (lambda p: optim.NAdam(p), lambda torch, p: torch.optim.NAdam(p)),
    "nadam options": (
        lambda p: optim.NAdam(p, 0.05, (0.8, 0.9), 1e-3, 0.1, 0.01),
        lambda torch, p: torch.optim.NAdam(p, 0.05, (0.8, 0.9), 1e-3, 0.1, 0.01)),
    "nadam decoupled maximize": (
        lambda p: optim.NAdam(p, lr=0.05, weight_decay=0.2, decoupled_weight_decay=True,
                              maximize=True),
        lambda torch, p: torch.optim.NAdam(p, lr=0.05, weight_decay=0.2,
                                           decoupled_weight_decay=True, maximize=True)),
    "radam defaults": (lambda p: optim.RAdam(p), lambda torch, p: torch.optim.RAdam(p)),
    "radam rectified": (  # beta2 = 0.9: rho_t passes 5 at the 5th step
        lambda p: optim.RAdam(p, 0.05, (0.8, 0.9), 1e-3, 0.1),
        lambda torch, p: torch.optim.RAdam(p, 0.05, (0.8, 0.9), 1e-3, 0.1), 9),
    "radam decoupled maximize": (
        lambda p: optim.RAdam(p, lr=0.05, betas=(0.9, 0.8), weight_decay=0.2,
                              decoupled_weight_decay=True, maximize=True),
        lambda torch, p: torch.optim.RAdam(p, lr=0.05, betas=(0.9, 0.8), weight_decay=0.2,
                                           decoupled_weight_decay=True, maximize=True), 9),
    "adamax defaults": (lambda p: optim.Adamax(p), lambda torch, p: torch.optim.Adamax(p)),
    "adamax options": (
        lambda p: optim.Adamax(p, 0.05, (0.8, 0.9), 1e-3, 0.1, maximize=True),
        lambda torch, p: torch.optim.Adamax(p, 0.05, (0.8, 0.9), 1e-3, 0.1, maximize=True)),
    "adadelta defaults": (lambda p: optim.Adadelta(p), lambda torch, p: torch.optim.Adadelta(p)),
    "adadelta options": (
        lambda p: optim.Adadelta(p, 0.5, 0.5, 1e-3, 0.1, maximize=True),
        lambda torch, p: torch.optim.Adadelta(p, 0.5, 0.5, 1e-3, 0.1, maximize=True)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_pytorch_options_match_torch(case):
    ours, theirs, *steps = CASES[case]
    _against_torch(ours, theirs, *steps)


def test_adam_pytorch_spellings_change_the_steps():
    params = _params()
    plain = optim.Adam(params, lr=0.1)
    spelled = optim.Adam(params, lr=0.1, betas=(0.0, 0.0), eps=10.0)
    for k in range(3):
        plain.step(_grads(params, k))
        spelled.step(_grads(params, k))
    assert not np.allclose(_np(plain.params)[0], _np(spelled.params)[0])
    assert spelled.hyperparams["beta1"] == 0.0 and spelled.hyperparams["epsilon"] == 10.0


def test_conflicting_or_malformed_spellings_raise():
    p = _params()
    with pytest.raises(TypeError, match="Adam: give betas=\\(beta1, beta2\\) .* not both"):
        optim.Adam(p, lr=0.1, beta1=0.8, betas=(0.9, 0.99))
    with pytest.raises(TypeError, match="Adam: give epsilon or eps"):
        optim.Adam(p, lr=0.1, epsilon=1e-8, eps=1e-8)
    with pytest.raises(TypeError, match="beta1 must be a number, got \\(0.9, 0.99\\); for "
                       "PyTorch's pair pass betas="):
        optim.Adam(p, 0.1, (0.9, 0.99))
    with pytest.raises(TypeError, match="AdamW: betas must be a pair"):
        optim.AdamW(p, lr=0.1, betas=0.9)
    with pytest.raises(ValueError, match="Adam: beta2 must be in \\[0, 1\\)"):
        optim.Adam(p, lr=0.1, betas=(0.9, 1.5))
    with pytest.raises(TypeError, match="nesterov must be a bool"):
        optim.SGD(p, 0.1, 0.9, 0.0, 0.0, 0.5)  # a number where PyTorch's order has nesterov
    with pytest.raises(ValueError, match="nesterov=True needs momentum > 0 and dampening=0"):
        optim.SGD(p, lr=0.1, momentum=0.9, dampening=0.1, nesterov=True)
    with pytest.raises(TypeError, match="amsgrad must be a bool"):
        optim.Adam(p, lr=0.1, amsgrad="yes")
    with pytest.raises(TypeError, match="SGD: maximize must be a bool"):
        optim.SGD(p, lr=0.1, maximize=1)


def test_lion_takes_the_betas_pair_too():
    p = _params()
    a, b = optim.Lion(p, lr=1e-3, betas=(0.8, 0.95)), optim.Lion(p, 1e-3, 0.8, 0.95)
    for k in range(3):
        a.step(_grads(p, k))
        b.step(_grads(p, k))
    for x, y in zip(_np(a.params), _np(b.params)):
        np.testing.assert_array_equal(x, y)


def test_pytorch_parameter_groups_are_refused_with_the_alternative():
    p = _params()
    with pytest.raises(TypeError, match="parameter groups .* are not supported; .* "
                       "optim.multi_transform"):
        optim.SGD([{"params": [p["a"]], "lr": 0.01}, {"params": [p["b"]]}], lr=0.1)


def test_a_checkpoint_of_another_optimizer_is_refused():
    p = _params()
    adam = optim.Adam(p, lr=0.1)
    sgd = optim.SGD(p, lr=0.1, momentum=0.9)
    with pytest.raises(TypeError, match="SGD.load_state_dict: unexpected keyword argument "
                       "'beta1' \\(not a hyperparameter of SGD"):
        sgd.load_state_dict(adam.state_dict())


def test_step_refuses_an_argument_no_transformation_takes():
    p = _params()
    opt = optim.SGD(p, lr=0.1)
    g = _grads(p, 0)
    with pytest.raises(TypeError, match="SGD.step: unexpected keyword argument 'closure' "
                       "\\(PyTorch's closure is not supported"):
        opt.step(g, closure=lambda: 0.0)
    plateau = optim.Optimizer(p, lr=0.1, transform=lambda lr: optim.chain(
        optim.sgd(lr), optim.reduce_on_plateau()))
    plateau.step(g, value=1.0)
    with pytest.raises(TypeError, match="'valeu'.*did you mean 'value'"):
        plateau.step(g, valeu=1.0)
    assert opt.timestep == 0 and plateau.timestep == 1
