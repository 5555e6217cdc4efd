"""PyTorch's attention and Transformer layers against torch in float64: a torch model's
``state_dict`` is copied in with ``load_torch_state_dict``, then outputs and the gradients of
every parameter and input must agree to 1e-10, over PyTorch's options (``batch_first``,
``norm_first``, ``bias``, activations, unbatched inputs, every kind of mask, ``is_causal``),
with batch and sequence sizes drawn (size 1 included). Dropout is checked for its keys."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tapegrad as tg
import tapegrad.nn.functional as F
from tapegrad import nn
from tapegrad.nn.module import _named_leaves
from tapegrad.testing import check_grads

torch = pytest.importorskip("torch")
SETTINGS = settings(max_examples=10, deadline=None, derandomize=True)


def quiet(make):
    """Build a torch module without its advice about its inference fast path (a warning)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return make()


def _T(a):
    return tg.Tensor(np.asarray(a))


def _tt(a):
    return None if a is None else torch.tensor(np.asarray(a))


def _as_torch_layout(name: str, g: np.ndarray) -> np.ndarray:
    """Our gradient of parameter ``name`` in PyTorch's layout: every 2-D parameter of these
    layers is a projection weight, stored transposed."""
    return g.T if g.ndim == 2 else g


def compare(theirs, ours, inputs, run_torch, run_ours, rtol=1e-10, atol=1e-12):
    """Copy ``theirs``' weights into ``ours``; outputs and the gradients of every parameter
    and input (for a random cotangent) must agree."""
    ours.load_torch_state_dict(theirs.state_dict())
    theirs.zero_grad()
    ts = [torch.tensor(a, requires_grad=True) for a in inputs]
    out_t = run_torch(theirs, *ts)
    w = np.random.default_rng(1).standard_normal(tuple(out_t.shape))
    (out_t * torch.tensor(w)).sum().backward()

    def loss(params, xs):
        def call(*a, **k):
            return nn.functional_call(ours, params, *a, **k)[0]

        out = run_ours(call, *xs)
        return (out * _T(w)).sum(), out

    (_, out), (g_params, g_inputs) = tg.value_and_grad(loss, argnums=(0, 1), has_aux=True)(
        ours.params, [_T(a) for a in inputs])
    assert out.shape == tuple(out_t.shape)
    np.testing.assert_allclose(out.numpy(), out_t.detach().numpy(), rtol=rtol, atol=atol)
    ours_g = dict(_named_leaves(g_params))
    want = {n: p.grad for n, p in theirs.named_parameters()}
    assert set(ours_g) == set(want)
    for name, g in want.items():
        got = _as_torch_layout(name, ours_g[name].numpy())
        expected = np.zeros(got.shape) if g is None else g.numpy()
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol, err_msg=name)
    for t, g in zip(ts, g_inputs):
        np.testing.assert_allclose(g.numpy(), t.grad.numpy(), rtol=rtol, atol=atol)
    return out


def _layout(x, batch_first, batched=True):
    """``x`` ``(N, L, E)`` in the layer's layout."""
    if not batched:
        return x[0]
    return x if batch_first else np.swapaxes(x, 0, 1)


# -- MultiheadAttention ----------------------------------------------------------------------------
@SETTINGS
@given(n=st.integers(1, 3), lq=st.integers(1, 4), s=st.integers(1, 4),
       heads=st.sampled_from([1, 2]), batch_first=st.booleans(), batched=st.booleans(),
       need_weights=st.booleans(), average=st.booleans(), self_attention=st.booleans(),
       bias=st.booleans(), mask=st.sampled_from([None, "bool", "float", "3d"]),
       padding=st.sampled_from([None, "bool", "float"]), causal=st.booleans())
