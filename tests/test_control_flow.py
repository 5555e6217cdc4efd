"""scan, fori_loop, while_loop, cond and switch: one primitive each, the body a nested
sub-program; errors; while_loop's reverse mode against finite differences and the loop
unrolled by hand; nesting; jit's program independent of the trip count."""

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp


def f64(v):
    return tg.Tensor(np.asarray(v, dtype=np.float64))


def close(a, b, tol=1e-10):
    for u, v in zip(tg.tree.tree_leaves(a), tg.tree.tree_leaves(b)):
        np.testing.assert_allclose(np.asarray(u.numpy() if isinstance(u, tg.Tensor) else u),
                                   np.asarray(v.numpy() if isinstance(v, tg.Tensor) else v),
                                   rtol=tol, atol=tol)


# -- scan ---------------------------------------------------------------------------------------
def rnn_step(w, u):
    def step(h, x):
        h = tnp.tanh(h @ w + x @ u)
        return h, (h * h).sum()

    return step


def rnn_loss(w, u, h0, xs):
    h, ys = tg.scan(rnn_step(w, u), h0, xs)
    return (h * h).sum() + ys.sum()


def rnn_loss_unrolled(w, u, h0, xs):
    step = rnn_step(w, u)
    h, total = h0, 0.0
    for i in range(xs.shape[0]):
        h, y = step(h, xs[i])
        total = total + y
    return (h * h).sum() + total


@pytest.fixture
def rnn():
    rng = np.random.default_rng(0)
    return (f64(rng.normal(size=(3, 3)) * 0.5), f64(rng.normal(size=(2, 3))),
            f64(rng.normal(size=3)), f64(rng.normal(size=(5, 2))))


def test_scan_is_one_entry_with_its_body_listed_nested(rnn):
    _, tape = tg.trace(rnn_loss)(*rnn)
    ops = [e.oper for e in tape.entries]
    assert ops.count("scan") == 1
    text = str(tape)
    assert "scan[body={step}" in text
    assert "      body = { lambda ;" in text and "tanh" in text


def test_scan_values_and_derivatives_equal_the_unrolled_loop(rnn):
    close(rnn_loss(*rnn), rnn_loss_unrolled(*rnn))
    close(tg.grad(rnn_loss, argnums=(0, 1, 2, 3))(*rnn),
          tg.grad(rnn_loss_unrolled, argnums=(0, 1, 2, 3))(*rnn))
    close(tg.hessian(rnn_loss, argnums=2)(*rnn), tg.hessian(rnn_loss_unrolled, argnums=2)(*rnn))
    close(tg.jit(tg.grad(rnn_loss))(*rnn), tg.grad(rnn_loss_unrolled)(*rnn))


def test_scan_reverse_pytree_carry_and_no_xs():
    def step(c, x):
        a, b = c["a"], c["b"]
        return {"a": a + x, "b": b * 2.0}, a

    c, ys = tg.scan(step, {"a": f64(0.0), "b": f64(1.0)}, f64([1.0, 2.0, 3.0]), reverse=True)
    assert float(c["a"]) == 6.0 and float(c["b"]) == 8.0
    assert ys.tolist() == [5.0, 3.0, 0.0]
    c, ys = tg.scan(lambda c, _: (c + 1.0, None), f64(0.0), None, length=4)
    assert float(c) == 4.0 and ys is None


def test_scan_in_scan_and_grad_of_scan_of_grad():
    def inner(c, x):
        return c * x + tnp.sin(c), None

    def outer(w):
        def step(c, row):
            c2, _ = tg.scan(inner, c, row)
            return c2 * w, c2
        return tg.scan(step, f64(0.3), f64([[1.0, 0.5], [0.2, 0.7]]))[1].sum()

    def outer_unrolled(w):
        c, total = f64(0.3), 0.0
        for row in ([1.0, 0.5], [0.2, 0.7]):
            for x in row:
                c = c * x + tnp.sin(c)
            total = total + c
            c = c * w
        return total

    close(tg.grad(outer)(f64(1.3)), tg.grad(outer_unrolled)(f64(1.3)))
    close(tg.grad(tg.grad(outer))(f64(1.3)), tg.grad(tg.grad(outer_unrolled))(f64(1.3)))

    def g_inside(w):  # the body takes a gradient itself
        def step(c, x):
            return c + tg.grad(lambda v: tnp.sin(v * x) * w)(c), c
        return tg.scan(step, f64(0.1), f64([1.0, 2.0, 3.0]))[0]

    def g_unrolled(w):
        c = f64(0.1)
        for x in (1.0, 2.0, 3.0):
            c = c + tg.grad(lambda v, x=x: tnp.sin(v * x) * w)(c)
        return c

    close(tg.grad(g_inside)(f64(0.7)), tg.grad(g_unrolled)(f64(0.7)))


