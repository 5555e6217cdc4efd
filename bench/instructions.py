"""Eager engine cost as machine instructions per op: a measure the machine's load cannot move.

Wall and CPU times of tiny ops move by 30% and more from run to run on a shared machine, which
hides the few-percent differences an engine change makes. This script counts instructions
instead: it runs a chain of ``--ops`` small ops (``y = tanh(y * 1.01 + 0.1)`` on 16 float64
elements, then a sum) under valgrind's callgrind, once with ``--calls`` calls of ``grad`` and
once with none, and reports the difference per op (imports and set-up cancel). Give one or more
``--src`` folders (a ``src`` of another checkout of tapegrad) to compare engines in one run: the
first is the baseline of the ratio column.

Needs ``valgrind`` on the PATH (Linux). Takes about a minute per source folder.

Run: ``python bench/instructions.py [--src OLD/src --src NEW/src] [--ops 600] [--calls 20]``.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

CHILD = """
import sys
import numpy as np
import tapegrad as tg
import tapegrad.numpy as tnp

blocks, calls = int(sys.argv[1]), int(sys.argv[2])


def f(x):
    y = x
    for _ in range(blocks):
        y = tnp.tanh(y * 1.01 + 0.1)
    return tnp.sum(y)


x = tg.Tensor(np.linspace(0.1, 1.0, 16))
g = tg.grad(f)
g(x)
for _ in range(calls):
    g(x)
"""


def instructions(src: str | None, blocks: int, calls: int) -> int:
    """Instructions callgrind counts for the child with ``calls`` calls of ``grad``."""
    env = dict(os.environ, PYTHONHASHSEED="0")
    if src:
        env["PYTHONPATH"] = os.path.abspath(src)
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "chain.py")
        with open(script, "w") as fh:
            fh.write(CHILD)
        res = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/out",
             sys.executable, script, str(blocks), str(calls)],
            env=env, capture_output=True, text=True, check=False)
    m = re.search(r"Collected : (\d+)", res.stderr)
    if res.returncode or m is None:
        raise RuntimeError(f"callgrind run failed (exit {res.returncode}):\n{res.stderr[-2000:]}")
    return int(m.group(1))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--src", action="append", default=None,
                   help="a tapegrad src folder to measure (repeat to compare; default: the "
                        "installed tapegrad)")
    p.add_argument("--ops", type=int, default=600, help="ops in the chain (3 per block)")
    p.add_argument("--calls", type=int, default=20, help="grad calls counted")
    args = p.parse_args(argv)
    if shutil.which("valgrind") is None:
        print("valgrind is not installed: nothing measured")
        return 1
    blocks = max(1, args.ops // 3)
    n_ops = 3 * blocks + 1
    rows = []
    for src in args.src or [None]:
        per_op = (instructions(src, blocks, args.calls) - instructions(src, blocks, 0)) / (
            args.calls * n_ops)
        rows.append((src or "installed tapegrad", per_op))
    base = rows[0][1]
    print(f"grad of a {n_ops}-op chain: instructions per op (forward recorded + backward)")
    print("| tapegrad | instructions per op | vs first |")
    print("|---|---|---|")
    for name, per_op in rows:
        print(f"| {name} | {per_op:,.0f} | {per_op / base:.3f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
