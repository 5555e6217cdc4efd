"""Tape.to_json / Tape.from_json: tapes written without pickle and read back checked."""

import builtins
import importlib
import json
import os
import re
import subprocess
import sys
import textwrap

import attrs
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.testing import strategies as tgst
from tapegrad.transforms.jit import Program

rng = np.random.default_rng(0)
W = tg.Tensor(rng.standard_normal((3, 3)))


def model(x):
    """Closes over W (a constant array), a list and a complex scale; indexes with an array."""
    h = tnp.tanh(x @ W) * np.array([1.0, 2.0, 3.0])
    z = h * (1 - 2j)
    return (tnp.sum(tnp.abs(z) ** 2) + tnp.sum(x[:, [0, 2]])
            + tnp.sum(tnp.logaddexp(x, 0.0)) + tnp.sum(tnp.where(x > 0.5, x, 0.0)))


def roundtrip(tape, tmp_path):
    text = tape.to_json(arrays=tmp_path / "consts.safetensors")
    return tg.Tape.from_json(text), text


def test_a_gradient_tape_round_trips(tmp_path):
    x = tg.Tensor(rng.standard_normal((2, 3)))
    _, tape = tg.trace(tg.grad(model))(x)
    loaded, text = roundtrip(tape, tmp_path)
    assert str(loaded) == str(tape)
    assert "pickle" not in text and json.loads(text)["format"] == "tapegrad.core.tape"
    for arg in (x, 2 * x, -x):
        np.testing.assert_allclose(loaded.replay(arg).numpy(), tg.grad(model)(arg).numpy())
    np.testing.assert_allclose(tg.jit(loaded.replay)(3 * x).numpy(),
                               tg.grad(model)(3 * x).numpy())


def test_a_loaded_tape_differentiates_through_its_replay(tmp_path):
    x = tg.Tensor(rng.standard_normal((2, 3)))
    out, tape = tg.trace(model)(x)
    loaded, _ = roundtrip(tape, tmp_path)
    with pytest.raises(ValueError, match="holds no residuals"):
        loaded.vjp(tg.Tensor(1.0))
    with pytest.raises(ValueError, match="holds no residuals"):
        loaded.residual_bytes()
    np.testing.assert_allclose(tg.grad(loaded.replay)(x).numpy(), tg.grad(model)(x).numpy())
    xs = tg.Tensor(rng.standard_normal((4, 2, 3)))
    np.testing.assert_allclose(tg.vmap(loaded.replay)(xs).numpy(),
                               [model(xs[i]).numpy() for i in range(4)])


def test_no_constants_no_file_and_pytrees_of_containers():
    def f(p):
        return {"s": tnp.sum(p["w"] * p["b"][0]), "t": (p["b"][1], None)}

    p = {"w": tg.Tensor(np.ones(3)), "b": [tg.Tensor(2.0), tg.Tensor(np.arange(2.0))]}
    _, tape = tg.trace(f)(p)
    loaded = tg.Tape.from_json(tape.to_json())
    q = {"w": tg.Tensor(np.arange(3.0)), "b": [tg.Tensor(-1.0), tg.Tensor(np.ones(2))]}
    got, want = loaded.replay(q), f(q)
    assert set(got) == {"s", "t"} and got["t"][1] is None
    np.testing.assert_allclose(got["s"].numpy(), want["s"].numpy())
    np.testing.assert_allclose(got["t"][0].numpy(), want["t"][0].numpy())


def test_guards_survive_the_file():
    def f(x):
        return tnp.sin(x) if x[0] > 0 else tnp.cos(x)

    _, tape = tg.trace(f)(tg.Tensor(np.array([1.0, 2.0])))
    loaded = tg.Tape.from_json(tape.to_json())
    np.testing.assert_allclose(loaded.replay(tg.Tensor(np.array([3.0, 1.0]))).numpy(),
                               np.sin([3.0, 1.0]))
    with pytest.raises(tg.GuardError):
        loaded.replay(tg.Tensor(np.array([-3.0, 1.0])))