def _scan_entries(remat):
    def loss(w):
        def step(c, _):
            return tnp.sin(tnp.cos(tnp.exp(c * w) * 0.01)), None
        return tg.scan(step, tg.Tensor(np.ones(4)), None, length=50, remat=remat)[0].sum()

    _, tape = tg.trace(lambda w: tg.grad(loss)(w))(f64(0.5))
    scans = [e for e in tape.entries if e.oper == "scan"]
    assert len(scans) == 2  # the forward and the reverse scan
    body_ops = [e.oper for e in scans[1].params["body"].tape.entries]
    return [tape.avals[n][0] for n in scans[0].out_nodes], body_ops


def test_scan_remat_keeps_carries_not_body_intermediates():
    """remat=True: the forward keeps one carry per iteration (the scan's own output, a stacked
    array); the backward recomputes each iteration's intermediates one at a time."""
    outs, body_ops = _scan_entries(True)
    assert outs == [(4,), (50, 4)]
    assert {"exp", "cos", "sin"} <= set(body_ops)


def test_scan_keeps_each_iterations_residuals_by_default():
    """By default (JAX's choice) the forward also stacks what each iteration's backward rules
    read, and the reverse scan's body recomputes none of the body's transcendental ops."""
    for remat in (None, False):
        outs, body_ops = _scan_entries(remat)
        assert outs[0] == (4,) and len(outs) > 2 and all(s[0] == 50 for s in outs[1:])
        assert not {"exp", "cos", "sin"} & set(body_ops)


def test_scan_jit_program_does_not_grow_with_the_trip_count():
    def make(n):
        def loss(w):
            def step(c, _):
                return tnp.tanh(c * w + 0.1), None
            return tg.scan(step, tg.Tensor(np.ones(3)), None, length=n)[0].sum()
        return tg.jit(tg.grad(loss))

    sizes = []
    for n in (10, 1000):
        j = make(n)
        prog = j.lower(f64(0.5))
        sizes.append((prog.steps, len(prog.source)))
    assert sizes[0] == sizes[1]


def test_scan_errors_name_the_function_and_types():
    def bad_dtype(c, x):
        return c.astype(np.float32), x

    with pytest.raises(TypeError, match=r"scan: bad_dtype returned carry leaf 0 of type "
                                        r"float32\[2\], but init has type float64\[2\]"):
        tg.scan(bad_dtype, f64([1.0, 2.0]), f64(np.ones((3, 1))))

    def bad_tree(c, x):
        return (c, c), x

    with pytest.raises(TypeError, match="scan: bad_tree returned carry with structure"):
        tg.scan(bad_tree, f64(1.0), f64(np.ones(3)))
    with pytest.raises(TypeError, match="must return a pair"):
        tg.scan(lambda c, x: c, f64(1.0), f64(np.ones(3)))
    with pytest.raises(ValueError, match="different leading axis sizes"):
        tg.scan(lambda c, x: (c, None), f64(1.0), (f64(np.ones(3)), f64(np.ones(2))))
    with pytest.raises(ValueError, match="length=2 but xs have leading axis size 3"):
        tg.scan(lambda c, x: (c, None), f64(1.0), f64(np.ones(3)), length=2)
    with pytest.raises(ValueError, match="give length="):
        tg.scan(lambda c, x: (c, None), f64(1.0), None)
    with pytest.raises(TypeError, match="f must be callable"):
        tg.scan(3, f64(1.0), None, length=1)


# -- fori_loop ----------------------------------------------------------------------------------
def test_fori_loop_static_and_traced_bounds():
    def body(i, v):
        return v * 0.5 + i

    assert float(tg.fori_loop(2, 6, body, f64(1.0))) == pytest.approx(
        (((1.0 * 0.5 + 2) * 0.5 + 3) * 0.5 + 4) * 0.5 + 5)
    assert float(tg.fori_loop(3, 1, body, f64(1.0))) == 1.0

    def f(x, n):
        return tg.fori_loop(0, n, lambda i, v: v * x + i, f64(1.0))

    def unrolled(x, n):
        v = f64(1.0)
        for i in range(n):
            v = v * x + i
        return v

    close(tg.grad(f)(f64(0.7), tg.Tensor(5)), tg.grad(unrolled)(f64(0.7), 5))
    close(tg.grad(f)(f64(0.7), 5), tg.grad(unrolled)(f64(0.7), 5))
    with pytest.raises(TypeError, match="fori_loop: upper must be an int or an integer Tensor"):
        tg.fori_loop(0, 2.5, body, f64(1.0))