def test_multihead_attention_matches_torch(n, lq, s, heads, batch_first, batched, need_weights,
                                           average, self_attention, bias, mask, padding, causal):
    e = 4
    rng = np.random.default_rng(lq * 10 + s)
    if self_attention:
        s = lq
    if not batched:
        n = 1
    theirs = torch.nn.MultiheadAttention(e, heads, bias=bias, batch_first=batch_first,
                                         dtype=torch.float64)
    ours = nn.MultiheadAttention(e, heads, bias=bias, batch_first=batch_first,
                                 dtype=np.float64, key=tg.random.key(0))
    q = rng.standard_normal((n, lq, e))
    kv = q if self_attention else rng.standard_normal((n, s, e))
    allowed = np.ones((lq, s), bool)
    attn_mask = None
    if mask is not None:
        allowed = rng.random((lq, s)) < 0.7
        allowed[:, 0] = True  # every query keeps a key: PyTorch's need_weights path gives NaN
        if mask == "bool":
            attn_mask = ~allowed
        elif mask == "float":
            attn_mask = np.where(allowed, rng.standard_normal((lq, s)), -np.inf)
        else:  # (N * heads, L, S), floating, one per batch entry and head
            attn_mask = np.where(allowed, 0.0, -np.inf) + rng.standard_normal((n * heads, lq, s))
    kpm = None
    if padding is not None:
        pad = np.zeros((n, s), bool)
        pad[:, s - 1:] = s > 1 and not causal  # keep column 0 for every query
        kpm = pad if padding == "bool" else np.where(pad, -np.inf, 0.0)
        if not batched:
            kpm = kpm[0]
    if padding is not None and mask is not None and (padding == "bool") != (mask == "bool"):
        kpm = None  # PyTorch deprecates (and warns about) mixed mask kinds
    t_mask = attn_mask
    if causal:  # PyTorch needs the mask itself; the flag alone adds it here
        cm = np.triu(np.ones((lq, s), bool), 1)
        if attn_mask is None:
            t_mask = cm
        elif attn_mask.dtype == bool:
            t_mask = attn_mask | cm
        else:
            t_mask = attn_mask + np.where(cm, -np.inf, 0.0)

    def run_torch(m, *xs):
        x_q, x_kv = (xs[0], xs[0]) if self_attention else xs
        out, wts = m(x_q, x_kv, x_kv, key_padding_mask=_tt(kpm), attn_mask=_tt(t_mask),
                     need_weights=need_weights, average_attn_weights=average)
        return out if wts is None else torch.cat([out.reshape(-1), wts.reshape(-1)])

    def run_ours(call, *xs):
        x_q, x_kv = (xs[0], xs[0]) if self_attention else xs
        out, wts = call(x_q, x_kv, x_kv, key_padding_mask=kpm, attn_mask=attn_mask,
                        need_weights=need_weights, average_attn_weights=average,
                        is_causal=causal)
        assert (wts is None) == (not need_weights)
        if wts is None:
            return out
        return tg.numpy.concatenate([tg.numpy.reshape(out, (-1,)), tg.numpy.reshape(wts, (-1,))])

    inputs = [_layout(q, batch_first, batched)]
    if not self_attention:
        inputs.append(_layout(kv, batch_first, batched))
    compare(theirs, ours, inputs, run_torch, run_ours)


@pytest.mark.parametrize("kw", [dict(add_bias_kv=True), dict(add_zero_attn=True),
                                dict(add_bias_kv=True, add_zero_attn=True),
                                dict(kdim=3, vdim=5), dict(kdim=3, vdim=5, bias=False)])
@pytest.mark.parametrize("need_weights", [False, True])
def test_multihead_attention_options_match_torch(kw, need_weights):
    rng = np.random.default_rng(0)
    theirs = torch.nn.MultiheadAttention(6, 3, dtype=torch.float64, **kw)
    ours = nn.MultiheadAttention(6, 3, dtype=np.float64, **kw)
    assert {k: tuple(v.shape) for k, v in _named_leaves(ours.params)} == {
        k: tuple(v.T.shape if v.ndim == 2 else v.shape) for k, v in theirs.state_dict().items()}
    q = rng.standard_normal((4, 2, 6))
    k = rng.standard_normal((5, 2, kw.get("kdim", 6)))
    v = rng.standard_normal((5, 2, kw.get("vdim", 6)))
    mask = rng.random((4, 5)) < 0.3
    mask[:, 0] = False

    def run_torch(m, q, k, v):
        out, wts = m(q, k, v, attn_mask=torch.tensor(mask), need_weights=need_weights)
        return out if wts is None else torch.cat([out.reshape(-1), wts.reshape(-1)])

    def run_ours(call, q, k, v):
        out, wts = call(q, k, v, attn_mask=mask, need_weights=need_weights)
        if wts is None:
            return out
        return tg.numpy.concatenate([tg.numpy.reshape(out, (-1,)), tg.numpy.reshape(wts, (-1,))])

    compare(theirs, ours, [q, k, v], run_torch, run_ours)


