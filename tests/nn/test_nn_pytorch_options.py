"""The layers' PyTorch options work with PyTorch's meaning (checked against torch.nn where it
is installed) or raise; none is silently dropped."""

import numpy as np
import pytest

import tapegrad as tg
from tapegrad import nn

RNG = np.random.default_rng(0)


def _T(a):
    return tg.Tensor(np.asarray(a))


@pytest.mark.parametrize("momentum", [0.1, 0.5, None])
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("track", [True, False])
def test_batchnorm_options_match_torch(momentum, affine, track):
    torch = pytest.importorskip("torch")
    ours = nn.BatchNorm(3, momentum=momentum, eps=1e-2, affine=affine,
                        track_running_stats=track, dtype=np.float64)
    theirs = torch.nn.BatchNorm2d(3, eps=1e-2, momentum=momentum, affine=affine,
                                  track_running_stats=track, dtype=torch.float64)
    assert (ours.weight is None) == (not affine)
    assert ("running_mean" in ours.states) == track
    for step in range(4):
        x = RNG.standard_normal((4, 3, 2, 2)) * (step + 1) + step
        np.testing.assert_allclose(ours(_T(x)).numpy(), theirs(torch.tensor(x)).detach().numpy(),
                                   rtol=1e-10, atol=1e-12)
    if track:
        np.testing.assert_allclose(ours.running_mean.numpy(), theirs.running_mean.numpy(),
                                   rtol=1e-10)
        np.testing.assert_allclose(ours.running_var.numpy(), theirs.running_var.numpy(),
                                   rtol=1e-10)
    ours.eval()
    theirs.eval()
    x = RNG.standard_normal((5, 3, 2, 2))
    np.testing.assert_allclose(ours(_T(x)).numpy(), theirs(torch.tensor(x)).detach().numpy(),
                               rtol=1e-10, atol=1e-12)


def test_batchnorm_eps_is_used_and_checked():
    x = _T(RNG.standard_normal((4, 2)))
    small, big = nn.BatchNorm(2, eps=1e-5), nn.BatchNorm(2, eps=10.0)
    assert big.eps == big.epsilon == 10.0
    assert not np.allclose(small(x).numpy(), big(x).numpy())
    with pytest.raises(TypeError, match="BatchNorm: give epsilon or eps"):
        nn.BatchNorm(2, epsilon=1e-3, eps=1e-3)
    with pytest.raises(ValueError, match="BatchNorm: momentum must lie in \\[0, 1\\]"):
        nn.BatchNorm(2, momentum=1.5)
    with pytest.raises(TypeError, match="affine must be a bool"):
        nn.BatchNorm(2, affine="no")


@pytest.mark.parametrize("shape", [4, (3, 4)])
@pytest.mark.parametrize("affine,bias", [(True, True), (True, False), (False, True)])
def test_layernorm_options_match_torch(shape, affine, bias):
    torch = pytest.importorskip("torch")
    ours = nn.LayerNorm(shape, eps=0.5, elementwise_affine=affine, bias=bias, dtype=np.float64)
    theirs = torch.nn.LayerNorm(shape, eps=0.5, elementwise_affine=affine, bias=bias,
                                dtype=torch.float64)
    assert (ours.bias is None) == (not (affine and bias))
    x = RNG.standard_normal((2, 3, 4))
    np.testing.assert_allclose(ours(_T(x)).numpy(), theirs(torch.tensor(x)).detach().numpy(),
                               rtol=1e-10, atol=1e-12)


def test_embedding_padding_idx_is_zero_and_gets_no_gradient_as_torch():
    torch = pytest.importorskip("torch")
    for padding_idx in (1, -2):
        ours = nn.Embedding(5, 3, padding_idx=padding_idx, key=tg.random.key(0),
                            dtype=np.float64)
        row = padding_idx % 5
        np.testing.assert_array_equal(ours.weight.numpy()[row], 0.0)
        theirs = torch.nn.Embedding(5, 3, padding_idx=padding_idx, dtype=torch.float64)
        with torch.no_grad():
            theirs.weight.copy_(torch.tensor(ours.weight.numpy()))
        idx = np.array([[1, 3, 3], [0, row, 4]])
        g = tg.grad(lambda w, m=ours, i=idx: (nn.functional_call(m, {"weight": w}, i)[0] ** 2)
                    .sum())(ours.weight)
        (theirs(torch.tensor(idx)) ** 2).sum().backward()
        np.testing.assert_allclose(g.numpy(), theirs.weight.grad.numpy(), rtol=1e-12)
        assert not g.numpy()[row].any()
    with pytest.raises(ValueError, match="padding_idx must lie in \\[-5, 5\\)"):
        nn.Embedding(5, 3, padding_idx=5)


def test_inplace_is_refused_with_the_reason():
    for make in (lambda: nn.Dropout(0.1, inplace=True), lambda: nn.ReLU(inplace=True),
                 lambda: nn.SiLU(inplace=True), lambda: nn.LeakyReLU(0.1, inplace=True)):
        with pytest.raises(ValueError, match="inplace=True is not possible: tapegrad Tensors "
                           "are immutable"):
            make()
    x = _T([-1.0, 2.0])
    assert nn.ReLU(inplace=False)(x).numpy().tolist() == [0.0, 2.0]
    assert nn.Dropout(0.5, inplace=False).eval()(x) is x


