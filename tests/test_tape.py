import shutil
import sys
import threading

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.testing import check_grads


def f64(x):
    return tg.Tensor(np.asarray(x, dtype=np.float64))


def f(a, b):
    return tnp.tanh(a @ b).sum() * 2.0


def test_tape_is_frozen_and_lists_one_line_per_entry():
    a, b = f64(np.ones((2, 3))), f64(np.ones((3, 2)))
    out, tape = tg.trace(f)(a, b)
    assert isinstance(tape, tg.Tape) and len(tape) == 4
    text = str(tape)
    lines = text.splitlines()
    assert lines[0] == "{ lambda ; a:f64[2,3] b:f64[3,2]. let"
    assert lines[1] == "    c:f64[2,2] = matmul a b"
    assert lines[2] == "    d:f64[2,2] = tanh c"
    assert lines[-1] == "  in (f) }"
    with pytest.raises(AttributeError):
        tape.entries = ()
    assert all(isinstance(e, tg.TapeEntry) for e in tape.entries)


def test_labels_show_in_listing():
    _, tape = tg.trace(lambda w: (w * 2.0).sum())(tg.Tensor([1.0], label="w"))
    assert "a<w>:f32[1]" in str(tape)


def test_replay_forward_on_new_inputs():
    rng = np.random.default_rng(1)
    a, b = f64(rng.standard_normal((2, 3))), f64(rng.standard_normal((3, 2)))
    _, tape = tg.trace(f)(a, b)
    a2, b2 = f64(rng.standard_normal((2, 3))), f64(rng.standard_normal((3, 2)))
    np.testing.assert_allclose(tape.replay(a2, b2).numpy(), f(a2, b2).numpy(), rtol=1e-15)
    # identical results when replayed twice
    np.testing.assert_array_equal(tape.replay(a2, b2).numpy(), tape.replay(a2, b2).numpy())


def test_replay_of_a_gradient_tape_runs_forward_rules_only():
    rng = np.random.default_rng(2)
    w = f64(rng.standard_normal(4))
    loss = lambda w: (tnp.sin(w) * w).sum()  # noqa: E731
    _, tape = tg.trace(tg.grad(loss))(w)
    w2 = f64(rng.standard_normal(4))
    np.testing.assert_allclose(tape.replay(w2).numpy(), tg.grad(loss)(w2).numpy(), rtol=1e-14)


def test_replay_rejects_other_shapes_dtypes_and_structure():
    _, tape = tg.trace(f)(f64(np.ones((2, 3))), f64(np.ones((3, 2))))
    with pytest.raises(ValueError, match=r"shape \(3, 3\).*recorded for shape \(2, 3\)"):
        tape.replay(f64(np.ones((3, 3))), f64(np.ones((3, 2))))
    with pytest.raises(ValueError, match="float32.*float64"):
        tape.replay(tg.Tensor(np.ones((2, 3), np.float32)), f64(np.ones((3, 2))))
    with pytest.raises(ValueError, match="structure"):
        tape.replay(f64(np.ones((2, 3))))