def test_multihead_attention_init_is_torchs():
    mha = nn.MultiheadAttention(16, 4, add_bias_kv=True, key=tg.random.key(0))
    w = mha.in_proj_weight.numpy()
    assert w.shape == (16, 48) and np.abs(w).max() <= np.sqrt(6 / 64)  # Xavier of (3E, E)
    assert np.abs(w).max() > 0.8 * np.sqrt(6 / 64)
    assert not mha.in_proj_bias.numpy().any() and not mha.out_proj.bias.numpy().any()
    assert np.abs(mha.out_proj.weight.numpy()).max() <= 1 / 4  # U(-1/sqrt(E), 1/sqrt(E))
    assert mha.bias_k.shape == (1, 1, 16)


def test_a_query_with_every_key_masked_gets_zero_attention():
    mha = nn.MultiheadAttention(4, 2, batch_first=True, dtype=np.float64, key=tg.random.key(0))
    x = tg.random.normal(tg.random.key(1), (2, 3, 4), np.float64)
    kpm = np.array([[True, True, True], [False, False, True]])
    for need_weights in (False, True):
        out, wts = mha(x, x, x, key_padding_mask=kpm, need_weights=need_weights)
        assert np.all(np.isfinite(out.numpy()))
        np.testing.assert_allclose(out.numpy()[0], 0.0)  # only the (zero) output bias
        if need_weights:
            np.testing.assert_array_equal(wts.numpy()[0], 0.0)
            np.testing.assert_allclose(wts.numpy()[1].sum(-1), 1.0)
    g = tg.grad(lambda x: mha(x, x, x, key_padding_mask=kpm, need_weights=False)[0].sum())(x)
    assert np.all(np.isfinite(g.numpy()))
    theirs = torch.nn.MultiheadAttention(4, 2, batch_first=True, dtype=torch.float64)
    mha.load_torch_state_dict(theirs.state_dict())
    want = theirs(*[torch.tensor(x.numpy())] * 3, key_padding_mask=torch.tensor(kpm),
                  need_weights=False)[0]
    np.testing.assert_allclose(mha(x, x, x, key_padding_mask=kpm, need_weights=False)[0].numpy(),
                               want.detach().numpy(), rtol=1e-10, atol=1e-12)


def test_a_jitted_mask_input_may_mask_every_key_at_a_later_call():
    mha = nn.MultiheadAttention(4, 2, batch_first=True, dtype=np.float64, key=tg.random.key(0))
    x = tg.random.normal(tg.random.key(1), (2, 3, 4), np.float64)
    attend = tg.jit(lambda x, kpm: mha(x, x, x, key_padding_mask=kpm, need_weights=False)[0])
    for kpm in (np.zeros((2, 3), bool), np.array([[True] * 3, [False, True, True]])):
        want = mha(x, x, x, key_padding_mask=kpm, need_weights=False)[0]
        np.testing.assert_allclose(attend(x, tg.Tensor(kpm)).numpy(), want.numpy(), rtol=1e-12)
    assert attend.cache_size() == 1  # the second call replayed the first one's program


def test_is_causal_alone_applies_the_causal_mask():
    layer = nn.MultiheadAttention(4, 2, dtype=np.float64, key=tg.random.key(0))
    x = tg.random.normal(tg.random.key(1), (5, 2, 4), np.float64)
    mask = nn.Transformer.generate_square_subsequent_mask(5, dtype=np.float64)
    a = layer(x, x, x, is_causal=True, need_weights=False)[0]
    b = layer(x, x, x, attn_mask=mask, need_weights=False)[0]
    c = layer(x, x, x, attn_mask=mask, is_causal=True, need_weights=False)[0]
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12)
    np.testing.assert_allclose(c.numpy(), b.numpy(), rtol=1e-12)
    first = layer(x[:1], x[:1], x[:1], need_weights=False)[0]  # position 0 sees only itself
    np.testing.assert_allclose(a.numpy()[0], first.numpy()[0], rtol=1e-12)