def test_device_and_dtype_are_used_or_refused():
    lin = nn.Linear(2, 3, device="cpu", dtype=np.float64)
    assert lin.weight.dtype == np.float64 and lin.weight.device == "cpu"
    assert nn.Linear(2, 3, dtype=None).weight.dtype == np.float32  # PyTorch's default dtype
    assert nn.Conv2d(1, 2, 3, dtype=np.float64).weight.dtype == np.float64
    with pytest.raises(TypeError, match="Linear: dtype must be a floating dtype"):
        nn.Linear(2, 3, dtype=np.int32)
    with pytest.raises(ValueError, match="device: expected 'cpu', 'cuda' or 'cuda:N'"):
        nn.Linear(2, 3, device="tpu")
    try:
        import cupy  # noqa: F401
    except ImportError:
        with pytest.raises(RuntimeError, match="needs CuPy"):
            nn.Linear(2, 3, device="cuda")
        with pytest.raises(RuntimeError, match="needs CuPy"):
            nn.BatchNorm(3, device="cuda")


@pytest.mark.parametrize("make", [
    lambda **k: nn.Linear(2, 3, **k), lambda **k: nn.Conv1d(1, 2, 3, **k),
    lambda **k: nn.Conv2d(1, 2, 3, **k), lambda **k: nn.ConvTranspose2d(1, 2, 3, **k),
    lambda **k: nn.BatchNorm(2, **k), lambda **k: nn.LayerNorm(2, **k),
    lambda **k: nn.Embedding(3, 2, **k), lambda **k: nn.RMSNorm(2, **k),
    lambda **k: nn.GroupNorm(1, 2, **k), lambda **k: nn.GRU(2, 3, **k),
    lambda **k: nn.LSTMCell(2, 3, **k), lambda **k: nn.MultiHeadAttention(1, 2, **k),
    lambda **k: nn.ResidualBlock(1, 2, **k), lambda **k: nn.RecurrentBlock(2, 3, 1, **k),
])
def test_every_layer_with_parameters_takes_device_and_dtype(make):
    layer = make(device="cpu", dtype=np.float64)
    leaves = list(layer.parameters.values()) + list(layer.states.values())
    assert leaves and all(t.device == "cpu" for t in leaves)
    assert all(t.dtype == np.float64 for t in leaves if t.dtype.kind == "f")


def test_conv_padding_modes():
    x = _T(RNG.standard_normal((1, 1, 5, 5)).astype(np.float32))
    zeros = nn.Conv2d(1, 1, 3, padding=1, padding_mode="zeros", key=tg.random.key(0))
    same = nn.Conv2d(1, 1, 3, padding_mode="same", key=tg.random.key(0))
    np.testing.assert_allclose(zeros(x).numpy(), same(x).numpy(), rtol=1e-6)
    assert nn.Conv2d(1, 1, 3, padding_mode="zeros")(x).shape == (1, 1, 3, 3)  # padding 0
    with pytest.raises(NotImplementedError, match="padding_mode='reflect' is not implemented"):
        nn.Conv2d(1, 1, 3, padding=1, padding_mode="reflect")
    with pytest.raises(ValueError, match="padding_mode='same' and padding=1 both set"):
        nn.Conv2d(1, 1, 3, padding=1, padding_mode="same")


@pytest.mark.parametrize("kw", [dict(ceil_mode=True), dict(ceil_mode=True, padding=1,
                                                           count_include_pad=False),
                                dict(divisor_override=3, stride=1)])
def test_pool2d_layers_take_pytorchs_options(kw):
    torch = pytest.importorskip("torch")
    x = RNG.standard_normal((2, 3, 7, 6))
    ours, theirs = nn.AvgPool2d(3, **kw), torch.nn.AvgPool2d(3, **kw)
    np.testing.assert_allclose(ours(_T(x)).numpy(), theirs(torch.tensor(x)).numpy(), rtol=1e-12)
    kw = dict(dilation=2, ceil_mode=True, stride=2)
    values, idx = nn.MaxPool2d(2, return_indices=True, **kw)(_T(x))
    ref, ref_idx = torch.nn.MaxPool2d(2, return_indices=True, **kw)(torch.tensor(x))
    np.testing.assert_array_equal(values.numpy(), ref.numpy())
    np.testing.assert_array_equal(idx.numpy(), ref_idx.numpy())


@pytest.mark.parametrize("make", [
    lambda **k: nn.PReLU(3, **k), lambda **k: nn.InstanceNorm1d(2, affine=True,
                                                                 track_running_stats=True, **k),
    lambda **k: nn.InstanceNorm2d(2, affine=True, **k), lambda **k: nn.Bilinear(2, 3, 4, **k),
    lambda **k: nn.EmbeddingBag(5, 2, **k), lambda **k: nn.MultiheadAttention(4, 2, **k),
    lambda **k: nn.MultiheadAttention(4, 2, kdim=3, vdim=5, add_bias_kv=True, **k),
    lambda **k: nn.TransformerEncoderLayer(4, 2, 8, **k),
    lambda **k: nn.TransformerDecoderLayer(4, 2, 8, **k),
    lambda **k: nn.Transformer(4, 2, 1, 1, 8, **k),
])
def test_the_pytorch_named_layers_take_device_and_dtype(make):
    layer = make(device="cpu", dtype=np.float64)
    leaves = list(layer.parameters.values()) + list(layer.states.values())
    assert leaves and all(t.device == "cpu" for t in leaves)
    assert all(t.dtype == np.float64 for t in leaves)
    assert all(t.dtype == np.float32 for t in make().parameters.values())  # PyTorch's default
    with pytest.raises(TypeError, match="dtype must be a floating dtype"):
        make(dtype=np.int32)
    with pytest.raises(ValueError, match="device: expected 'cpu', 'cuda' or 'cuda:N'"):
        make(device="tpu")
