"""Recurrent cells: ``rnn_cell``, ``lstm_cell`` and ``gru_cell``, one step each."""

from __future__ import annotations

from tapegrad import numpy as tnp
from tapegrad.core.tensor import Tensor
from tapegrad.nn._functional._common import _floating, _like
from tapegrad.nn._functional.activations import relu, sigmoid
from tapegrad.nn._functional.affine import linear

__all__ = [
    "rnn_cell",
    "lstm_cell",
    "gru_cell",
]

# Weights use this module's linear layout, ``(in_features, gates * hidden_size)`` (PyTorch
# stores the transpose); the gates are stacked along the last axis in PyTorch's order.
_GATES = {"rnn_tanh": 1, "rnn_relu": 1, "lstm": 4, "gru": 3}


def _cell_inputs(who, input, hx, weight_ih, weight_hh, bias_ih, bias_hh, gates):
    """Validated ``(x, [h...], w_ih, w_hh, b_ih, b_hh, hidden_size)`` for a recurrent cell;
    ``hx`` is the list of its states (``[h]``, or ``[h, c]`` for an LSTM), None for zeros."""
    x = _floating(input, who)
    if x.ndim not in (1, 2):
        raise ValueError(
            f"{who}: input must have shape (batch, input_size) or (input_size,), got {x.shape}"
        )
    w_ih, w_hh = _like(weight_ih, x), _like(weight_hh, x)
    if w_hh.ndim != 2 or w_hh.shape[1] % gates or w_hh.shape[0] * gates != w_hh.shape[1]:
        raise ValueError(
            f"{who}: weight_hh must have shape (hidden_size, {gates} * hidden_size), got "
            f"{w_hh.shape}"
        )
    n_h = w_hh.shape[0]
    if w_ih.shape != (x.shape[-1], gates * n_h):
        raise ValueError(
            f"{who}: weight_ih must have shape (input_size, {gates} * hidden_size) = "
            f"{(x.shape[-1], gates * n_h)} for input {x.shape}, got {w_ih.shape}"
        )
    biases = []
    for name, b in (("bias_ih", bias_ih), ("bias_hh", bias_hh)):
        if b is not None:
            b = _like(b, x)
            if b.shape != (gates * n_h,):
                raise ValueError(f"{who}: {name} must have shape ({gates * n_h},), got {b.shape}")
        biases.append(b)
    states = list(hx)
    want = x.shape[:-1] + (n_h,)
    for i, h in enumerate(states):
        if h is None:
            states[i] = tnp.zeros(want, dtype=x.dtype, device=x.device)
            continue
        states[i] = _like(h, x)
        if states[i].shape != want:
            raise ValueError(
                f"{who}: hidden state must have shape {want} for input {x.shape}, got "
                f"{states[i].shape}"
            )
    return x, states, w_ih, w_hh, biases[0], biases[1], n_h


def _affine(x, w, b):
    return linear(x, w, b) if x.ndim >= 2 or b is None else tnp.matmul(x, w) + b


def _rnn_step(gi, h, w_hh, b_hh, nonlinearity):
    z = gi + _affine(h, w_hh, b_hh)
    return tnp.tanh(z) if nonlinearity == "tanh" else relu(z)


def _lstm_step(gi, h, c, w_hh, b_hh):
    n = h.shape[-1]
    z = gi + _affine(h, w_hh, b_hh)
    i = sigmoid(z[..., :n])
    f = sigmoid(z[..., n : 2 * n])
    g = tnp.tanh(z[..., 2 * n : 3 * n])
    o = sigmoid(z[..., 3 * n :])
    c = f * c + i * g
    return o * tnp.tanh(c), c


def _gru_step(gi, h, w_hh, b_hh):
    n = h.shape[-1]
    gh = _affine(h, w_hh, b_hh)
    r = sigmoid(gi[..., :n] + gh[..., :n])
    z = sigmoid(gi[..., n : 2 * n] + gh[..., n : 2 * n])
    cand = tnp.tanh(gi[..., 2 * n :] + r * gh[..., 2 * n :])
    return cand + z * (h - cand)  # (1 - z) * cand + z * h


