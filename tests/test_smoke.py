import numpy as np

import tapegrad as tg
import tapegrad.numpy as tnp


def test_grad_of_square_sum():
    x = tg.Tensor([1.0, 2.0, 3.0])
    np.testing.assert_allclose(tg.grad(lambda x: (x * x).sum())(x).numpy(), [2.0, 4.0, 6.0])


def test_siskind_pearlmutter():
    inner = lambda x: tg.grad(lambda y: x + y)(1.0)  # noqa: E731
    assert tg.grad(lambda x: x * inner(x))(1.0) == 1.0


def test_third_derivative_tanh():
    x0 = 0.3
    t = np.tanh(x0)
    expected = -2 * (1 - t**2) * (1 - 3 * t**2)
    got = tg.grad(tg.grad(tg.grad(tnp.tanh)))(tg.Tensor(np.float64(x0)))
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-10)
