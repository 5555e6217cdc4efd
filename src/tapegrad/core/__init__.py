"""The engine: the Tensor record and pytrees, the Function contract and the one seam that runs a
primitive, the recorder (trace) and the frozen Tape, the compiled program and its memory model,
tape files, the backends and lazy mode.

Nothing here imports from the layers above it (``ops``, the transforms, the NumPy layer).
"""

__all__: list[str] = []