def test_constants_need_a_file_and_the_file_is_checked(tmp_path):
    x = tg.Tensor(rng.standard_normal((2, 3)))
    _, tape = tg.trace(model)(x)
    with pytest.raises(ValueError, match=r"constant array\(s\); give a path"):
        tape.to_json()
    path = tmp_path / "consts.safetensors"
    text = tape.to_json(arrays=path)
    moved = tmp_path / "moved.safetensors"
    os.replace(path, moved)
    with pytest.raises(ValueError, match="cannot read the constants file"):
        tg.Tape.from_json(text)
    assert str(tg.Tape.from_json(text, arrays=moved)) == str(tape)
    data = bytearray(moved.read_bytes())
    data[-1] ^= 1
    moved.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="SHA-256 differs"):
        tg.Tape.from_json(text, arrays=moved)


def test_what_cannot_be_written_or_read_is_named():
    x = tg.Tensor(np.ones(3))
    _, tape = tg.trace(tg.checkpoint(lambda x: tnp.sin(x)))(x)
    with pytest.raises(ValueError, match=r"parameter 'body' of entry 0 \(checkpoint\)"):
        tape.to_json()
    _, tape = tg.trace(lambda x: tnp.sin(x))(x)
    doc = json.loads(tape.to_json())
    with pytest.raises(ValueError, match="not a tapegrad tape"):
        tg.Tape.from_json("{}")
    with pytest.raises(ValueError, match="not JSON"):
        tg.Tape.from_json("{")
    with pytest.raises(ValueError, match="version 2"):
        tg.Tape.from_json(json.dumps(dict(doc, version=2)))
    for op in ("not_a_loaded_module:F", "os:system", "tapegrad.ops.elementwise:Nope",
               "tapegrad.core.tape:Tape", "tapegrad.ops:__class__",
               "tapegrad.core.function:Function"):
        bad = dict(doc, entries=[dict(doc["entries"][0], op=op)])
        with pytest.raises(ValueError, match=r"entry 0: .* is not a tapegrad Function defined "
                                             r"in this process.*import it before loading"):
            tg.Tape.from_json(json.dumps(bad))
    with pytest.raises(ValueError, match="malformed"):
        tg.Tape.from_json(json.dumps(dict(doc, entries=[{"op": "tapegrad.ops:Sin"}])))


@given(shape=tgst.shapes(max_dims=3), data=st.data(),
       dtype=st.sampled_from([np.float32, np.float64, np.complex128]))
def test_round_trip_replays_the_same_values(shape, data, dtype, tmp_path_factory):
    x = tg.Tensor(data.draw(tgst.arrays(shape)).astype(dtype))
    c = data.draw(tgst.arrays(shape)).astype(dtype)
    axis = data.draw(st.sampled_from([None] + list(range(len(shape)))))

    def f(x):
        y = tnp.exp(x * 0.1) + c
        return tnp.sum(y * tnp.conj(y), axis=axis), tnp.reshape(y, (-1,))[::2]

    _, tape = tg.trace(f)(x)
    path = tmp_path_factory.mktemp("t") / "c.safetensors"
    loaded = tg.Tape.from_json(tape.to_json(arrays=path))
    x2 = tg.Tensor(data.draw(tgst.arrays(shape)).astype(dtype))
    for a, b in zip(loaded.replay(x2), f(x2)):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)


# -- a tape file is data: it never becomes code or an import -----------------------------------
INJECTED = "__import__('os').system('touch {canary}')"


def _sum_tape():
    _, tape = tg.trace(lambda x: tnp.sum(x, axis=0))(tg.Tensor(np.ones((2, 3))))
    return tape, json.loads(tape.to_json())