def test_multihead_attention_errors():
    mha = nn.MultiheadAttention(4, 2)
    x = tg.random.normal(tg.random.key(0), (3, 2, 4))
    with pytest.raises(ValueError, match="MultiheadAttention: a 2-D attn_mask must have shape"):
        mha(x, x, x, attn_mask=np.zeros((2, 3), bool))
    with pytest.raises(ValueError, match="key_padding_mask must have shape \\(N, S\\)"):
        mha(x, x, x, key_padding_mask=np.zeros((3, 2), bool))
    with pytest.raises(TypeError, match="attn_mask must be a boolean mask"):
        mha(x, x, x, attn_mask=np.zeros((3, 3), np.int64))
    with pytest.raises(ValueError, match="query .* do not fit"):
        mha(x, x, tg.random.normal(tg.random.key(0), (3, 2, 5)))
    with pytest.raises(ValueError, match="num_heads=3 must divide embed_dim=4"):
        nn.MultiheadAttention(4, 3)
    with pytest.raises(TypeError, match="MultiheadAttention: unexpected keyword argument "
                       "'hidden_size'"):
        nn.MultiheadAttention(4, 2, hidden_size=4)


# -- encoder and decoder layers --------------------------------------------------------------------
ACTIVATIONS = {
    "relu": ("relu", "relu"),
    "gelu": ("gelu", "gelu"),
    "function": (F.silu, torch.nn.functional.silu),
    "module": (lambda: nn.Tanh(), lambda: torch.nn.Tanh()),
}


def _activation(name, side):
    a = ACTIVATIONS[name][side]
    return a() if name == "module" else a


@SETTINGS
@given(n=st.integers(1, 3), length=st.integers(1, 5), batch_first=st.booleans(),
       batched=st.booleans(), norm_first=st.booleans(), bias=st.booleans(),
       activation=st.sampled_from(sorted(ACTIVATIONS)),
       mask=st.sampled_from([None, "causal_flag", "bool", "float"]), padding=st.booleans())
def test_encoder_layer_matches_torch(n, length, batch_first, batched, norm_first, bias,
                                     activation, mask, padding):
    rng = np.random.default_rng(n * 7 + length)
    if not batched:
        n = 1
    kw = dict(dim_feedforward=12, dropout=0.0, layer_norm_eps=1e-4, batch_first=batch_first,
              norm_first=norm_first, bias=bias)
    theirs = torch.nn.TransformerEncoderLayer(8, 2, activation=_activation(activation, 1),
                                              dtype=torch.float64, **kw)
    ours = nn.TransformerEncoderLayer(8, 2, activation=_activation(activation, 0),
                                      dtype=np.float64, key=tg.random.key(1), **kw)
    x = _layout(rng.standard_normal((n, length, 8)), batch_first, batched)
    causal = np.triu(np.ones((length, length), bool), 1)
    src_mask = {None: None, "causal_flag": None, "bool": causal,
                "float": np.where(causal, -np.inf, rng.standard_normal((length, length)))}[mask]
    t_mask = causal if mask == "causal_flag" else src_mask
    kpm = None
    if padding:
        kpm = np.zeros((n, length), bool)
        kpm[0, 1:] = True  # the first key of every sequence stays visible
        if mask == "float":
            kpm = np.where(kpm, -np.inf, 0.0)
        if not batched:
            kpm = kpm[0]
    compare(theirs, ours, [x],
            lambda m, x: m(x, src_mask=_tt(t_mask), src_key_padding_mask=_tt(kpm),
                           is_causal=mask == "causal_flag"),
            lambda call, x: call(x, src_mask=src_mask, src_key_padding_mask=kpm,
                                 is_causal=mask == "causal_flag"))


@SETTINGS
@given(n=st.integers(1, 2), t=st.integers(1, 4), s=st.integers(1, 4), batch_first=st.booleans(),
       batched=st.booleans(), norm_first=st.booleans(), bias=st.booleans(),
       activation=st.sampled_from(sorted(ACTIVATIONS)), masks=st.booleans())
def test_decoder_layer_matches_torch(n, t, s, batch_first, batched, norm_first, bias, activation,
                                     masks):
    rng = np.random.default_rng(n + 10 * t + 100 * s)
    if not batched:
        n = 1
    kw = dict(dim_feedforward=12, dropout=0.0, batch_first=batch_first, norm_first=norm_first,
              bias=bias)
    theirs = torch.nn.TransformerDecoderLayer(8, 2, activation=_activation(activation, 1),
                                              dtype=torch.float64, **kw)
    ours = nn.TransformerDecoderLayer(8, 2, activation=_activation(activation, 0),
                                      dtype=np.float64, key=tg.random.key(2), **kw)
    tgt = _layout(rng.standard_normal((n, t, 8)), batch_first, batched)
    mem = _layout(rng.standard_normal((n, s, 8)), batch_first, batched)
    m = {}
    if masks:
        mm = rng.random((t, s)) < 0.4
        mm[:, 0] = False
        mpad = np.zeros((n, s), bool)
        mpad[:, 1:] = rng.random((n, s - 1)) < 0.5
        tpad = np.zeros((n, t), bool)
        m = dict(tgt_mask=np.triu(np.ones((t, t), bool), 1), memory_mask=mm,
                 memory_key_padding_mask=mpad if batched else mpad[0],
                 tgt_key_padding_mask=tpad if batched else tpad[0])
    compare(theirs, ours, [tgt, mem],
            lambda mod, a, b: mod(a, b, **{k: _tt(v) for k, v in m.items()}),
            lambda call, a, b: call(a, b, **m))


