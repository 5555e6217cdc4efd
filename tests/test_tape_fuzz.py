"""Crafted tape files: each is a ValueError or a faithful replay, and none runs anything.

Fixed seed, a few hundred cases, beside the checkpoint fuzz test (test_io_fuzz.py). Each case
rewrites a file that ``Tape.to_json`` wrote: primitive names, parameter names (Python code
among them), parameter values, node ids, shapes, dtypes, guards, pytree structures, labels,
nesting depth, the arrays file's path (devices, a FIFO, ``/proc`` files, symbolic links, a
directory) and its contents (re-signed). Loading it must raise ``ValueError``, or give a tape
whose replays raise ``ValueError`` (a ``GuardError`` where a recorded decision changed) or
return outputs of the shapes, dtypes and structure the file declares, the same on every
replay. A case that only damages what cannot change the program's values (names, keys,
shapes, dtypes, paths, digests, depth, labels) must replay exactly as the original. No case
may create the canary file that the injected code names, or import a module.
"""

import collections
import hashlib
import json
import os
import sys

import numpy as np

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad import io
from tapegrad.core.tree import tree_flatten

SEED = 20240612
CASES = 400


def _model():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 3))

    def f(p):
        x, y = p["x"], p["y"]
        h = tnp.tanh(x @ w) * np.array([1.0, 2.0, 3.0])
        s = tnp.sum(h, axis=0, keepdims=True)
        if s[0, 0] > -100:
            s = s + 1.0
        z = tnp.reshape(h, (-1,))[::2] + y[:1]
        g = tg.grad(lambda x: tnp.sum(tnp.tanh(x) * x))(x)
        return {"s": s, "z": (z.astype(np.float32), tnp.exp(y), tnp.sum(x[:, [0, 2]], axis=1)),
                "g": g}

    p = {"x": tg.Tensor(rng.standard_normal((2, 4)), label="x"),
         "y": tg.Tensor(rng.standard_normal(3))}
    return f, p


def _leaves(out):
    leaves, treedef = tree_flatten(out)
    return [np.asarray(t.numpy()) for t in leaves], treedef


def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, (*prefix, i))


def _at(doc, path):
    for k in path:
        doc = doc[k]
    return doc