def test_a_parameter_name_from_a_file_never_runs(tmp_path):
    canary = tmp_path / "pwned"
    tape, doc = _sum_tape()
    x = tg.Tensor(rng.standard_normal((2, 3)))
    # the key keeps the call valid Python and the result right, so nothing would look wrong
    evil = f"axis=[{INJECTED.format(canary=canary)}, 0][1], keepdims"
    bad = json.loads(json.dumps(doc))
    bad["entries"][0]["params"] = {evil: False}  # the issue's file, exactly
    raised = ""
    try:
        tg.Tape.from_json(json.dumps(bad)).replay(x)
    except ValueError as e:
        raised = str(e)
    assert not canary.exists()
    assert re.search(r"entry 0 \(sum\): the parameter name .* is not a Python identifier",
                     raised)
    for key in ("lambda", "a b", "", "x)", "__class__.__init__", "into", "ctx"):
        bad["entries"][0]["params"] = {key: 0, "keepdims": False} if key != "ctx" else {
            "ctx": 0, "axis": 0, "keepdims": False}
        with pytest.raises(ValueError, match=r"entry 0 \(sum\): .*parameter"):
            tg.Tape.from_json(json.dumps(bad)).replay(x)
    # an identifier the Function's forward does not take, or too many inputs
    bad = json.loads(json.dumps(doc))
    bad["entries"][0]["params"]["bogus"] = 1
    with pytest.raises(ValueError, match=r"entry 0 \(sum\): .*forward does not take"):
        tg.Tape.from_json(json.dumps(bad))
    bad = json.loads(json.dumps(doc))
    bad["entries"][0]["in"] += [0, 0]
    bad["entries"][0]["consts"] += [None, None]
    with pytest.raises(ValueError, match=r"entry 0 \(sum\): .*forward does not take 3 input"):
        tg.Tape.from_json(json.dumps(bad))
    np.testing.assert_array_equal(tg.Tape.from_json(json.dumps(doc)).replay(x).numpy(),
                                  tape.replay(x).numpy())


class _Scaled(tg.Function):
    """forward takes any keyword: a tape built in-process may hold any parameter name."""

    oper = "x'); __import__('os').system('touch oper-canary') #"

    @staticmethod
    def forward(ctx, x, **params):
        return x * sum(v for v in params.values() if type(v) is float)

    @staticmethod
    def backward(ctx, g):
        return g


class _EvilInt(int):
    """A node id whose text is code (a Tape can be built by hand from any values)."""

    canary = ""

    def __format__(self, spec):
        return f"0; {INJECTED.format(canary=self.canary)}; v{int(self)}"

    __str__ = __repr__ = lambda self: self.__format__("")


def test_no_string_from_a_tape_reaches_the_program_source(tmp_path):
    canary = tmp_path / "pwned"
    key = f"k={INJECTED.format(canary=canary)} or 1, z"
    x = tg.Tensor(np.arange(3.0), label=f"l'); {INJECTED.format(canary=canary)} #")
    out, tape = tg.trace(lambda x: _Scaled.apply(tnp.sin(x), **{key: 2.0}))(x)
    np.testing.assert_array_equal(tape.replay(x).numpy(), 2.0 * np.sin(np.arange(3.0)))
    source = Program(tape).source
    assert not canary.exists() and "__import__" not in source and "pwned" not in source
    np.testing.assert_array_equal(tg.jit(lambda x: _Scaled.apply(x, **{key: 3.0}))(x).numpy(),
                                  3.0 * np.arange(3.0))
    assert not canary.exists()
    # node ids whose text is code
    _EvilInt.canary = str(canary)

    def ev(n):
        return _EvilInt(n) if isinstance(n, int) and n >= 0 else n

    _, tape = tg.trace(lambda x: tnp.cos(tnp.sin(x)) * 2.0)(x)
    evil = attrs.evolve(
        tape,
        entries=tuple(e._replace(in_nodes=tuple(ev(n) for n in e.in_nodes),
                                 out_nodes=tuple(ev(n) for n in e.out_nodes))
                      for e in tape.entries),
        in_nodes=tuple(ev(n) for n in tape.in_nodes),
        out_refs=tuple(ev(r) for r in tape.out_refs),
    )
    np.testing.assert_array_equal(evil.replay(x).numpy(), 2.0 * np.cos(np.sin(np.arange(3.0))))
    assert "__import__" not in Program(evil).source
    assert not canary.exists()
    # the file keeps what it can hold and refuses what it cannot
    with pytest.raises(ValueError, match="parameter name .* is not a Python identifier"):
        tg.trace(lambda x: _Scaled.apply(x, **{key: 2.0}))(x)[1].to_json()