def rnn_cell(
    input, hx, weight_ih, weight_hh, bias_ih=None, bias_hh=None, nonlinearity: str = "tanh"
) -> Tensor:
    """One step of an Elman RNN (``torch.nn.RNNCell``'s math, as a pure function).

    ``h' = act(x W_ih + b_ih + h W_hh + b_hh)`` with ``act`` tanh or relu.

    Args:
        input: Floating Tensor ``(batch, input_size)`` or unbatched ``(input_size,)``.
        hx: Hidden state ``(batch, hidden_size)`` (or ``(hidden_size,)``); None means zeros.
        weight_ih: ``(input_size, hidden_size)``.
        weight_hh: ``(hidden_size, hidden_size)``.
        bias_ih, bias_hh: Optional ``(hidden_size,)``.
        nonlinearity: ``"tanh"`` or ``"relu"``.

    Returns:
        The new hidden state, shape of ``hx``, ``input``'s dtype.

    Raises:
        TypeError: for non-floating input. ValueError: for mismatched shapes or another
            ``nonlinearity``.

    References:
        Elman, "Finding Structure in Time", Cognitive Science 14(2), 1990.
    """
    who = "rnn_cell"
    if nonlinearity not in ("tanh", "relu"):
        raise ValueError(f"{who}: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
    x, (h,), w_ih, w_hh, b_ih, b_hh, _ = _cell_inputs(
        who, input, [hx], weight_ih, weight_hh, bias_ih, bias_hh, 1
    )
    return _rnn_step(_affine(x, w_ih, b_ih), h, w_hh, b_hh, nonlinearity)


def lstm_cell(input, hx, weight_ih, weight_hh, bias_ih=None, bias_hh=None) -> tuple:
    """One step of a long short-term memory cell (``torch.nn.LSTMCell``'s math, pure).

    Gates ``[i, f, g, o] = x W_ih + b_ih + h W_hh + b_hh`` (PyTorch's order);
    ``c' = sigmoid(f) c + sigmoid(i) tanh(g)``, ``h' = sigmoid(o) tanh(c')``.

    Args:
        input: Floating Tensor ``(batch, input_size)`` or unbatched ``(input_size,)``.
        hx: ``(h, c)``, each ``(batch, hidden_size)`` (or ``(hidden_size,)``); None (or a None
            entry) means zeros.
        weight_ih: ``(input_size, 4 hidden_size)``.
        weight_hh: ``(hidden_size,
            4 hidden_size)``.
        bias_ih, bias_hh: Optional ``(4 hidden_size,)``.

    Returns:
        ``(h', c')``, each of ``h``'s shape.

    Raises:
        TypeError: for non-floating input. ValueError: for mismatched shapes.

    References:
        Hochreiter and Schmidhuber, "Long Short-Term Memory", Neural Computation, 1997;
        Gers, Schmidhuber and Cummins, "Learning to Forget", Neural Computation, 2000.
    """
    who = "lstm_cell"
    if hx is None:
        hx = (None, None)
    if not isinstance(hx, (tuple, list)) or len(hx) != 2:
        raise TypeError(f"{who}: hx must be a pair (h, c) or None, got {type(hx).__name__}")
    x, (h, c), w_ih, w_hh, b_ih, b_hh, _ = _cell_inputs(
        who, input, hx, weight_ih, weight_hh, bias_ih, bias_hh, 4
    )
    return _lstm_step(_affine(x, w_ih, b_ih), h, c, w_hh, b_hh)


def gru_cell(input, hx, weight_ih, weight_hh, bias_ih=None, bias_hh=None) -> Tensor:
    """One step of a gated recurrent unit (``torch.nn.GRUCell``'s math, pure).

    With ``[r, z, n]`` stacked in PyTorch's order: ``r = sigmoid(x W_ir + b_ir + h W_hr +
    b_hr)``, ``z = sigmoid(x W_iz + b_iz + h W_hz + b_hz)``, ``n = tanh(x W_in + b_in + r *
    (h W_hn + b_hn))``, ``h' = (1 - z) n + z h``. (The reset gate multiplies ``h W_hn + b_hn``
    after the product, as in PyTorch and cuDNN; Cho et al. apply it to ``h`` before.)

    Args:
        input: Floating Tensor ``(batch, input_size)`` or unbatched ``(input_size,)``.
        hx: Hidden state ``(batch, hidden_size)`` (or ``(hidden_size,)``); None means zeros.
        weight_ih: ``(input_size, 3 hidden_size)``.
        weight_hh: ``(hidden_size,
            3 hidden_size)``.
        bias_ih, bias_hh: Optional ``(3 hidden_size,)``.

    Returns:
        The new hidden state, ``hx``'s shape, ``input``'s dtype.

    Raises:
        TypeError: for non-floating input. ValueError: for mismatched shapes.

    References:
        Cho et al., "Learning Phrase Representations using RNN Encoder-Decoder for
        Statistical Machine Translation", EMNLP 2014.
    """
    who = "gru_cell"
    x, (h,), w_ih, w_hh, b_ih, b_hh, _ = _cell_inputs(
        who, input, [hx], weight_ih, weight_hh, bias_ih, bias_hh, 3
    )
    return _gru_step(_affine(x, w_ih, b_ih), h, w_hh, b_hh)
