"""Linear-algebra primitives."""

from __future__ import annotations

from tapegrad.function import Function

__all__ = ["MatMul"]


def _matmul_shape(a, b):
    a, b = tuple(a), tuple(b)
    if len(a) == 0 or len(b) == 0:
        raise ValueError(f"matmul: operands must be at least 1-D, got shapes {a} and {b}")
    a2 = (1,) + a if len(a) == 1 else a
    b2 = b + (1,) if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        raise ValueError(
            f"matmul: shapes {a} and {b} are not aligned: {a2[-1]} (last dim of the first) "
            f"!= {b2[-2]} ({'only' if len(b) == 1 else 'second-to-last'} dim of the second)"
        )
    import numpy as np

    try:
        batch = np.broadcast_shapes(a2[:-2], b2[:-2])
    except ValueError:
        raise ValueError(
            f"matmul: batch dimensions of shapes {a} and {b} do not broadcast"
        ) from None
    out = tuple(batch) + (a2[-2], b2[-1])
    if len(a) == 1:
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return out


class MatMul(Function):
    """NumPy ``matmul`` (``a @ b``): 1-D operands are promoted to matrices and the added axis is
    removed; batch dimensions broadcast.

    Backward (for 2-D): ``ga = g @ b.T``, ``gb = a.T @ g``; 1-D and batched cases reshape to
    that form and sum over broadcast batch dimensions.
    """

    oper = "matmul"

    @staticmethod
    def forward(ctx, a, b):
        if a.ndim == 0 or b.ndim == 0 or a.shape[-1] != b.shape[0 if b.ndim == 1 else -2]:
            _matmul_shape(a.shape, b.shape)
        ctx.save_for_backward(a, b)
        return a @ b

    @staticmethod
    def backward(ctx, g):
        from tapegrad import numpy as tnp

        a, b = ctx.saved_tensors
        na, nb = ctx.needs_input_grad
        a_vec, b_vec = a.ndim == 1, b.ndim == 1
        if a_vec and b_vec:  # inner product -> scalar
            return (g * b if na else None), (g * a if nb else None)
        a2 = tnp.reshape(a, (1, a.shape[0])) if a_vec else a
        b2 = tnp.reshape(b, (b.shape[0], 1)) if b_vec else b
        g2 = g
        if a_vec:
            g2 = tnp.expand_dims(g2, -2)
        if b_vec:
            g2 = tnp.expand_dims(g2, -1)
        ga = gb = None
        if na:
            ga = tnp.matmul(g2, tnp.swapaxes(b2, -1, -2))
            ga = _sum_to_ndim(ga, a2.ndim)
            if a_vec:
                ga = tnp.reshape(ga, a.shape)
        if nb:
            gb = tnp.matmul(tnp.swapaxes(a2, -1, -2), g2)
            gb = _sum_to_ndim(gb, b2.ndim)
            if b_vec:
                gb = tnp.reshape(gb, b.shape)
        return ga, gb

    @classmethod
    def output_shape(cls, a, b):
        return _matmul_shape(a, b)


def _sum_to_ndim(t, ndim):
    from tapegrad import numpy as tnp

    extra = t.ndim - ndim
    if extra > 0:
        t = tnp.sum(t, axis=tuple(range(extra)))
    return t
