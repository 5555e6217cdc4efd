"""Memory as a tape transform: Tape.residual_bytes and checkpoint policies (save_only,
budget_bytes) computed from the recorded program."""

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.testing import check_grads

rng = np.random.default_rng(0)
W = tg.Tensor(rng.standard_normal((6, 6)) / 3)
X = tg.Tensor(rng.standard_normal((4, 6)))
LAYERS = 3


def body(w, x):
    h = x
    for _ in range(LAYERS):
        h = tnp.tanh(h @ w)
    return h


def loss(**policy):
    def f(w, x):
        return tnp.sum(tg.checkpoint(body, **policy)(w, x) ** 2)
    return f


def count(tape, oper):
    return sum(1 for e in tape.entries if getattr(e, "oper", None) == oper)


def test_residual_bytes_by_hand():
    x = tg.Tensor(np.ones((4, 3), np.float32))
    _, tape = tg.trace(lambda x: tnp.sum(tnp.tanh(x * 2.0)))(x)
    r = tape.residual_bytes()
    # tanh keeps its input and output (48 B each); mul keeps x (an input) and a Python 2.0.
    assert (r.residual_bytes, r.input_bytes) == (96, 48)
    assert r.entries == ((1, "tanh", 96),)
    # At tanh's backward: its residuals, the cotangent of its output and of its input.
    assert r.peak_bytes == 96 + 48 + 48
    assert "peak 192 B" in str(r)


def test_residual_bytes_grow_with_depth_and_fall_with_checkpointing():
    def deep(n, ckpt):
        def f(w, x):
            h = x
            for _ in range(n):
                h = (tg.checkpoint(lambda w, h: tnp.tanh(h @ w)) if ckpt else
                     (lambda w, h: tnp.tanh(h @ w)))(w, h)
            return tnp.sum(h)
        return tg.trace(f)(W, X)[1].residual_bytes()

    plain = [deep(n, False).residual_bytes for n in (2, 4)]
    ckpt = [deep(n, True).residual_bytes for n in (2, 4)]
    assert plain[1] > plain[0] and ckpt[1] < plain[1]
    layer = 4 * 6 * 8  # one (4, 6) float64 activation
    assert ckpt[1] == 3 * layer  # only each segment's input (the first one is X, an input)


@pytest.mark.parametrize("policy", [
    {"save_only": {"matmul"}}, {"save_only": {"tanh"}}, {"save_only": set()},
    {"save_only": {"matmul", "tanh"}}, {"budget_bytes": 0}, {"budget_bytes": 600},
    {"budget_bytes": 10**9},
])
def test_policies_keep_values_and_derivatives(policy):
    want = tg.grad(loss(), argnums=(0, 1))(W, X)
    got = tg.grad(loss(**policy), argnums=(0, 1))(W, X)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a.numpy(), b.numpy())
    check_grads(loss(**policy), (W, X), order=2, modes=("rev", "fwd"))


def test_save_only_matmul_recomputes_no_matmul():
    plain = count(tg.trace(tg.grad(loss()))(W, X)[1], "matmul")
    kept = count(tg.trace(tg.grad(loss(save_only={"matmul"})))(W, X)[1], "matmul")
    nothing = count(tg.trace(tg.grad(loss(save_only=set())))(W, X)[1], "matmul")
    assert plain == nothing  # checkpoint() with no policy recomputes every matmul
    assert kept == plain - LAYERS  # the forward's matmuls are not run again


def held_by_checkpoint(policy) -> int:
    """Bytes of residuals the checkpoint entry (entry 0) holds, its inputs excluded."""
    r = tg.trace(loss(**policy))(W, X)[1].residual_bytes()
    return sum(b for i, oper, b in r.entries if oper == "checkpoint")


def test_policy_residuals_are_what_the_checkpoint_holds():
    layer = 4 * 6 * 8
    assert held_by_checkpoint({}) == 0  # only its inputs
    assert held_by_checkpoint({"save_only": {"matmul"}}) == LAYERS * layer
    # matmul and tanh outputs (the last tanh output is the call's output, held once)
    assert held_by_checkpoint({"save_only": {"matmul", "tanh"}}) == 2 * LAYERS * layer


def test_a_byte_budget_prefers_matmul_outputs():
    layer = 4 * 6 * 8
    for budget, kept in ((layer - 1, 0), (2 * layer, 2), (LAYERS * layer, LAYERS)):
        assert held_by_checkpoint({"budget_bytes": budget}) == kept * layer
    plain = count(tg.trace(tg.grad(loss()))(W, X)[1], "matmul")
    got = count(tg.trace(tg.grad(loss(budget_bytes=LAYERS * layer)))(W, X)[1], "matmul")
    assert got == plain - LAYERS  # the budget went to the matmul outputs, not to tanh's