# -- while_loop ---------------------------------------------------------------------------------
def grow(x, w):
    def body(c):
        v, k = c
        return v * w + tnp.sin(v), k + 1

    return tg.while_loop(lambda c: c[0].sum() < 20.0, body, (x, tg.Tensor(0)))


def grow_unrolled(x, w):
    v = x
    while float(tg.stop_gradient(v).sum()) < 20.0:  # the same loop, unrolled in Python
        v = v * w + tnp.sin(v)
    return v


def test_while_loop_reverse_mode_equals_the_unrolled_loop_and_finite_differences():
    x, w = f64([0.5, 0.25]), f64(1.3)

    def loss(x, w):
        v, k = grow(x, w)
        return (v * v).sum() + 0.0 * k

    def loss_unrolled(x, w):
        v = grow_unrolled(x, w)
        return (v * v).sum()

    v, k = grow(x, w)
    assert int(k) > 3
    close(v, grow_unrolled(x, w))
    g = tg.grad(loss, argnums=(0, 1))(x, w)
    close(g, tg.grad(loss_unrolled, argnums=(0, 1))(x, w))
    # central finite differences (the trip count does not change under these steps)
    eps = 1e-6
    fd_w = (float(loss(x, w + eps)) - float(loss(x, w - eps))) / (2 * eps)
    assert float(g[1]) == pytest.approx(fd_w, rel=1e-7)
    # order 2, forward mode, and under jit with another trip count
    close(tg.hessian(loss, argnums=1)(x, w), tg.hessian(loss_unrolled, argnums=1)(x, w))
    close(tg.jvp(lambda a: loss(a, w), (x,), (f64([1.0, -1.0]),)),
          tg.jvp(lambda a: loss_unrolled(a, w), (x,), (f64([1.0, -1.0]),)))
    jg = tg.jit(tg.grad(loss, argnums=(0, 1)))
    close(jg(x, w), g)
    x2 = f64([0.05, 0.01])
    assert int(grow(x2, w)[1]) != int(k)
    close(jg(x2, w), tg.grad(loss_unrolled, argnums=(0, 1))(x2, w))


def test_while_loop_under_vmap_runs_until_every_member_is_done():
    w = f64(1.3)
    xs = f64([[0.5, 0.25], [0.01, 0.02], [30.0, 0.0]])

    def loss(x):
        return (grow(x, w)[0] ** 2).sum()

    def loss_unrolled(x):
        return (grow_unrolled(x, w) ** 2).sum()

    v, k = tg.vmap(lambda x: grow(x, w))(xs)
    assert [int(i) for i in k] == [int(grow(x, w)[1]) for x in xs]
    close(v, tnp.stack([grow_unrolled(x, w) for x in xs]))
    close(tg.vmap(tg.grad(loss))(xs), tnp.stack([tg.grad(loss_unrolled)(x) for x in xs]))
    close(tg.grad(lambda a: tg.vmap(loss)(a).sum())(xs),
          tnp.stack([tg.grad(loss_unrolled)(x) for x in xs]))


def test_while_loop_backward_runs_only_the_backward_rules():
    """The reverse loop of a while_loop's gradient runs the body's backward rules on residuals
    computed beforehand for every iteration at once (the body batched over the saved values):
    none of the body's forward ops run inside it. Gradients equal the unrolled loop's at
    orders 1 and 2, alone and under vmap (rows of finished members masked)."""
    from tapegrad.transforms import control

    x, w = f64([0.5, 0.25]), f64(1.3)
    made = []
    real = control._residual_forward_body

    def spy(plan, **kw):
        made.append(plan)
        return real(plan, **kw)

    def loss(x, w):
        return (grow(x, w)[0] ** 2).sum()

    def loss_unrolled(x, w):
        return (grow_unrolled(x, w) ** 2).sum()

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(control, "_residual_forward_body", spy)
        g = tg.grad(loss, argnums=(0, 1))(x, w)
    assert made, "the residuals were not computed by the batched body"
    close(g, tg.grad(loss_unrolled, argnums=(0, 1))(x, w))
    body = made[0].body
    (vjp,) = [b for k, b in body._derived.items() if k[0] == "wvjp" and k[-1]]
    opers = {e.fn.oper for e in vjp.tape.entries if hasattr(e, "fn")}
    assert "sin" not in opers, opers  # sin's forward: computed before the reverse loop
    close(tg.hessian(loss, argnums=1)(x, w), tg.hessian(loss_unrolled, argnums=1)(x, w))
    xs = f64([[0.5, 0.25], [0.01, 0.02], [30.0, 0.0]])
    close(tg.vmap(tg.grad(loss), in_axes=(0, None))(xs, w),
          tnp.stack([tg.grad(loss_unrolled)(a, w) for a in xs]))