@pytest.mark.parametrize("norm", [False, True])
@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_and_decoder_stacks_match_torch(norm, norm_first):
    rng = np.random.default_rng(3)
    kw = dict(dim_feedforward=16, dropout=0.0, norm_first=norm_first, batch_first=True)
    t_enc = quiet(lambda: torch.nn.TransformerEncoder(
        torch.nn.TransformerEncoderLayer(8, 4, dtype=torch.float64, **kw), 3,
        torch.nn.LayerNorm(8, dtype=torch.float64) if norm else None))
    o_enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 4, dtype=np.float64, **kw), 3,
                                  nn.LayerNorm(8, dtype=np.float64) if norm else None)
    x = rng.standard_normal((2, 5, 8))
    mask = nn.Transformer.generate_square_subsequent_mask(5, dtype=np.float64).numpy()
    kpm = np.where([[False] * 5, [False, False, False, True, True]], -np.inf, 0.0)
    compare(t_enc, o_enc, [x],
            lambda m, x: m(x, mask=torch.tensor(mask), src_key_padding_mask=torch.tensor(kpm)),
            lambda call, x: call(x, mask=mask, src_key_padding_mask=kpm))
    t_dec = torch.nn.TransformerDecoder(
        torch.nn.TransformerDecoderLayer(8, 4, dtype=torch.float64, **kw), 2,
        torch.nn.LayerNorm(8, dtype=torch.float64) if norm else None)
    o_dec = nn.TransformerDecoder(nn.TransformerDecoderLayer(8, 4, dtype=np.float64, **kw), 2,
                                  nn.LayerNorm(8, dtype=np.float64) if norm else None)
    tgt = rng.standard_normal((2, 3, 8))
    tmask = nn.Transformer.generate_square_subsequent_mask(3, dtype=np.float64).numpy()
    compare(t_dec, o_dec, [tgt, x],
            lambda m, a, b: m(a, b, tgt_mask=torch.tensor(tmask), tgt_is_causal=True,
                              memory_key_padding_mask=torch.tensor(kpm)),
            lambda call, a, b: call(a, b, tgt_mask=tmask, tgt_is_causal=True,
                                    memory_key_padding_mask=kpm))


@pytest.mark.parametrize("batch_first", [False, True])
def test_transformer_matches_torch(batch_first):
    rng = np.random.default_rng(4)
    kw = dict(d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=1,
              dim_feedforward=16, dropout=0.0, batch_first=batch_first, activation="gelu")
    theirs = quiet(lambda: torch.nn.Transformer(dtype=torch.float64, **kw))
    ours = nn.Transformer(dtype=np.float64, key=tg.random.key(5), **kw)
    src = _layout(rng.standard_normal((3, 6, 8)), batch_first)
    tgt = _layout(rng.standard_normal((3, 4, 8)), batch_first)
    tgt_mask = torch.nn.Transformer.generate_square_subsequent_mask(4, dtype=torch.float64)
    np.testing.assert_array_equal(
        nn.Transformer.generate_square_subsequent_mask(4, dtype=np.float64).numpy(),
        tgt_mask.numpy())
    spad = np.zeros((3, 6))
    spad[1, 4:] = -np.inf  # float, as tgt_mask (PyTorch warns about mixed kinds)
    compare(theirs, ours, [src, tgt],
            lambda m, s, t: m(s, t, tgt_mask=tgt_mask, src_key_padding_mask=torch.tensor(spad),
                              memory_key_padding_mask=torch.tensor(spad)),
            lambda call, s, t: call(s, t, tgt_mask=tgt_mask.numpy(), src_key_padding_mask=spad,
                                    memory_key_padding_mask=spad))