def test_a_byte_budget_ranks_a_transposed_product_by_its_contracted_length():
    """``matmul(a, b, transpose_a=True)`` contracts over ``a``'s first matrix axis: with room
    for one of two residuals of equal size, the budget keeps that product's (1000 terms per
    element) over the plain one's (8 per element)."""
    from tapegrad.core.memory import select_residuals
    from tapegrad.ops import MatMul

    def f(a, b, c, d):
        return tnp.sum(tnp.sin(MatMul.apply(a, b, transpose_a=True)) * tnp.sin(c @ d))

    args = [tg.Tensor(rng.standard_normal(s)) for s in ((1000, 4), (1000, 4), (4, 8), (8, 4))]
    tape = tg.trace(f)(*args)[1]
    entries = [e for e in tape.entries if getattr(e, "fn", None) is MatMul]
    wide = next(e for e in entries if e.params.get("transpose_a")).out_nodes[0]
    assert select_residuals(tape, budget_bytes=4 * 4 * 8) == {wide}


@pytest.mark.parametrize("policy", [{"save_only": {"matmul"}}, {"budget_bytes": 400}])
def test_policies_under_vmap_and_jit(policy):
    xs = tg.Tensor(rng.standard_normal((3, 4, 6)))
    want = np.stack([tg.grad(loss())(W, xs[i]).numpy() for i in range(3)])
    got = tg.vmap(tg.grad(loss(**policy)), in_axes=(None, 0))(W, xs)
    np.testing.assert_allclose(got.numpy(), want)
    g = tg.grad(lambda w: tnp.sum(tg.vmap(loss(**policy), in_axes=(None, 0))(w, xs)))(W)
    np.testing.assert_allclose(g.numpy(), want.sum(0))
    jitted = tg.jit(tg.grad(loss(**policy)))
    np.testing.assert_allclose(jitted(W, X).numpy(), tg.grad(loss())(W, X).numpy())
    np.testing.assert_allclose(jitted(2 * W, X).numpy(), tg.grad(loss())(2 * W, X).numpy())


def test_bad_policies():
    with pytest.raises(TypeError, match="save_only"):
        tg.checkpoint(body, save_only="matmul")
    with pytest.raises(ValueError, match="budget_bytes"):
        tg.checkpoint(body, budget_bytes=-1)


def test_save_only_names_a_reshaped_value_by_the_op_that_computed_it():
    def f(w, x):
        def body(w, x):
            return tnp.sum(tnp.tanh(tnp.reshape(x @ w, (-1,))))
        return tg.checkpoint(body, save_only={"matmul"})(w, x)
    plain = count(tg.trace(tg.grad(lambda w, x: tg.checkpoint(
        lambda w, x: tnp.sum(tnp.tanh(tnp.reshape(x @ w, (-1,)))))(w, x)))(W, X)[1], "matmul")
    kept = count(tg.trace(tg.grad(f))(W, X)[1], "matmul")
    assert kept == plain - 1  # tanh's input is a reshape of the matmul: kept, not recomputed
    check_grads(f, (W, X), order=2, modes=("rev", "fwd"))


def _user_op(name, traits, reduce=False):
    """A user primitive with ``oper`` ``name``: ``x * 1``, or with ``reduce`` the row sums of
    ``x`` (eight inputs per output element)."""

    class Op(tg.Function):
        oper = name

        @staticmethod
        def forward(ctx, x):
            ctx.shape = x.shape
            return x.sum(axis=1) if reduce else x * 1.0

        @staticmethod
        def backward(ctx, g):
            return tnp.broadcast_to(g[:, None], ctx.shape) if reduce else g

    Op.traits = traits
    return Op


@pytest.mark.parametrize("cost", ["dense", "contraction"])
def test_a_byte_budget_reads_the_cost_trait_not_the_op_name(cost):
    """What a budget keeps first follows the op's declared ``cost`` trait: a user op named
    ``matmul`` that declares nothing costs one operation per element, and one with an
    unremarkable name that declares a costly ``cost`` is kept first."""
    from tapegrad.core.function import Traits
    from tapegrad.core.memory import select_residuals

    plain = _user_op("matmul", Traits(), reduce=True)  # a name the cost model keyed on
    costly = _user_op("my_op", Traits(cost=cost), reduce=True)

    def f(x, y):
        return tnp.sum(tnp.sin(plain.apply(x)) * tnp.sin(costly.apply(y)))

    x, y = (tg.Tensor(rng.standard_normal((5, 8))) for _ in range(2))
    tape = tg.trace(f)(x, y)[1]
    out_of = {e.fn: e.out_nodes[0] for e in tape.entries if e.fn in (plain, costly)}
    assert select_residuals(tape, budget_bytes=5 * 8) == {out_of[costly]}


def test_a_residual_that_a_rearranging_op_made_counts_as_what_it_rearranges():
    """``save_only`` names a residual by the op that computed its values through ops whose
    ``rearranges`` trait is set (reshape, transpose, broadcast_to), and only those."""
    from tapegrad.core.function import Traits
    from tapegrad.core.memory import select_residuals

    def run(traits):
        op = _user_op("relabel", traits)

        def f(w, x):
            return tnp.sum(tnp.sin(op.apply(x @ w)))

        tape = tg.trace(f)(W, X)[1]
        return tape, select_residuals(tape, save_only={"matmul"})

    tape, kept = run(Traits(rearranges=True))
    assert kept == {next(e for e in tape.entries if e.oper == "relabel").out_nodes[0]}
    tape, kept = run(Traits())
    assert kept == set()