def test_the_arrays_file_must_be_a_regular_file(tmp_path):
    """/dev/zero, a FIFO, a /proc file and a directory are refused at once, by Tape.from_json
    and io.load (run in a child process with a memory limit and an alarm per path, so that a
    regression cannot hang or exhaust the machine)."""
    if not os.path.exists("/dev/zero") or not hasattr(os, "mkfifo"):
        pytest.skip("needs /dev/zero and FIFOs (POSIX)")
    code = textwrap.dedent(f"""
        import json, os, resource, signal
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
        import numpy as np, tapegrad as tg
        from tapegrad import io

        class Hang(BaseException):  # no OSError: nothing may take it for a read error
            pass

        def alarm(*_):
            raise Hang("still reading after 20 s")

        signal.signal(signal.SIGALRM, alarm)
        w = tg.Tensor(np.arange(3.0))
        _, tape = tg.trace(lambda x: x * w)(tg.Tensor(np.ones(3)))
        doc = json.loads(tape.to_json(arrays={str(tmp_path / "c.safetensors")!r}))
        fifo = {str(tmp_path / "fifo")!r}
        os.mkfifo(fifo)
        os.symlink("/dev/zero", {str(tmp_path / "zero-link")!r})
        paths = ["/dev/zero", fifo, {str(tmp_path / "zero-link")!r}, {str(tmp_path)!r},
                 "/proc/self/status", "/nonexistent/c.safetensors", "nul\\0byte"]
        bad = []
        for path in paths:
            if path.startswith("/proc") and not os.path.exists(path):
                continue
            calls = [("from_json names it", lambda: tg.Tape.from_json(
                         json.dumps(dict(doc, arrays=dict(doc["arrays"], file=path))))),
                     ("from_json(arrays=)", lambda: tg.Tape.from_json(json.dumps(doc),
                                                                      arrays=path)),
                     ("io.load", lambda: io.load(path))]
            for what, call in calls:
                signal.alarm(20)
                try:
                    call()
                    bad.append(f"{{what}} {{path!r}}: loaded")
                except ValueError as e:  # io.CheckpointError is a ValueError
                    if repr(path) in str(e) and ("constants file" in str(e) or "io.load" in str(e)):
                        continue
                    bad.append(f"{{what}} {{path!r}}: {{e}}")
                except BaseException as e:
                    bad.append(f"{{what}} {{path!r}}: {{type(e).__name__}}: {{e}}")
                finally:
                    signal.alarm(0)
        print("\\n".join(bad) or "ok")
    """)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stdout + res.stderr[-3000:]


def test_deep_nesting_is_a_value_error_not_a_recursion_error():
    tape, doc = _sum_tape()
    deep = 100_000
    texts = ["[" * deep + "]" * deep, '{"a":' * deep + "0" + "}" * deep]
    text = json.dumps(doc)
    for where in ('"axis": 0', '"consts": [null]', '"in_tree": {'):
        assert where in text
    texts.append(text.replace('"axis": 0', '"axis": ' + "[" * deep + "]" * deep))
    texts.append(text.replace('"axis": 0', '"axis": ' + '{"__tuple__": [' * deep + "]}" * deep))
    texts.append(text.replace('"in_tree": {', '"in_tree": {"tuple": [' * deep + "]}" * deep
                              + ', "x": {'))
    # under the JSON limit, over the container limit: the reader counts too
    texts.append(text.replace('"axis": 0', '"axis": ' + "[" * 300 + "]" * 300))
    tree = {"leaf": 0}
    for _ in range(300):
        tree = {"tuple": [tree]}
    texts.append(json.dumps(dict(doc, in_tree={"tuple": [tree]})))
    for t in texts:
        with pytest.raises(ValueError, match="nests"):
            tg.Tape.from_json(t)
    # what would nest too deeply is refused when written, naming the entry
    nested = 0
    for _ in range(300):
        nested = (nested,)
    _, tape = tg.trace(lambda x: _Scaled.apply(x, n=1.0, deep=nested))(tg.Tensor(1.0))
    with pytest.raises(ValueError, match=r"parameter 'deep' of entry 0 .* nests"):
        tape.to_json()


