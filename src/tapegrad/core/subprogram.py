"""Sub-programs: a :class:`~tapegrad.Tape` that a primitive holds as a static parameter.

A structured control-flow primitive (``scan``, ``while_loop``, ``cond``/``switch``) holds its body
as a sub-program: the body's frozen tape (its inputs, entries and outputs) and a name for
listings. The core knows sub-programs only as this record, so that a tape holding one can be
listed (nested under its entry, like a jaxpr), written by ``Tape.to_json`` (the body's tape
nested in the entry's parameters) and read back by ``Tape.from_json``, which checks the nested
tape as strictly as the outer one and rebuilds the record through the class that registered
under the name the file gives (nothing in a file names a module to import or code to run).

A layer above the core subclasses :class:`SubProgram` (the control-flow ``Body``) with how the
sub-program runs; the subclass registers itself under its ``kind``.
"""

from __future__ import annotations

from typing import ClassVar

__all__ = ["SubProgram"]


class SubProgram:
    """A nested program held by a primitive as a parameter.

    Attributes:
        tape: The frozen :class:`~tapegrad.Tape` of the program: its inputs, entries and
            outputs (``tape.in_avals`` and ``tape.out_avals`` give their shapes and dtypes).
        name: A name for listings and messages (the traced function's name).
        kind: The name a subclass registers under; a tape file names the kind of each
            sub-program it holds, and reading it back looks the kind up among the registered
            subclasses only.
    """

    __slots__ = ("tape", "name")

    kind: ClassVar[str] = ""
    _kinds: ClassVar[dict] = {}

    def __init__(self, tape, name: str):
        self.tape = tape
        self.name = name

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.kind:
            SubProgram._kinds[cls.kind] = cls

    @classmethod
    def registered(cls, kind: str):
        """The subclass registered under ``kind`` (None if none is)."""
        return SubProgram._kinds.get(kind) if type(kind) is str else None

    @property
    def sub_program(self):
        """The program's tape (listed nested under its parent entry)."""
        return self.tape

    def fused(self) -> SubProgram:
        """This sub-program run with ``jit``'s fusion (elementwise regions as native kernels),
        for a program compiled with ``fuse=True``; a subclass that compiles overrides it (by
        default the sub-program itself)."""
        return self

    @property
    def n_in(self) -> int:
        """Number of inputs."""
        return len(self.tape.in_nodes)

    def __repr__(self) -> str:
        return f"{{{self.name}}}"
