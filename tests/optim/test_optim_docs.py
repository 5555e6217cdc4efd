"""docs/optim.md and the module docstrings run as written."""

import doctest
import pathlib
import re

import pytest

import tapegrad.io
import tapegrad.optim._extra
import tapegrad.optim._extra_combinators
import tapegrad.optim._extra_lbfgs
import tapegrad.optim._extra_optimizers
import tapegrad.optim._extra_schedule_free
import tapegrad.optim.combinators
import tapegrad.optim.optimizer
import tapegrad.optim.schedules
import tapegrad.optim.transforms

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "optim.md"


def test_optim_md_runs_top_to_bottom():
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert len(blocks) >= 5
    exec(compile("\n".join(blocks), str(DOC), "exec"), {"__name__": "optim_md"})


@pytest.mark.parametrize(
    "module",
    [
        tapegrad.optim.transforms,
        tapegrad.optim.schedules,
        tapegrad.optim.optimizer,
        tapegrad.optim.combinators,
        tapegrad.optim._extra,
        tapegrad.optim._extra_combinators,
        tapegrad.optim._extra_lbfgs,
        tapegrad.optim._extra_optimizers,
        tapegrad.optim._extra_schedule_free,
        tapegrad.io,
    ],
    ids=lambda m: m.__name__,
)
def test_docstring_examples(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