def _mutated(doc, edit):
    bad = json.loads(json.dumps(doc))
    edit(bad)
    return json.dumps(bad)


def _model_doc(tmp_path):
    def f(x):
        y = tnp.sum(tnp.tanh(x) * 2.0, axis=0)
        if y[0] > 0:
            y = y * 3.0
        return tnp.sum(y[1:] ** 2), y * np.arange(4.0)

    x = tg.Tensor(rng.standard_normal((3, 4)) + 1.0, label="x")
    _, tape = tg.trace(f)(x)
    return tape, json.loads(tape.to_json(arrays=tmp_path / "c.safetensors")), x


def _set(path, value):
    def edit(doc):
        node = doc
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = value(node[path[-1]]) if callable(value) else value
    return edit


STRUCTURE_CASES = {
    "used before defined": (_set(("entries", 0, "in"), [4]), r"entry 0 \(tanh\).*used before"),
    "id out of range": (_set(("entries", 1, "in", 0), 999), r"entry 1 \(mul\).*node id 999"),
    "negative id": (_set(("entries", 1, "in", 0), -2), r"entry 1 \(mul\).*node id -2"),
    "bool id": (_set(("entries", 1, "in", 0), True), r"entry 1 \(mul\).*node id True"),
    "reused output": (_set(("entries", 1, "out"), [1]), r"entry 1 \(mul\).*defined twice"),
    "output is an input": (_set(("entries", 0, "out"), [0]), r"entry 0 \(tanh\).*defined twice"),
    "output points at a constant": (_set(("outputs", 0), -1), r"output 0: node id -1"),
    "output out of range": (_set(("outputs", 1), 10**6), r"output 1: node id"),
    "shortened avals": (_set(("avals",), lambda a: a[:-1]), r"entry \d+ \(.*\).*node id"),
    "negative shape": (_set(("avals", 1, 0), [-3, 4]), r"avals\[1\]: shape"),
    "float shape": (_set(("avals", 1, 0), [3.0, 4]), r"avals\[1\]: shape"),
    "huge shape": (_set(("avals", 1, 0), [2**62, 4]), r"avals\[1\]: shape"),
    "65 dims": (_set(("avals", 1, 0), [1] * 65), r"avals\[1\]: shape"),
    "object dtype": (_set(("avals", 1, 1), "|O"), r"avals\[1\]: dtype '\|O'"),
    "str dtype": (_set(("avals", 1, 1), "<U3"), r"avals\[1\]: dtype"),
    "struct dtype": (_set(("avals", 1, 1), "[('a', '<f8')]"), r"avals\[1\]: dtype"),
    "in_avals differ": (_set(("in_avals", 0, 0), [4, 3]), r"in_avals"),
    "out_avals short": (_set(("out_avals",), lambda a: a[:1]), r"out_avals"),
    "inputs repeated": (_set(("inputs",), [0, 0]), r"input 1: node 0 is defined twice"),
    "consts short": (_set(("entries", 1, "consts"), []), r"entry 1 \(mul\).*2 inputs but 0"),
    "node and constant": (_set(("entries", 0, "consts"), [1.0]), r"entry 0 .*also a constant"),
    "unknown guard kind": (_set(("entries", 5, "guard"), "eval"), r"entry 5: unknown guard"),
    "guard before its node": (_set(("entries", 5, "node"), 9), r"entry 5 \(guard bool\).*used"),
    "guard on an array": (_set(("entries", 5, "node"), 3), r"entry 5 \(guard bool\).*cannot"),
    "guard value": (_set(("entries", 5, "value"), "yes"), r"entry 5 \(guard bool\).*value"),
    "guard where": (_set(("entries", 5, "where"), 7), r"entry 5 \(guard bool\).*location"),
    "in_tree not a tuple": (_set(("in_tree",), {"leaf": 0}), r"in_tree: .*must be a tuple"),
    "in_tree leaves": (_set(("in_tree",), {"tuple": [{"leaf": 0}, {"leaf": 1}]}), "in_tree"),
    "out_tree leaves": (_set(("out_tree",), {"tuple": [{"leaf": 0}]}), "out_tree"),
    "out_tree node": (_set(("out_tree",), {"set": []}), "out_tree: unknown pytree"),
    "label node": (_set(("labels",), [[99, "x"]]), r"labels\[0\]: node id 99"),
    "label text": (_set(("labels",), [[0, 5]]), r"labels\[0\]: malformed"),
    "extra field": (_set(("extra",), 1), "fields"),
    "entry field": (_set(("entries", 0, "code"), "x"), r"entry 0: malformed"),
    "params not an object": (_set(("entries", 2, "params"), [1]), r"entry 2 \(sum\): malformed"),
}