class _Fuzzer:
    def __init__(self, doc, tmp, canary, rng):
        self.doc, self.tmp, self.rng = doc, tmp, rng
        code = [f"__import__('os').system('touch {canary}')",
                f"open({str(canary)!r}, 'w')",
                f"exec(\"open({str(canary)!r}, 'w')\")"]
        self.code = code
        self.keys = [f"axis=[{code[0]}, 0][1], keepdims", f"x=1, **{{}}) or ({code[1]}) or dict(y",
                     f"{code[2]}", "into", "lambda", "", "a b", "x.y", "ctx", "__class__",
                     "bogus", "ääh", "axis\n", "_", "keepdims", "axis", "row", "key"]
        self.ops = ["os:system", "builtins:eval", "builtins:exec",
                    "tapegrad.core.program:Program", "tapegrad.core.function:Function",
                    "tapegrad.core.tape:Tape", "", 5, None, code[0],
                    "tapegrad.ops.elementwise:Sin", "tapegrad.ops.elementwise:Cos",
                    "tapegrad.ops.reduction:Sum", "tapegrad.ops.movement:GetItem",
                    "tapegrad.ops.elementwise:UnaryGrad", "tapegrad.ops.linalg:MatMul",
                    "tapegrad.ops.not_imported:F", "subprocess:Popen"]
        self.dtypes = ["|O", "<U3", "<M8[ns]", "V8", ">f8", "<f2", "<f4", "<c16", "|b1", "<i8",
                       "f8", "float64", "", 3, None, "[('a', '<f8')]", "O", "S5", "<m8"]
        fifo = tmp / "fifo"
        if hasattr(os, "mkfifo") and not fifo.exists():
            os.mkfifo(fifo)
        good = doc["arrays"]["file"]
        links = {"zero-link": "/dev/zero", "good-link": good}
        for name, target in links.items():
            if hasattr(os, "symlink") and not (tmp / name).exists():
                os.symlink(target, tmp / name)
        self.paths = ["/dev/zero", "/dev/null", "/dev/urandom", str(fifo), str(tmp / "zero-link"),
                      str(tmp / "good-link"), str(tmp), "/proc/self/environ", "/proc/self/mem",
                      "/proc/self/fd/0", "/nonexistent/c.safetensors", "", "nul\0byte",
                      "c.safetensors", good, code[0]]

    def pick(self, seq):
        return seq[int(self.rng.integers(len(seq)))]

    def value(self, depth=0):
        """A random parameter value: plain, tagged (valid and not), code strings."""
        r = self.rng
        simple = [None, True, 0, 1, -1, 2, 2**70, 0.5, -1e308, "rows", self.pick(self.code),
                  [0], [0, 1], [], {"__tuple__": [0]}, {"__tuple__": []},
                  {"__float__": "nan"}, {"__float__": "1e5"}, {"__dtype__": self.pick(self.dtypes)},
                  {"__scalar__": self.pick(self.dtypes), "value": 1},
                  {"__scalar_type__": "<f4"}, {"__builtin_type__": self.pick(["int", "eval"])},
                  {"__slice__": [None, 1, None]}, {"__slice__": [0.5]}, {"__ellipsis__": True},
                  {"__function__": self.pick(self.ops)},
                  {"__namedtuple__": self.pick(["tapegrad.ops.movement:IndexSlot",
                                                "tapegrad.core.tape:TapeEntry", "os:stat_result",
                                                "collections:OrderedDict"]),
                   "fields": [0, True]},
                  {"__row__": self.pick(["tapegrad.ops.elementwise:UNARY", "os:environ",
                                         "tapegrad.ops.elementwise:BINARY"]),
                   "name": self.pick(["tanh", "add", "nope", self.code[0]])},
                  {"__array__": self.pick(["a0", "a1", "a9", 0]), "dtype": "<f8", "shape": [3]},
                  {"__dict__": [["a", 1], [[1], 2]]}, {"__class__": "os.system"}, {}]
        choice = int(r.integers(len(simple) + (2 if depth < 3 else 0)))
        if choice < len(simple):
            return simple[choice]
        if choice == len(simple):
            return [self.value(depth + 1) for _ in range(int(r.integers(0, 3)))]
        return {"__tuple__": [self.value(depth + 1) for _ in range(int(r.integers(0, 3)))]}

    def deep(self):
        n = int(self.pick([300, 600, 3000]))  # (100,000 deep: test_export.py)
        kind = int(self.rng.integers(4))
        if kind == 0:
            return "[" * n, "]" * n
        if kind == 1:
            return '{"__tuple__": [' * n, "]}" * n
        if kind == 2:
            return '{"tuple": [' * n + '{"leaf": 0}', "]}" * n
        return '{"a": ' * n, "}" * n

    def case(self):
        """``(kind, text, strict, arrays kwarg)`` for one crafted file."""
        r = self.rng
        doc = json.loads(json.dumps(self.doc))
        ops = [e for e in doc["entries"] if "op" in e]
        guards = [e for e in doc["entries"] if "guard" in e]
        kind = self.pick(["param-key", "param-value", "op", "node-id", "aval", "in-tree",
                          "out-tree", "guard", "label", "arrays-path", "arrays-kwarg",
                          "arrays-digest", "arrays-content", "deep", "random", "text"])
        strict, kwargs = True, {}
        if kind == "param-key":
            e = self.pick(ops)
            key = self.pick(self.keys)
            if e["params"] and r.integers(2):
                old = self.pick(list(e["params"]))
                e["params"][key] = e["params"].pop(old)
            else:
                e["params"][key] = self.value()
                strict = key not in ("axis", "keepdims", "row", "key")  # a valid edit
        elif kind == "param-value":
            e = self.pick([e for e in ops if e["params"]])
            e["params"][self.pick(list(e["params"]))] = self.value()
            strict = False
        elif kind == "op":
            self.pick(ops)["op"] = self.pick(self.ops)
            strict = False
        elif kind == "node-id":
            ids = [-2, -1, 0, 1, 5, len(doc["avals"]) - 1, len(doc["avals"]), 2**70, True, 1.0,
                   "1", None, self.code[0]]
            where = int(r.integers(4))
            target = (doc["inputs"] if where == 0 else doc["outputs"] if where == 1
                      else self.pick(ops)["in" if where == 2 else "out"])
            if target:
                target[int(r.integers(len(target)))] = self.pick(ids)
            strict = False
        elif kind == "aval":
            table = self.pick(["avals", "in_avals", "out_avals"])
            aval = self.pick(doc[table])
            if r.integers(2):
                aval[1] = self.pick(self.dtypes)
            else:
                shape = aval[0]
                aval[0] = self.pick([[-1], shape + [1], [1] + shape, shape[:-1], [2**63],
                                     [1.5], [True], "3", [[2]], [1] * 65, [0] * len(shape)])
            if r.integers(4) == 0:
                doc[table] = doc[table][: int(r.integers(len(doc[table])))]
        elif kind == "in-tree":
            doc["in_tree"] = self.pick([{"leaf": 0}, {"tuple": [{"leaf": 0}, {"leaf": 1}]},
                                        {"list": [doc["in_tree"]["tuple"][0]]},
                                        {"tuple": [{"dict": [["x", {"leaf": 1}],
                                                             ["y", {"leaf": 0}]]}]},
                                        {"tuple": [{"dict": [[[1], {"leaf": 0}],
                                                             ["y", {"leaf": 1}]]}]},
                                        {"tuple": [{"leaf": -1}]}, {"set": []}, None])
        elif kind == "out-tree":
            doc["out_tree"] = self.pick([{"tuple": [{"leaf": i} for i in range(5)]},
                                         {"list": [{"leaf": i} for i in range(5)]},
                                         {"tuple": [{"leaf": 0}]}, {"leaf": 0}, {"node": "os"},
                                         {"dict": [[{"__function__": "os:system"},
                                                    {"leaf": 0}]]}])
            strict = False
        elif kind == "guard":
            g = self.pick(guards)
            field = self.pick(["guard", "node", "value", "where"])
            g[field] = self.pick({"guard": ["int", "float", "complex", "item", "eval", None],
                                  "node": [0, 6, 7, 8, 99, -1, "7"],
                                  "value": [False, 1, 1.0, "True", None, [True]],
                                  "where": [self.code[0], "", 5, None]}[field])
            strict = field in ("guard", "where")
        elif kind == "label":
            doc["labels"] = self.pick([[[0, self.code[0]]], [[1, 'a"b\\']], [[0, "x"], [0, "y"]],
                                       [[99, "x"]], [[0, 5]], [["0", "x"]], [[5, "\n}"]]])
        elif kind == "arrays-path":
            doc["arrays"]["file"] = self.pick(self.paths)
        elif kind == "arrays-kwarg":
            kwargs = {"arrays": self.pick(self.paths)}
        elif kind == "arrays-digest":
            doc["arrays"]["sha256"] = self.pick(["0" * 64, "A" * 64, "", None, 5, "g" * 64,
                                                 doc["arrays"]["sha256"].upper()])
        elif kind == "arrays-content":
            strict = self.recontent(doc)
        elif kind == "deep":
            text = json.dumps(doc)
            paths = [p for p in _paths(doc) if p and not isinstance(_at(doc, p), (dict, list))]
            path = self.pick(paths)
            marker = "\u0000deep\u0000"
            parent = _at(doc, path[:-1])
            parent[path[-1]] = marker
            open_, close = self.deep()
            text = json.dumps(doc).replace(json.dumps(marker), open_ + close, 1)
            return kind, text, True, kwargs
        elif kind == "random":
            path = self.pick([p for p in _paths(doc) if p])
            parent = _at(doc, path[:-1])
            if r.integers(3) == 0 and isinstance(parent, dict):
                del parent[path[-1]]
            else:
                parent[path[-1]] = self.value()
            values = {"params", "consts", "in", "out", "outputs", "inputs", "op", "node",
                      "value", "out_tree", "fields"}
            strict = not values & {p for p in path if isinstance(p, str)}
        else:  # text damage
            text = json.dumps(doc)
            pos = int(r.integers(len(text)))
            text = (text[:pos] if r.integers(2) else
                    text[:pos] + chr(int(r.integers(32, 127))) + text[pos + 1:])
            return kind, text, False, kwargs
        return kind, json.dumps(doc), strict, kwargs

    def recontent(self, doc) -> bool:
        """Rewrite the arrays file and re-sign it in the JSON: a deliberate edit."""
        good = io.load(doc["arrays"]["file"])
        r = self.rng
        edit = int(r.integers(6))
        arrays = dict(good)
        key = self.pick(sorted(arrays))
        if edit == 0:
            arrays[key] = arrays[key] + 1.0
        elif edit == 1:
            arrays[key] = arrays[key].astype(np.float32)
        elif edit == 2:
            arrays[key] = arrays[key].reshape(-1)[:-1]
        elif edit == 3:
            arrays["a99"] = np.zeros(2)
        elif edit == 4:
            arrays = {"nested": arrays}
        else:
            arrays[key] = 3
        path = self.tmp / f"edited-{int(r.integers(1 << 30))}.safetensors"
        io.save(path, arrays)
        doc["arrays"] = {"file": str(path),
                         "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
        return edit == 3


def test_crafted_tape_files_fail_cleanly_or_replay_faithfully(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    canary = tmp_path / "canary"
    f, p = _model()
    _, tape = tg.trace(f)(p)
    doc = json.loads(tape.to_json(arrays=tmp_path / "consts.safetensors"))
    want, want_tree = _leaves(tape.replay(p))
    fuzz = _Fuzzer(doc, tmp_path, canary, np.random.default_rng(SEED))
    outcomes = collections.Counter()
    modules = set(sys.modules)
    for case in range(CASES):
        kind, text, strict, kwargs = fuzz.case()
        label = f"case {case} ({kind})"
        try:
            loaded = tg.Tape.from_json(text, **kwargs)
        except ValueError as e:
            assert str(e).startswith("Tape.from_json: "), (label, str(e))
            outcomes["load error"] += 1
            continue
        except Exception as e:
            raise AssertionError(f"{label}: {type(e).__name__}: {e}\n{text[:2000]}") from e
        str(loaded), loaded.to_dot()  # listings never fail on what loaded
        if case % 4 == 0:  # and what loaded is written again, and reads back the same
            again = tg.Tape.from_json(loaded.to_json(arrays=tmp_path / "again.safetensors"))
            assert str(again) == str(loaded), label
        runs = [loaded.replay, loaded.replay]
        if case % 8 == 0:
            runs.append(tg.jit(loaded.replay))
        results = []
        try:
            for run in runs:
                results.append(_leaves(run(p)))
        except (ValueError, tg.GuardError):
            outcomes["replay error"] += 1
            continue
        except Exception as e:
            raise AssertionError(f"{label}: {type(e).__name__}: {e}\n{text[:2000]}") from e
        for got, tree in results:
            assert tree == loaded.out_treedef, label
            assert [(g.shape, g.dtype) for g in got] == [
                (tuple(s), d) for s, d in loaded.out_avals], label
            for a, b in zip(got, results[0][0]):
                np.testing.assert_array_equal(a, b, err_msg=label)
        if strict:
            assert results[0][1] == want_tree, label
            for a, b in zip(results[0][0], want):
                np.testing.assert_array_equal(a, b, err_msg=label)
            outcomes["identical"] += 1
        else:
            outcomes["loaded as written"] += 1
    assert not canary.exists()
    assert not set(sys.modules) - modules, set(sys.modules) - modules
    assert outcomes["load error"] > CASES // 2 and outcomes["identical"] > 10, outcomes