def test_unbatched_transformer_matches_torch():
    rng = np.random.default_rng(5)
    kw = dict(d_model=4, nhead=1, num_encoder_layers=1, num_decoder_layers=1,
              dim_feedforward=8, dropout=0.0)
    theirs = quiet(lambda: torch.nn.Transformer(dtype=torch.float64, **kw))
    ours = nn.Transformer(dtype=np.float64, **kw)
    compare(theirs, ours, [rng.standard_normal((1, 4)), rng.standard_normal((2, 4))],
            lambda m, s, t: m(s, t), lambda call, s, t: call(s, t))


# -- parameters, init, state dicts --------------------------------------------------------------
def test_parameter_names_and_shapes_are_torchs_with_projection_weights_transposed():
    for ours, theirs in [
        (nn.TransformerEncoderLayer(8, 2, 16), torch.nn.TransformerEncoderLayer(8, 2, 16)),
        (nn.TransformerDecoderLayer(8, 2, 16, bias=False),
         torch.nn.TransformerDecoderLayer(8, 2, 16, bias=False)),
        (nn.Transformer(8, 2, 1, 2, 16), quiet(lambda: torch.nn.Transformer(8, 2, 1, 2, 16))),
    ]:
        got = {k: v.shape for k, v in _named_leaves(ours.params)}
        want = {k: tuple(v.shape)[::-1] for k, v in theirs.state_dict().items()}
        assert got == want
        assert ours.state == {} or not list(_named_leaves(ours.state))


def test_init_follows_torch():
    layer = nn.TransformerEncoderLayer(16, 4, 64, key=tg.random.key(0))
    w1, b1 = layer.linear1.weight.numpy(), layer.linear1.bias.numpy()
    assert np.abs(w1).max() <= 1 / 4 and np.abs(b1).max() <= 1 / 4 and b1.any()  # U(+-1/sqrt(in))
    assert np.abs(layer.linear2.weight.numpy()).max() <= 1 / 8
    model = nn.Transformer(16, 4, 2, 1, 32, key=tg.random.key(1))
    a = model.encoder.layers[0].linear1.weight.numpy()
    b = model.encoder.layers[1].linear1.weight.numpy()
    assert not np.array_equal(a, b)  # re-drawn Xavier-uniform for every matrix
    assert np.abs(a).max() <= np.sqrt(6 / 48)
    enc = nn.TransformerEncoder(layer, 2)
    np.testing.assert_array_equal(enc.layers[0].linear1.weight.numpy(),
                                  enc.layers[1].linear1.weight.numpy())  # copies, as PyTorch
    same = nn.Transformer(16, 4, 2, 1, 32, key=tg.random.key(1))
    for x, y in zip(tg.tree.tree_leaves(model.params), tg.tree.tree_leaves(same.params)):
        np.testing.assert_array_equal(x.numpy(), y.numpy())


def test_load_torch_state_dict_reports_every_problem():
    ours = nn.TransformerEncoderLayer(8, 2, 16)
    sd = torch.nn.TransformerEncoderLayer(8, 2, 16).state_dict()
    bad = dict(sd)
    del bad["linear1.bias"]
    bad["norm1.weight"] = torch.zeros(5)
    bad["extra.weight"] = torch.zeros(2)
    with pytest.raises(ValueError) as e:
        ours.load_torch_state_dict(bad)
    msg = str(e.value)
    assert "missing parameters: linear1.bias" in msg and "extra.weight" in msg
    assert "norm1.weight: checkpoint (5,), module (8,)" in msg
    before = ours.linear1.weight.numpy().copy()
    np.testing.assert_array_equal(ours.linear1.weight.numpy(), before)  # nothing loaded
    with pytest.raises(TypeError, match="expected a mapping"):
        ours.load_torch_state_dict([1, 2])
    ours.load_torch_state_dict(sd)
    np.testing.assert_array_equal(ours.linear1.weight.numpy(), sd["linear1.weight"].numpy().T)
    assert ours.linear1.weight.dtype == np.float32


# -- dropout and modes -----------------------------------------------------------------------------
def test_dropout_uses_explicit_keys_and_is_off_in_eval():
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.3, batch_first=True,
                                       key=tg.random.key(0))
    x = tg.random.normal(tg.random.key(1), (2, 5, 8))
    k = tg.random.key(2)
    a, _ = nn.functional_call(layer, layer.params, x, key=k)
    b, _ = nn.functional_call(layer, layer.params, x, key=k)
    c, _ = nn.functional_call(layer, layer.params, x, key=tg.random.key(3))
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert not np.allclose(a.numpy(), c.numpy())
    assert not np.allclose(layer(x).numpy(), layer(x).numpy())  # stateful: a new key per call
    layer.eval()
    np.testing.assert_array_equal(layer(x).numpy(), layer(x).numpy())
    with pytest.raises(ValueError, match="pass key=tg.random.key"):
        nn.functional_call(layer.train(), layer.params, x)