@pytest.mark.parametrize("case", sorted(STRUCTURE_CASES))
def test_the_whole_program_is_checked_on_load(case, tmp_path):
    tape, doc, x = _model_doc(tmp_path)
    assert [e.get("op", "guard").split(":")[-1] for e in doc["entries"]][:6] == [
        "Tanh", "Mul", "Sum", "GetItem", "Greater", "guard"], "the cases assume this tape"
    assert doc["arrays"] is not None and doc["labels"] == [[0, "x"]]
    edit, message = STRUCTURE_CASES[case]
    with pytest.raises(ValueError, match=message):
        tg.Tape.from_json(_mutated(doc, edit))


VALUE_CASES = {
    "function by module path": ({"__function__": "os:system"}, "not a tapegrad Function"),
    "namedtuple outside the op modules": (
        {"__namedtuple__": "tapegrad.core.tape:TapeEntry", "fields": [0, 0, 0, 0, 0, 0]},
        "not a namedtuple class"),
    "stdlib namedtuple": ({"__namedtuple__": "os:stat_result", "fields": []}, "namedtuple"),
    "row of no table": ({"__row__": "tapegrad.core.export:_TOP_FIELDS", "name": "x"}, "op table"),
    "row by attribute path": ({"__row__": "os:environ", "name": "PATH"}, "op table"),
    "object scalar": ({"__scalar__": "|O", "value": 1}, "dtype"),
    "datetime dtype": ({"__dtype__": "<M8[ns]"}, "dtype"),
    "scalar overflow": ({"__scalar__": "|i1", "value": 300}, "not a int8 value"),
    "float text": ({"__float__": "1e5"}, "not inf"),
    "builtin type": ({"__builtin_type__": "eval"}, "not int, float"),
    "slice of floats": ({"__slice__": [0.5, None, None]}, "malformed slice"),
    "unhashable key": ({"__dict__": [[[1], 2]]}, "dict key"),
    "repeated key": ({"__dict__": [["a", 1], ["a", 2]]}, "appears twice"),
    "unknown kind": ({"__class__": "x"}, "unknown value kind"),
    "extra field": ({"__ellipsis__": True, "code": "x"}, "fields"),
    "array with no file": ({"__array__": "a7", "dtype": "<f8", "shape": [3]}, "no array"),
}


@pytest.mark.parametrize("case", sorted(VALUE_CASES))
def test_values_are_built_only_from_known_kinds(case, tmp_path):
    tape, doc, x = _model_doc(tmp_path)
    value, message = VALUE_CASES[case]
    text = _mutated(doc, _set(("entries", 2, "params", "axis"), value))
    with pytest.raises(ValueError, match=r"entry 2 \(sum\), parameter 'axis': .*" + message):
        tg.Tape.from_json(text)


