"""PyTorch's further activations (``elu``, ``selu``, ``celu``, ``hardtanh``, ``relu6``,
``hardsigmoid``, ``hardswish``, ``softplus``, ``softsign``, ``mish``, ``glu``, ``logsigmoid``,
``prelu``) and their module forms, against ``torch.nn.functional`` in float64: values, first
and second derivatives on drawn shapes (size-0 and size-1 dims included) and exactly at every
kink, where the branch taken decides the derivative."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tapegrad as tg
import tapegrad.nn.functional as F
from tapegrad import nn
from tapegrad.testing import check_grads
from tapegrad.testing.strategies import arrays, shapes

torch = pytest.importorskip("torch")
TF = torch.nn.functional

# name -> (tapegrad function, torch function, the points where the function has a kink)
ELEMENTWISE = {
    "elu": (lambda x: F.elu(x, 0.7), lambda x: TF.elu(x, 0.7), [0.0]),
    "elu_default": (F.elu, TF.elu, [0.0]),
    "selu": (F.selu, TF.selu, [0.0]),
    "celu": (lambda x: F.celu(x, 1.5), lambda x: TF.celu(x, 1.5), [0.0]),
    "hardtanh": (lambda x: F.hardtanh(x, -0.5, 2.0), lambda x: TF.hardtanh(x, -0.5, 2.0),
                 [-0.5, 2.0]),
    "relu6": (F.relu6, TF.relu6, [0.0, 6.0]),
    "hardsigmoid": (F.hardsigmoid, TF.hardsigmoid, [-3.0, 3.0]),
    "hardswish": (F.hardswish, TF.hardswish, [-3.0, 3.0]),
    "softplus": (lambda x: F.softplus(x, 2.0, 4.0), lambda x: TF.softplus(x, 2.0, 4.0), []),
    "softsign": (F.softsign, TF.softsign, [0.0]),
    "mish": (F.mish, TF.mish, []),
    "logsigmoid": (F.logsigmoid, TF.logsigmoid, []),
    "prelu": (lambda x: F.prelu(x, tg.Tensor(np.array([0.3]))),
              lambda x: TF.prelu(x, torch.tensor([0.3], dtype=torch.float64)), [0.0]),
}
# torch has no second derivative of hardsigmoid ("not implemented"); it is 0 everywhere
NO_TORCH_SECOND = {"hardsigmoid"}
# torch's hardsigmoid backward multiplies by the float32 constant 1/6 even in float64
D1_RTOL = {"hardsigmoid": 1e-7}


def _torch_derivatives(fn, x: np.ndarray, second: bool):
    """Value, first derivative and (for elementwise fn) second derivative, elementwise."""
    t = torch.tensor(x, requires_grad=True)
    y = fn(t)
    (d1,) = torch.autograd.grad(y.sum(), t, create_graph=second)
    d2 = None
    if second:
        d2 = torch.autograd.grad(d1.sum(), t, allow_unused=True)[0]
        d2 = np.zeros_like(x) if d2 is None else d2.detach().numpy()
    return y.detach().numpy(), d1.detach().numpy(), d2


def _ours_derivatives(fn, x: np.ndarray):
    xt = tg.Tensor(x)
    y = fn(xt)
    d1 = tg.grad(lambda v: fn(v).sum())(xt)
    d2 = tg.grad(lambda v: tg.grad(lambda u: fn(u).sum())(v).sum())(xt)
    return y.numpy(), d1.numpy(), d2.numpy()


def _check(name, x):
    ours, theirs, _ = ELEMENTWISE[name]
    second = name not in NO_TORCH_SECOND
    y, d1, d2 = _ours_derivatives(ours, x)
    ty, td1, td2 = _torch_derivatives(theirs, x, second)
    assert y.shape == ty.shape == x.shape and y.dtype == np.float64
    np.testing.assert_allclose(y, ty, rtol=1e-10, atol=1e-12, err_msg=f"{name} value")
    np.testing.assert_allclose(d1, td1, rtol=D1_RTOL.get(name, 1e-10), atol=1e-12,
                               err_msg=f"{name} d1")
    if second:
        np.testing.assert_allclose(d2, td2, rtol=1e-9, atol=1e-12, err_msg=f"{name} d2")
    else:
        np.testing.assert_array_equal(d2, 0.0)


@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
@settings(max_examples=15, deadline=None, derandomize=True)
@given(data=st.data())
def test_values_and_two_derivatives_match_torch_on_drawn_shapes(name, data):
    shape = data.draw(shapes(0, 3, 0, 4))
    x = data.draw(arrays(shape, elements=st.floats(-8, 8, allow_nan=False)))
    _check(name, x)


@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_derivatives_at_the_kinks_are_torchs(name):
    kinks = ELEMENTWISE[name][2]
    x = np.array(kinks + [k + d for k in kinks for d in (-1e-3, 1e-3)] + [-30.0, -4.0, -1.0,
                                                                           0.5, 4.0, 30.0])
    _check(name, x)


@pytest.mark.parametrize("name", ["elu", "hardswish", "mish", "softsign", "celu"])
def test_second_order_against_finite_differences(name):
    x = tg.Tensor(np.array([-2.3, -0.7, 0.4, 1.9]))  # away from the kinks
    check_grads(ELEMENTWISE[name][0], (x,), order=2)


def test_glu_matches_torch_on_every_axis():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 6))
    for dim in (-1, 0, 1, 2):
        if x.shape[dim] % 2:
            continue
        t = torch.tensor(x, requires_grad=True)
        w = rng.standard_normal(tuple(TF.glu(t, dim).shape))
        (TF.glu(t, dim) * torch.tensor(w)).sum().backward()
        y = F.glu(tg.Tensor(x), dim)
        g = tg.grad(lambda v, dim=dim, w=w: (F.glu(v, dim) * tg.Tensor(w)).sum())(tg.Tensor(x))
        np.testing.assert_allclose(y.numpy(), TF.glu(torch.tensor(x), dim).numpy(), rtol=1e-12)
        np.testing.assert_allclose(g.numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-14)
    assert F.glu(tg.Tensor(np.zeros((3, 0))), -1).shape == (3, 0)
    with pytest.raises(ValueError, match="glu: the size of input along dim 1 must be even"):
        F.glu(tg.Tensor(np.zeros((2, 3))), 1)
    with pytest.raises(ValueError, match="glu: dim=2 is out of range"):
        F.glu(tg.Tensor(np.zeros((2, 4))), 2)
    with pytest.raises(TypeError, match="glu: dim must be an int"):
        F.glu(tg.Tensor(np.zeros((2, 4))), 1.0)


@pytest.mark.parametrize("shape,channels", [((5,), 1), ((), 1), ((4, 3), 3), ((2, 3, 5), 3),
                                            ((2, 1, 4, 4), 1), ((2, 3, 2, 2), 1)])
def test_prelu_per_channel_weights_and_their_gradient_match_torch(shape, channels):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape)
    x.flat[: min(2, x.size)] = 0.0  # the kink: slope weight (PyTorch's)
    w = rng.uniform(0.05, 0.5, channels)
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    g = rng.standard_normal(shape)
    (TF.prelu(tx, tw) * torch.tensor(g)).sum().backward()
    def loss(x, w):
        return (F.prelu(x, w) * tg.Tensor(g)).sum()

    gx, gw = tg.grad(loss, argnums=(0, 1))(tg.Tensor(x), tg.Tensor(w))
    np.testing.assert_allclose(F.prelu(tg.Tensor(x), tg.Tensor(w)).numpy(),
                               TF.prelu(torch.tensor(x), torch.tensor(w)).numpy(), rtol=1e-12)
    np.testing.assert_allclose(gx.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(gw.numpy(), tw.grad.numpy(), rtol=1e-10, atol=1e-14)


def test_prelu_module_learns_torchs_weight():
    layer = nn.PReLU(3, init=0.1, dtype=np.float64)
    assert layer.weight.shape == (3,) and np.all(layer.weight.numpy() == 0.1)
    assert layer.num_parameters() == 3  # Module's count of parameter elements
    x = np.random.default_rng(2).standard_normal((4, 3, 2))
    theirs = torch.nn.PReLU(3, 0.1, dtype=torch.float64)
    np.testing.assert_allclose(layer(tg.Tensor(x)).numpy(),
                               theirs(torch.tensor(x)).detach().numpy(), rtol=1e-12)
    with pytest.raises(ValueError, match="prelu: weight must hold 1 or 2"):
        nn.PReLU(3)(tg.Tensor(np.zeros((4, 2), np.float32)))


MODULES = [
    (lambda: nn.ELU(), lambda: torch.nn.ELU()),
    (lambda: nn.ELU(0.5), lambda: torch.nn.ELU(0.5)),
    (lambda: nn.SELU(), lambda: torch.nn.SELU()),
    (lambda: nn.CELU(2.0), lambda: torch.nn.CELU(2.0)),
    (lambda: nn.Hardtanh(), lambda: torch.nn.Hardtanh()),
    (lambda: nn.Hardtanh(-2, 3), lambda: torch.nn.Hardtanh(-2, 3)),
    (lambda: nn.ReLU6(), lambda: torch.nn.ReLU6()),
    (lambda: nn.Hardsigmoid(), lambda: torch.nn.Hardsigmoid()),
    (lambda: nn.Hardswish(), lambda: torch.nn.Hardswish()),
    (lambda: nn.Softplus(), lambda: torch.nn.Softplus()),
    (lambda: nn.Softplus(2, 10), lambda: torch.nn.Softplus(2, 10)),
    (lambda: nn.Softsign(), lambda: torch.nn.Softsign()),
    (lambda: nn.Mish(), lambda: torch.nn.Mish()),
    (lambda: nn.GLU(), lambda: torch.nn.GLU()),
    (lambda: nn.GLU(0), lambda: torch.nn.GLU(0)),
    (lambda: nn.LogSigmoid(), lambda: torch.nn.LogSigmoid()),
    (lambda: nn.PReLU(), lambda: torch.nn.PReLU()),
    (lambda: nn.PReLU(4, 0.1), lambda: torch.nn.PReLU(4, 0.1)),
]


@pytest.mark.parametrize("make,make_torch", MODULES)
def test_modules_compute_and_print_as_torch(make, make_torch):
    ours, theirs = make(), make_torch().double()
    x = np.random.default_rng(3).standard_normal((2, 4, 6)) * 4
    if isinstance(ours, nn.PReLU):
        ours = type(ours)(ours.weight.shape[0], ours.init, dtype=np.float64)
        with torch.no_grad():
            theirs.weight.copy_(torch.tensor(ours.weight.numpy()))
    np.testing.assert_allclose(ours(tg.Tensor(x)).numpy(),
                               theirs(torch.tensor(x)).detach().numpy(), rtol=1e-10, atol=1e-14)
    assert ours.extra_repr() == theirs.extra_repr()


@pytest.mark.parametrize("make", [
    lambda: nn.ELU(inplace=True), lambda: nn.SELU(inplace=True), lambda: nn.CELU(inplace=True),
    lambda: nn.Hardtanh(inplace=True), lambda: nn.ReLU6(inplace=True),
    lambda: nn.Hardsigmoid(inplace=True), lambda: nn.Hardswish(inplace=True),
    lambda: nn.Mish(inplace=True), lambda: F.elu(tg.Tensor([1.0]), inplace=True),
    lambda: F.relu6(tg.Tensor([1.0]), inplace=True),
    lambda: F.hardtanh(tg.Tensor([1.0]), inplace=True),
])
def test_inplace_is_refused_with_the_reason(make):
    with pytest.raises(ValueError, match="inplace=True is not possible"):
        make()


def test_bad_arguments_name_the_function():
    x = tg.Tensor([1.0])
    with pytest.raises(ValueError, match="hardtanh: min_val \\(2.0\\) must not be greater"):
        F.hardtanh(x, 2.0, 1.0)
    with pytest.raises(ValueError, match="Hardtanh: max_val \\(1\\) must be greater than "
                       "min_val \\(1\\)"):
        nn.Hardtanh(1, 1)
    with pytest.raises(ValueError, match="celu: alpha must be nonzero"):
        F.celu(x, 0.0)
    with pytest.raises(TypeError, match="elu: alpha must be a real number"):
        F.elu(x, "1")
    with pytest.raises(TypeError, match="elu: input must be a floating Tensor"):
        F.elu(tg.Tensor([1, 2]))
    with pytest.raises(ValueError, match="Softplus: beta must be positive"):
        nn.Softplus(beta=0)
    with pytest.raises(TypeError, match="did you mean 'min_val'"):
        nn.Hardtanh(min_vals=0.0)


def test_float32_stays_float32():
    x = tg.Tensor(np.linspace(-5, 5, 11, dtype=np.float32))
    for fn in (F.elu, F.selu, F.celu, F.hardtanh, F.relu6, F.hardsigmoid, F.hardswish,
               F.softsign, F.mish, F.logsigmoid):
        assert fn(x).dtype == np.float32, fn.__name__