def test_while_loop_backward_with_an_effect_in_the_body():
    """A body with a callback: the batched pass that computes the residuals calls it once per
    iteration with that iteration's value (never with the batch); gradients are the same."""
    seen = []

    def loss(x):
        def body(c):
            v, k = c
            tg.debug.callback(lambda v: seen.append(np.shape(v)), v)
            return v * 1.3 + tnp.sin(v), k + 1

        v, _ = tg.while_loop(lambda c: c[1] < 4, body, (x, tg.Tensor(0)))
        return (v * v).sum()

    def loss_unrolled(x):
        v = x
        for _ in range(4):
            v = v * 1.3 + tnp.sin(v)
        return (v * v).sum()

    x = f64([0.5, 0.25])
    close(tg.grad(loss)(x), tg.grad(loss_unrolled)(x))
    assert seen and set(seen) == {(2,)}  # never called with a batch of iterations


def test_while_loop_errors():
    with pytest.raises(TypeError, match=r"while_loop: <lambda> must return a boolean scalar, "
                                        r"got bool\[2\]"):
        tg.while_loop(lambda v: v < 1.0, lambda v: v, f64([0.0, 1.0]))
    with pytest.raises(TypeError, match=r"while_loop: body returned value leaf 0 of type "
                                        r"float32\[\]"):
        def body(v):
            return v.astype(np.float32)
        tg.while_loop(lambda v: v < 1.0, body, f64(0.0))


# -- cond / switch ------------------------------------------------------------------------------
def test_cond_and_switch_take_one_branch_and_differentiate_through_it():
    def f(x):
        return tg.cond(x.sum() > 0, lambda v: (v * v).sum(), lambda v: tnp.sin(v).sum(), x)

    x = f64([0.5, 0.25])
    close(tg.grad(f)(x), 2 * x)
    close(tg.grad(f)(-x), tnp.cos(-x))
    fs = [lambda v: v * 2.0, lambda v: tnp.exp(v), lambda v: v ** 3]
    idx = tg.Tensor(np.array([-3, 0, 1, 2, 7]))
    xs = f64([1.0, 2.0, 3.0, 4.0, 5.0])
    out = tg.vmap(lambda i, v: tg.switch(i, fs, v))(idx, xs)
    close(out, f64([2.0, 4.0, np.exp(3.0), 64.0, 125.0]))
    g = tg.vmap(tg.grad(lambda v, i: tg.switch(i, fs, v)), in_axes=(0, 0))(xs, idx)
    close(g, f64([2.0, 2.0, np.exp(3.0), 48.0, 75.0]))
    _, tape = tg.trace(f)(x)
    assert "branches[0] = { lambda" in str(tape) and "branches[1] = { lambda" in str(tape)


def test_cond_errors_name_both_branches():
    def yes(v):
        return v

    def no(v):
        return v.astype(np.float32)

    with pytest.raises(TypeError, match=r"cond: yes \(true_fun\) returned output leaf 0 of "
                                        r"type float64\[\], but the output of no \(false_fun\) "
                                        r"has type float32\[\]"):
        tg.cond(True, yes, no, f64(1.0))
    with pytest.raises(TypeError, match=r"switch: no returned output leaf 0 of type float32\[\]"
                                        r", but the output of yes \(branch 0\) has type"):
        tg.switch(0, [yes, no], f64(1.0))
    with pytest.raises(TypeError, match=r"cond: pred must be a boolean scalar, got bool\[2\]"):
        tg.cond(f64([1.0, 2.0]) > 0, yes, yes, f64(1.0))
    with pytest.raises(TypeError, match="switch: branches must be a non-empty"):
        tg.switch(0, [], f64(1.0))
    with pytest.raises(TypeError, match=r"switch: the index must be an integer scalar, got "
                                        r"float64\[\]"):
        tg.switch(f64(0.0), [yes], f64(1.0))


def test_to_json_writes_a_body_nested():
    """A sub-program is written nested in its entry and read back (tests/test_control_program.py
    has the round trips and the malformed files)."""
    f = lambda x: tg.scan(lambda c, v: (c + v, None), x[0], x)[0]  # noqa: E731
    _, tape = tg.trace(f)(f64([1.0]))
    loaded = tg.Tape.from_json(tape.to_json())
    assert str(loaded) == str(tape)
    assert float(loaded.replay(f64([2.0, 3.0])[:1])) == 4.0