def test_a_file_never_imports_a_module(monkeypatch):
    tape, doc = _sum_tape()
    imported = []
    real_import, real_import_module = builtins.__import__, importlib.import_module

    def spy(name, *args, **kwargs):
        if name not in sys.modules:
            imported.append(name)
        return real_import(name, *args, **kwargs)

    def spy_module(name, *args, **kwargs):
        if name not in sys.modules:
            imported.append(name)
        return real_import_module(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", spy)
    monkeypatch.setattr(importlib, "import_module", spy_module)
    for op in ("tapegrad.ops.not_yet_imported:Op", "tapegrad.not_a_module:F",
               "this_module_does_not_exist:F", "antigravity:F"):
        with pytest.raises(ValueError) as primitive:
            tg.Tape.from_json(_mutated(doc, _set(("entries", 0, "op"), op)))
        with pytest.raises(ValueError) as value:
            tg.Tape.from_json(_mutated(doc, _set(("entries", 0, "params", "axis"),
                                                 {"__function__": op})))
        assert imported == [], op
        assert "import it before loading" in str(primitive.value)
        assert "not a tapegrad Function" in str(value.value)
    monkeypatch.undo()


def test_a_replay_checks_each_entry_against_the_file(tmp_path):
    tape, doc, x = _model_doc(tmp_path)
    # shapes and dtypes the ops do not produce: refused on the first replay, plain or traced
    for edit in (_set(("avals", 1, 1), "<f4"), _set(("avals", 3, 0), [3]),
                 _set(("avals", 2, 0), [1, 4])):
        text = _mutated(doc, edit)
        for run in (lambda t: t.replay(x), lambda t: tg.jit(t.replay)(x),
                    lambda t: tg.grad(lambda x: t.replay(x)[0])(x),
                    lambda t: Program(t)([x.numpy()])):
            with pytest.raises(ValueError, match=r"entry \d+ \(.*\) of a tape loaded from a "
                                                 r"file gives node \d+ shape"):
                run(tg.Tape.from_json(text))
    # parameter values the op cannot take: a ValueError naming the entry, not a TypeError
    for axis in ("rows", [0.5], {"__dtype__": "<f8"}):
        loaded = tg.Tape.from_json(_mutated(doc, _set(("entries", 2, "params", "axis"), axis)))
        for run in (lambda t: t.replay(x), lambda t: tg.grad(lambda x: t.replay(x)[0])(x)):
            with pytest.raises(ValueError, match=r"entry 2 \(sum\)|sum"):
                run(loaded)
    # and a faithful file replays as the original, first run and later ones
    loaded = tg.Tape.from_json(json.dumps(doc))
    for _ in range(2):
        for a, b in zip(loaded.replay(x), tape.replay(x)):
            np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_the_digest_detects_damage_not_edits(tmp_path):
    """The SHA-256 catches a damaged or swapped arrays file; a file re-signed after a
    deliberate edit loads as written (as a safetensors or PyTorch file does)."""
    w = tg.Tensor(np.arange(3.0))
    x = tg.Tensor(np.ones(3))
    _, tape = tg.trace(lambda x: x * w)(x)
    path = tmp_path / "c.safetensors"
    doc = json.loads(tape.to_json(arrays=path))
    from tapegrad import io

    io.save(path, {"a0": np.array([5.0, 6.0, 7.0])})  # an edit: the digest no longer matches
    with pytest.raises(ValueError, match="SHA-256 differs"):
        tg.Tape.from_json(json.dumps(doc))
    import hashlib

    doc["arrays"]["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()  # re-signed
    np.testing.assert_array_equal(tg.Tape.from_json(json.dumps(doc)).replay(x).numpy(),
                                  [5.0, 6.0, 7.0])
    io.save(path, {"a0": np.array([5.0, 6.0], np.float32)})  # a changed shape and dtype
    doc["arrays"]["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    with pytest.raises(ValueError, match=r"array 'a0' has shape \(2,\) and dtype float32"):
        tg.Tape.from_json(json.dumps(doc))


def test_listings_and_drawings_quote_what_the_tape_holds():
    label = 'in "x" \\'
    x = tg.Tensor(np.ones(2), label=label)
    _, tape = tg.trace(lambda x: _Scaled.apply(x, fn=tg.Function, n=1.0))(x)
    assert "fn=function" in str(tape)  # a Function class by its op label
    dot = tape.to_dot()
    strings = re.findall(r'label="((?:[^"\\]|\\.)*)"', dot)
    assert any(s.startswith(r'a<in \"x\" \\>\n') for s in strings), strings
    assert dot.count('"') % 2 == 0 and "\n  n0 [label=" in dot