def test_backward_replay_many_times_and_from_threads():
    rng = np.random.default_rng(3)
    a, b = f64(rng.standard_normal((2, 3))), f64(rng.standard_normal((3, 2)))
    _, tape = tg.trace(f)(a, b)
    ref = tg.grad(f, argnums=(0, 1))(a, b)
    first = tape.vjp(f64(1.0))
    second = tape.backward(f64(1.0))  # no "backward a second time" error
    for got in (first, second):
        np.testing.assert_allclose(got[0].numpy(), ref[0].numpy(), rtol=1e-14)
        np.testing.assert_allclose(got[1].numpy(), ref[1].numpy(), rtol=1e-14)
    results = [None] * 8

    def work(i):
        results[i] = tape.vjp(f64(float(i)))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, r in enumerate(results):
        np.testing.assert_allclose(r[0].numpy(), i * ref[0].numpy(), rtol=1e-14)
    # concurrent forward replays agree too
    outs = [None] * 4

    def fwd(i):
        outs[i] = tape.replay(a, b).numpy()

    threads = [threading.Thread(target=fwd, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(np.array_equal(o, outs[0]) for o in outs)


def test_tape_vjp_checks_the_cotangent():
    _, tape = tg.trace(f)(f64(np.ones((2, 3))), f64(np.ones((3, 2))))
    with pytest.raises(ValueError, match="shape"):
        tape.vjp(f64([1.0, 2.0]))


def branchy(x):
    s = x.sum()
    if s > 0:  # a Python decision on data: recorded as a guard
        return s * 2.0
    return s * -3.0


def test_python_decisions_are_guards_and_a_flip_names_the_line():
    _, tape = tg.trace(branchy)(f64([1.0, 2.0]))
    assert any(isinstance(e, tg.Guard) for e in tape.entries)
    assert "guard bool" in str(tape)
    np.testing.assert_allclose(tape.replay(f64([3.0, 4.0])).numpy(), 14.0)
    with pytest.raises(tg.GuardError, match=r"test_tape\.py:\d+"):
        tape.replay(f64([-3.0, 1.0]))


def test_grad_through_a_guarded_branch():
    g = tg.grad(branchy)(f64([1.0, 2.0]))
    np.testing.assert_allclose(g.numpy(), [2.0, 2.0])
    g = tg.grad(tg.grad(lambda x: branchy(x) * x.sum()))(f64(-1.0))
    np.testing.assert_allclose(g.numpy(), -6.0)


def test_int_float_item_guards():
    def loop(x, n):
        total = x
        for _ in range(int(n)):  # loop bound decided on data
            total = total * 2.0
        return total * x.item()

    _, tape = tg.trace(loop)(f64(1.5), f64(3.0))
    np.testing.assert_allclose(
        tape.replay(f64(1.5), f64(3.0)).numpy(), loop(f64(1.5), f64(3.0)).numpy()
    )
    with pytest.raises(tg.GuardError, match="int"):
        tape.replay(f64(1.5), f64(4.0))
    with pytest.raises(tg.GuardError, match="item"):
        tape.replay(f64(2.5), f64(3.0))


def test_nondifferentiable_values_are_replayed_not_frozen():
    def g(x):
        mask = x > 0  # comparison: no gradient, but recomputed on replay
        return tnp.where(mask, x, 0.0).sum()

    _, tape = tg.trace(g)(f64([1.0, -1.0]))
    np.testing.assert_allclose(tape.replay(f64([-1.0, 2.0])).numpy(), 2.0)


def _fake_dot(folder, monkeypatch, works=True):
    """A ``dot`` program on an otherwise empty PATH (one that fails when ``works`` is False)."""
    dot = folder / "dot"
    dot.write_text("#!/bin/sh\nexit 0\n" if works else "#!/bin/sh\nexit 127\n")
    dot.chmod(0o755)
    monkeypatch.setenv("PATH", str(folder))


@pytest.mark.skipif(sys.platform == "win32", reason="a shell script stands in for dot")
def test_draw_returns_a_graphviz_graph(tmp_path, monkeypatch):
    graphviz = pytest.importorskip("graphviz")
    _fake_dot(tmp_path, monkeypatch)
    _, tape = tg.trace(f)(f64(np.ones((2, 3))), f64(np.ones((3, 2))))
    g = tape.draw()
    assert isinstance(g, graphviz.Source)
    assert "matmul" in g.source and "tanh" in g.source


def test_draw_without_graphviz_s_dot_program_says_how_to_install_it(tmp_path, monkeypatch):
    pytest.importorskip("graphviz")
    _, tape = tg.trace(f)(f64(np.ones((2, 3))), f64(np.ones((3, 2))))
    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH without dot
    for call in (lambda: tape.draw(), lambda: tape.draw(str(tmp_path / "tape"), "png")):
        with pytest.raises(RuntimeError, match="Tape.draw: Graphviz's dot program") as info:
            call()
        text = str(info.value)
        for how in ("apt-get install graphviz", "brew install graphviz",
                    "conda install -c conda-forge graphviz", "to_dot()"):  # fmt: skip
            assert how in text, how


@pytest.mark.skipif(sys.platform == "win32", reason="a shell script stands in for dot")
def test_draw_says_how_to_install_dot_when_rendering_cannot_run_it(tmp_path, monkeypatch):
    graphviz = pytest.importorskip("graphviz")
    _, tape = tg.trace(f)(f64(np.ones((2, 3))), f64(np.ones((3, 2))))
    _fake_dot(tmp_path, monkeypatch, works=False)

    def not_found(*args, **kwargs):  # what graphviz raises when it cannot start dot
        raise graphviz.ExecutableNotFound(["dot"])

    monkeypatch.setattr(graphviz.Source, "render", not_found)
    with pytest.raises(RuntimeError, match="brew install graphviz"):
        tape.draw(str(tmp_path / "tape"), "svg")


@pytest.mark.skipif(shutil.which("dot") is None, reason="needs Graphviz's dot program")
def test_draw_renders_a_file_with_graphviz(tmp_path):
    pytest.importorskip("graphviz")
    _, tape = tg.trace(f)(f64(np.ones((2, 3))), f64(np.ones((3, 2))))
    path = tape.draw(str(tmp_path / "tape"), "svg")
    assert path.endswith(".svg") and "<svg" in open(path).read()


def test_to_dot_needs_no_graphviz():
    _, tape = tg.trace(f)(f64(np.ones((2, 3))), f64(np.ones((3, 2))))
    dot = tape.to_dot()
    assert dot.startswith("digraph tape {") and dot.rstrip().endswith("}")
    assert '"matmul"' in dot and '"tanh"' in dot and "n0 -> op0" in dot


def test_replay_recomputes_marked_non_differentiable_outputs():
    class MaxAndIndex(tg.Function):
        @staticmethod
        def forward(ctx, x):
            i = np.asarray(np.argmax(x))
            ctx.mark_non_differentiable(i)
            ctx.i = int(i)
            return x[ctx.i], i

        @staticmethod
        def backward(ctx, g, g_index):
            return tnp.reshape(g, (1,)) * (tnp.asarray(np.arange(3)) == ctx.i)

    def f(x):
        m, i = MaxAndIndex.apply(x)
        return m * 2.0, i

    x = f64([1.0, 5.0, 2.0])
    _, tape = tg.trace(f)(x)
    m, i = tape.replay(f64([7.0, 1.0, 2.0]))
    assert float(m) == 14.0 and int(i) == 0
    g = tg.grad(lambda x: f(x)[0])(x)
    np.testing.assert_allclose(g.numpy(), [0.0, 2.0, 0.0])


def test_entries_are_named_records_and_avals_come_from_the_node_table():
    c32 = tg.Tensor(np.ones((1, 3), np.float32))

    def f(x):
        y = x * c32  # a traced input and a constant Tensor (broadcast)
        z = y + 2.0  # a Python number
        return tnp.tanh(z).sum()

    _, tape = tg.trace(f)(tg.Tensor(np.ones((2, 3), np.float32)))
    mul, add, tanh, total = tape.entries
    assert mul.fn.__name__ == "Mul" and mul.oper == "mul" and mul.params == {}
    assert mul.in_nodes == (0, -1) and mul.consts[1] is c32
    assert add.consts == (None, 2.0)
    assert tape.avals[mul.out_nodes[0]] == ((2, 3), np.dtype("float32"))
    assert tape.avals[total.out_nodes[0]] == ((), np.dtype("float32"))
    with pytest.raises(AttributeError):
        mul.fn = None  # entries are immutable
    g = tape.vjp(tg.Tensor(np.float32(1.0)))[0]
    assert g.shape == (2, 3) and g.dtype == np.float32


def test_traced_primal_is_the_constant_one_level_down():
    from tapegrad.core.tensor import primal_of

    def f(x):
        y = x + 1.0
        p = primal_of(y)
        assert p is primal_of(y) and p._level == 0 and p._array is y._array
        return (y * y).sum()

    g = tg.grad(f)(tg.Tensor(np.array([1.0, 2.0])))
    np.testing.assert_allclose(g.numpy(), [4.0, 6.0])


def test_replay_frees_each_intermediate_after_its_last_use():
    import tracemalloc

    def chain(x):
        h = x
        for _ in range(40):
            h = tnp.tanh(h * 1.01)  # 80 intermediates of 800 kB each
        return h.sum(), h  # the last intermediate is also an output

    x = tg.Tensor(np.random.default_rng(0).standard_normal(100_000))
    (s, last), tape = tg.trace(chain)(x)
    x2 = tg.Tensor(np.random.default_rng(1).standard_normal(100_000))
    tape.replay(x2)  # compile once
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    tracemalloc.reset_peak()
    s2, last2 = tape.replay(x2)
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    assert peak < 5 * x2.numpy().nbytes, peak  # a few arrays alive at once, not 80
    ref = x2.numpy()
    for _ in range(40):
        ref = np.tanh(ref * 1.01)
    np.testing.assert_allclose(last2.numpy(), ref, rtol=1e-12)
    np.testing.assert_allclose(float(s2), ref.sum(), rtol=1e-10)


def test_replay_keeps_outputs_read_by_later_steps_and_drops_unused_outputs():
    def f(x):
        a = x * 2.0
        parts = tnp.split(a, 2)  # a multi-output op whose second output nothing reads
        return a, parts[0] + 1.0, tnp.sum(a)

    x = tg.Tensor(np.arange(4.0))
    _, tape = tg.trace(f)(x)
    a, p0, s = tape.replay(tg.Tensor(np.arange(4.0) + 1))
    np.testing.assert_array_equal(a.numpy(), [2, 4, 6, 8])
    np.testing.assert_array_equal(p0.numpy(), [3, 5])
    assert float(s) == 20.0


def test_replay_on_traced_inputs_differentiates_and_batches():
    # Used to return zeros: the replay read the traced input's value as a constant.
    x = tg.Tensor(np.array([0.3, -1.2, 2.0]))
    _, tape = tg.trace(lambda x: tnp.sum(tnp.sin(x) * x))(x)
    want = np.cos(x.numpy()) * x.numpy() + np.sin(x.numpy())
    np.testing.assert_allclose(tg.grad(tape.replay)(x).numpy(), want)
    check_grads(tape.replay, (x,), order=2, modes=("rev", "fwd"))
    xs = tg.Tensor(np.random.default_rng(1).standard_normal((4, 3)))
    np.testing.assert_allclose(tg.vmap(tape.replay)(xs).numpy(),
                               (np.sin(xs.numpy()) * xs.numpy()).sum(1))
    np.testing.assert_allclose(tg.jit(tg.grad(tape.replay))(x).numpy(), want)


def test_replay_on_traced_inputs_takes_arrays_and_numbers_for_the_other_leaves():
    # A traced Tensor beside a NumPy array or a Python number used to raise TypeError (the
    # untraced leaves were wrapped with the internal record constructor, without its fields).
    x, y = tg.Tensor(np.array([1.0, 2.0])), np.array([3.0, 4.0])
    _, tape = tg.trace(lambda x, y, s: tnp.sum(x * y) * s)(x, tg.Tensor(y), 2.0)
    g = tg.grad(lambda x: tape.replay(x, y, 2.0))(x)
    np.testing.assert_allclose(g.numpy(), 2.0 * y)
    np.testing.assert_allclose(tg.vmap(lambda x: tape.replay(x, y, 0.5))(tg.Tensor(
        np.ones((3, 2)))).numpy(), [3.5, 3.5, 3.5])


def test_replay_on_traced_inputs_checks_the_recorded_decisions():
    def f(x):
        return tnp.sin(x) if float(x[0]) > 0 else tnp.cos(x)

    x = tg.Tensor(np.array([1.0, 2.0]))
    _, tape = tg.trace(f)(x)
    g = tg.grad(lambda x: tnp.sum(tape.replay(x)))
    np.testing.assert_allclose(g(x).numpy(), np.cos(x.numpy()))
    with pytest.raises(tg.GuardError, match="float"):
        g(-x)
    with pytest.raises(TypeError, match="batched"):
        tg.vmap(tape.replay)(tg.Tensor(np.ones((3, 2))))


def test_replay_on_traced_pytree_inputs():
    # Used to raise "inputs have structure ..." for any nested input under a transform.
    def f(p):
        return tnp.sum(p["w"] * tnp.sin(p["b"][0]))

    p = {"w": f64([1.0, 2.0]), "b": [f64([0.5, -0.3])]}
    _, tape = tg.trace(f)(p)
    got, want = tg.grad(tape.replay)(p), tg.grad(f)(p)
    np.testing.assert_allclose(got["w"].numpy(), want["w"].numpy())
    np.testing.assert_allclose(got["b"][0].numpy(), want["b"][0].numpy())