def test_stacked_copies_draw_their_own_dropout_masks():
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.5, key=tg.random.key(0))
    enc = nn.TransformerEncoder(layer, 3)
    keys = [tuple(m.dropout._rng.numpy().ravel()) for m in enc.layers]
    assert len(set(keys)) == 3


def test_second_derivatives_of_an_encoder_layer():
    layer = nn.TransformerEncoderLayer(4, 2, 6, dropout=0.0, activation="gelu", norm_first=True,
                                       dtype=np.float64, key=tg.random.key(0))
    x = tg.random.normal(tg.random.key(1), (3, 1, 4), np.float64)
    check_grads(lambda x: layer(x, is_causal=True), (x,), order=2)


def test_jit_gives_the_eager_result():
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True,
                                       key=tg.random.key(0))
    x = tg.random.normal(tg.random.key(1), (2, 5, 8))
    fast = tg.jit(lambda x: layer(x, is_causal=True))
    np.testing.assert_allclose(fast(x).numpy(), layer(x, is_causal=True).numpy(), rtol=1e-6)


def test_transformer_errors():
    with pytest.raises(ValueError, match="TransformerEncoderLayer: nhead=3 must divide "
                       "d_model=8"):
        nn.TransformerEncoderLayer(8, 3)
    with pytest.raises(ValueError, match="activation should be 'relu' or 'gelu'"):
        nn.TransformerEncoderLayer(8, 2, activation="tanh")
    with pytest.raises(TypeError, match="TransformerEncoder: encoder_layer \\(the layer to "
                       "stack\\) must be a Module"):
        nn.TransformerEncoder("layer", 2)
    model = nn.Transformer(8, 2, 1, 1, 16)
    with pytest.raises(ValueError, match="Transformer: src .* and tgt .* must have the same batch"):
        model(tg.random.normal(tg.random.key(0), (4, 2, 8)),
              tg.random.normal(tg.random.key(0), (4, 3, 8)))
    with pytest.raises(ValueError, match="must equal d_model=8"):
        model(tg.random.normal(tg.random.key(0), (4, 2, 6)),
              tg.random.normal(tg.random.key(0), (4, 2, 6)))


def test_print_shows_pytorchs_tree():
    """The layers print as PyTorch's do, but for two names of PyTorch's own submodules: its
    ``NonDynamicallyQuantizableLinear`` projection and its ``Dropout``'s ``inplace=False``."""
    import re

    for ours, theirs in [
        (nn.TransformerEncoderLayer(4, 2, 8, activation=nn.GELU()),
         torch.nn.TransformerEncoderLayer(4, 2, 8, activation=torch.nn.GELU())),
        (nn.TransformerDecoder(nn.TransformerDecoderLayer(4, 2, 8, norm_first=True), 2,
                               nn.LayerNorm(4)),
         torch.nn.TransformerDecoder(torch.nn.TransformerDecoderLayer(4, 2, 8, norm_first=True),
                                     2, torch.nn.LayerNorm(4))),
        (nn.Transformer(8, 2, 1, 1, 16), quiet(lambda: torch.nn.Transformer(8, 2, 1, 1, 16))),
        (nn.MultiheadAttention(4, 2, bias=False), torch.nn.MultiheadAttention(4, 2, bias=False)),
    ]:
        want = repr(theirs).replace("NonDynamicallyQuantizableLinear", "Linear")
        want = re.sub(r"Dropout\(p=([0-9.]+), inplace=False\)", r"Dropout(p=\1)", want)
        if isinstance(theirs, torch.nn.TransformerDecoder):  # PyTorch prints 2 equal copies
            want = re.sub(r"\(0-1\): 2 x ", "(0): ", want)
            assert "(0): TransformerDecoderLayer" in want
            ours_text = re.sub(r"\n    \(1\): TransformerDecoderLayer\(.*?\n    \)", "",
                               repr(ours), flags=re.S)
            assert ours_text == want
        else:
            assert repr(ours) == want
