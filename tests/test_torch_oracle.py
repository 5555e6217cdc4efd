"""torch.autograd as an oracle for the NumPy/SciPy surface (issue 18): for every op torch
has, the gradient of a scalar loss of tapegrad's op equals torch's (conjugated for complex
inputs: tapegrad follows JAX, ``df/dx - i df/dy``, torch holds ``df/dx + i df/dy``), forward
mode equals the directional derivative torch's gradient gives (``Re(sum(conj(g_torch) t))``),
and for real inputs the Hessian-vector product equals torch's double backward.

The per-module files hold a few older cross-checks (tests/ops/test_fft.py,
tests/ops/test_linalg_more.py, tests/scipy/test_special.py, ...); this table covers the FFT
family, numpy.linalg's decompositions and norms, the special functions torch.special has, the
scans, NaN-reductions, order statistics, products, the distributions of scipy.stats,
scipy.linalg and signal.convolve. Skipped without torch."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
import tapegrad.scipy.linalg as tsl
import tapegrad.scipy.signal as tsig
import tapegrad.scipy.special as tsp
from tapegrad.scipy import stats as tst

torch = pytest.importorskip("torch")
L, F = tnp.linalg, tnp.fft
RNG = np.random.default_rng(2024)


def r(*shape, lo=-1.0, hi=1.0):
    return RNG.uniform(lo, hi, shape)


def c(*shape):
    return r(*shape) + 1j * r(*shape)


def pos(*shape, lo=0.3, hi=2.0):
    return RNG.uniform(lo, hi, shape)


def spd(n, cplx=False):
    m = c(n, n) if cplx else r(n, n)
    return m @ np.conj(m).T + n * np.eye(n)


def dense(n, cplx=False):
    return (c(n, n) if cplx else r(n, n)) * 0.5 + 2.0 * np.eye(n) + 0.3 * np.triu(np.ones((n, n)))


class Case(NamedTuple):
    name: str
    ours: Callable  # Tensors -> Tensor or tuple of Tensors
    theirs: Callable  # (torch, *torch tensors) -> tensor or tuple
    args: tuple  # NumPy arrays; every floating/complex one is differentiated
    hvp: bool = True  # also compare the Hessian-vector product (real inputs)
    atol: float = 1e-9


def _weights(shape, salt):
    return np.cos(np.arange(int(np.prod(shape))) * 0.7 + salt).reshape(shape) + 1.5


def _loss_np(outs):
    outs = outs if isinstance(outs, (tuple, list)) else (outs,)
    total = 0.0
    for k, y in enumerate(outs):
        w = _weights(y.shape, k)
        if y.dtype.kind == "c":
            total = total + tnp.sum(tnp.real(y) * w) + tnp.sum(tnp.imag(y) * (w - 1.0)) \
                + 0.5 * tnp.sum(tnp.real(y * tnp.conj(y)))
        else:
            total = total + tnp.sum(y * w) + 0.5 * tnp.sum(y * y)
    return total


def _loss_t(outs):
    outs = outs if isinstance(outs, (tuple, list)) else (outs,)
    total = 0.0
    for k, y in enumerate(outs):
        w = torch.tensor(_weights(tuple(y.shape), k))
        if y.is_complex():
            total = total + (y.real * w).sum() + (y.imag * (w - 1.0)).sum() \
                + 0.5 * (y.abs() ** 2).sum()
        else:
            total = total + (y * w).sum() + 0.5 * (y * y).sum()
    return total


def _diff_positions(args):
    return tuple(i for i, a in enumerate(args) if np.asarray(a).dtype.kind in "fc")


def _torch_grads(case, create_graph=False):
    ts = [torch.tensor(a, requires_grad=np.asarray(a).dtype.kind in "fc") for a in case.args]
    loss = _loss_t(case.theirs(torch, *ts))
    diff = [ts[i] for i in _diff_positions(case.args)]
    gs = torch.autograd.grad(loss, diff, create_graph=create_graph)
    return ts, diff, gs


def _ours_loss(case):
    pos_ = _diff_positions(case.args)

    def f(*d):
        full = [tg.Tensor(a) for a in case.args]
        for i, v in zip(pos_, d):
            full[i] = v
        return _loss_np(case.ours(*full))

    return f, pos_


def _check(case):
    f, pos_ = _ours_loss(case)
    primals = [tg.Tensor(case.args[i]) for i in pos_]
    ours = tg.grad(f, argnums=tuple(range(len(pos_))))(*primals)
    _, _, gs = _torch_grads(case)
    for o, g in zip(ours, gs):
        want = g.resolve_conj().numpy()
        # torch's complex gradient is the conjugate of JAX's (and tapegrad's)
        np.testing.assert_allclose(o.numpy(), np.conj(want) if np.iscomplexobj(want) else want,
                                   rtol=1e-7, atol=case.atol, err_msg=f"{case.name}: reverse")
    # forward mode: the directional derivative torch's gradient gives
    tangents = tuple(tg.Tensor(c(*p.shape) if p.dtype.kind == "c" else r(*p.shape))
                     for p in primals)
    _, t_out = tg.jvp(f, tuple(primals), tangents)
    want = sum(float(np.real(np.sum(np.conj(g.resolve_conj().numpy()) * t.numpy())))
               for g, t in zip(gs, tangents))
    np.testing.assert_allclose(float(t_out), want, rtol=1e-7, atol=case.atol,
                               err_msg=f"{case.name}: forward")
    if case.hvp and all(p.dtype.kind == "f" for p in primals):
        vs = tuple(tg.Tensor(r(*p.shape)) for p in primals)
        ours_h = tg.hvp(f, tuple(primals), vs)
        ours_h = ours_h if isinstance(ours_h, tuple) else (ours_h,)
        ts, diff, g1 = _torch_grads(case, create_graph=True)
        dot = sum((g * torch.tensor(v.numpy())).sum() for g, v in zip(g1, vs))
        hs = torch.autograd.grad(dot, diff, allow_unused=True)
        for o, h in zip(ours_h, hs):
            want = np.zeros(o.shape) if h is None else h.numpy()
            np.testing.assert_allclose(o.numpy(), want, rtol=1e-6, atol=max(case.atol, 1e-8),
                                       err_msg=f"{case.name}: Hessian-vector product")


def _sym(x):
    return (x + tnp.conj(tnp.swapaxes(x, -1, -2))) / 2


def _tsym(x):
    return (x + x.mH) / 2


def _sq(v):
    return tnp.real(v * tnp.conj(v))


def via(ours, theirs: str, *a, tkw=None, **kw):
    """``(ours_fn, theirs_fn)`` calling ``ours`` and torch's ``theirs`` (a dotted path under
    ``torch``) with the same extra arguments (torch's keywords ``tkw`` when they differ)."""

    def o(*x):
        return ours(*x, *a, **kw)

    def t(T, *x):
        fn = T
        for part in theirs.split("."):
            fn = getattr(fn, part)
        return fn(*x, *a, **(kw if tkw is None else tkw))

    return o, t


W3 = np.array([1.0, 2.0, 3.0])
SHAPES = np.array([0.5, 1.5, 3.0, 2.2])
COUNTS = np.array([0.0, 1.0, 3.0, 5.0])

CASES = [
    # -- numpy.fft: every transform, n/s/axes/norm, real and complex inputs --------------------
    *[Case(f"fft.{n}_{norm}_{cx}", *via(getattr(F, n), f"fft.{n}", 7, -1, norm),
           (c(2, 5) if cx == "c" else r(2, 5),), hvp=False)
      for n in ("fft", "ifft", "hfft") for norm in ("backward", "ortho", "forward")
      for cx in ("r", "c")],
    *[Case(f"fft.{n}_{norm}", *via(getattr(F, n), f"fft.{n}", 6, 0, norm), (r(5, 2),))
      for n in ("rfft", "ihfft") for norm in ("backward", "ortho", "forward")],
    *[Case(f"fft.irfft_{norm}", *via(F.irfft, "fft.irfft", 8, norm=norm), (c(3, 5),))
      for norm in ("backward", "ortho", "forward")],
    *[Case(f"fft.{n}", *via(getattr(F, n), f"fft.{n}", s=(3, 4), axes=(0, 2),
                            tkw={"s": (3, 4), "dim": (0, 2)}), (c(4, 2, 3),))
      for n in ("fftn", "ifftn")],
    *[Case(f"fft.{n}", *via(getattr(F, n), f"fft.{n}", s=(3, 4)), (c(2, 4, 3),))
      for n in ("fft2", "ifft2", "irfft2", "irfftn")],
    *[Case(f"fft.{n}", *via(getattr(F, n), f"fft.{n}", s=(4, 6), norm="ortho"), (r(3, 5),))
      for n in ("rfft2", "rfftn")],
    *[Case(f"fft.{n}", *via(getattr(F, n), f"fft.{n}", axes=(0, 1), tkw={"dim": (0, 1)}),
           (c(3, 4),))
      for n in ("fftshift", "ifftshift")],
    # -- numpy.linalg ---------------------------------------------------------------------------
    *[Case(f"linalg.eigh_{cx}", lambda x: (L.eigh(_sym(x))[0], _sq(L.eigh(_sym(x))[1]) * W3),
           lambda T, x: (T.linalg.eigh(_tsym(x))[0],
                         T.linalg.eigh(_tsym(x))[1].abs() ** 2 * T.tensor(W3)),
           (spd(3, cx == "c"),), hvp=False) for cx in ("r", "c")],
    *[Case(f"linalg.eigvalsh_{cx}", lambda x: L.eigvalsh(_sym(x)),
           lambda T, x: T.linalg.eigvalsh(_tsym(x)), (spd(3, cx == "c"),)) for cx in ("r", "c")],
    *[Case(f"linalg.eig_{cx}", lambda x: (L.eig(x)[0] ** 2, _sq(L.eig(x)[1])),
           lambda T, x: (T.linalg.eig(x)[0] ** 2, T.linalg.eig(x)[1].abs() ** 2),
           (dense(3, cx == "c"),), hvp=False) for cx in ("r", "c")],
    Case("linalg.eigvals", lambda x: L.eigvals(x), lambda T, x: T.linalg.eigvals(x),
         (dense(3),), hvp=False),
    *[Case(f"linalg.svdvals_{cx}", L.svdvals, lambda T, x: T.linalg.svdvals(x),
           (dense(3, cx == "c")[:, :2],)) for cx in ("r", "c")],
    *[Case(f"linalg.qr_{cx}", lambda x: L.qr(x), lambda T, x: T.linalg.qr(x),
           (dense(3, cx == "c")[:, :2],), hvp=False) for cx in ("r", "c")],
    *[Case(f"linalg.pinv_{cx}", L.pinv, lambda T, x: T.linalg.pinv(x),
           (dense(3, cx == "c")[:2],), hvp=False) for cx in ("r", "c")],
    Case("linalg.lstsq", lambda a, b: L.lstsq(a, b)[0],
         lambda T, a, b: T.linalg.lstsq(a, b).solution, (dense(4)[:, :2], r(4, 2))),
    *[Case(f"linalg.matrix_norm_{o}_{cx}", *via(L.matrix_norm, "linalg.matrix_norm", ord=o),
           (dense(3, cx == "c")[None].repeat(2, 0),), hvp=cx == "r")
      for o in ("fro", "nuc", 2, -2, 1, -1, np.inf, -np.inf) for cx in ("r", "c")],
    *[Case(f"linalg.vector_norm_{o}", *via(L.vector_norm, "linalg.vector_norm", ord=o, axis=-1,
                                           tkw={"ord": o, "dim": -1}), (c(2, 4),))
      for o in (1, 2, 3, np.inf)],
    Case("linalg.norm_default", lambda x: L.norm(x), lambda T, x: T.linalg.norm(x), (r(3, 4),)),
    *[Case(f"linalg.det_{cx}", L.det, lambda T, x: T.linalg.det(x), (dense(3, cx == "c"),))
      for cx in ("r", "c")],
    Case("linalg.slogdet", lambda x: L.slogdet(x)[1], lambda T, x: T.linalg.slogdet(x)[1],
         (dense(3),)),
    *[Case(f"linalg.inv_{cx}", L.inv, lambda T, x: T.linalg.inv(x), (dense(3, cx == "c"),))
      for cx in ("r", "c")],
    Case("linalg.solve", L.solve, lambda T, a, b: T.linalg.solve(a, b), (dense(3), r(3, 2))),
    Case("linalg.cholesky", lambda x: L.cholesky(_sym(x)),
         lambda T, x: T.linalg.cholesky(_tsym(x)), (spd(3),)),
    Case("linalg.matrix_power", lambda x: L.matrix_power(x, 3),
         lambda T, x: T.linalg.matrix_power(x, 3), (r(3, 3),)),
    Case("linalg.multi_dot", lambda a, b, d: L.multi_dot([a, b, d]),
         lambda T, a, b, d: T.linalg.multi_dot([a, b, d]), (r(2, 3), r(3, 4), r(4, 2))),
    Case("linalg.cond", L.cond, lambda T, x: T.linalg.cond(x), (dense(3),)),
    Case("linalg.tensorinv", lambda x: L.tensorinv(x, ind=1),
         lambda T, x: T.linalg.tensorinv(x, ind=1), (dense(4).reshape(4, 2, 2),)),
    Case("linalg.tensorsolve", L.tensorsolve, lambda T, a, b: T.linalg.tensorsolve(a, b),
         (dense(4).reshape(2, 2, 4), r(2, 2))),
    Case("linalg.cross", L.cross, lambda T, a, b: T.linalg.cross(a, b), (r(2, 3), r(2, 3))),
    Case("linalg.vecdot", L.vecdot, lambda T, a, b: T.linalg.vecdot(a, b), (c(2, 3), c(2, 3))),
    Case("linalg.diagonal", lambda x: L.diagonal(x, offset=1),
         lambda T, x: T.linalg.diagonal(x, offset=1), (r(2, 3, 3),)),
    # -- scipy.special (what torch.special has) ------------------------------------------------
    *[Case(f"special.{n}", *via(getattr(tsp, n), f"special.{n}"), (x,))
      for n, x in [
          ("gammaln", pos(4)), ("digamma", pos(4)), ("psi", pos(4)), ("erf", r(4)),
          ("erfc", r(4)), ("erfinv", r(4, lo=-0.9, hi=0.9)), ("expit", r(4) * 3),
          ("logit", pos(4, lo=0.1, hi=0.9)), ("log_ndtr", r(4) * 3), ("ndtr", r(4) * 2),
          ("ndtri", pos(4, lo=0.1, hi=0.9)), ("i0", r(4) * 2), ("i0e", r(4) * 2),
          ("i1", r(4) * 2), ("i1e", r(4) * 2), ("entr", pos(4)),
      ]],
    *[Case(f"special.polygamma_{n}", lambda x, n=n: tsp.polygamma(n, x),
           lambda T, x, n=n: T.special.polygamma(n, x), (pos(4),)) for n in (1, 2, 3)],
    Case("special.multigammaln", lambda x: tsp.multigammaln(x, 3),
         lambda T, x: T.special.multigammaln(x, 3), (pos(4, lo=2.0, hi=4.0),)),
    Case("special.xlogy", tsp.xlogy, lambda T, x, y: T.special.xlogy(x, y), (r(4), pos(4))),
    Case("special.xlog1py", tsp.xlog1py, lambda T, x, y: T.special.xlog1py(x, y),
         (r(4), pos(4))),
    # torch differentiates the regularized incomplete gamma in x only
    Case("special.gammainc_x", lambda x: tsp.gammainc(SHAPES, x),
         lambda T, x: T.special.gammainc(T.tensor(SHAPES), x), (pos(4),)),
    Case("special.gammaincc_x", lambda x: tsp.gammaincc(SHAPES, x),
         lambda T, x: T.special.gammaincc(T.tensor(SHAPES), x), (pos(4),)),
    Case("special.logsumexp", lambda x: tsp.logsumexp(x, axis=1),
         lambda T, x: T.logsumexp(x, dim=1), (r(3, 4),)),
    Case("special.softmax", lambda x: tsp.softmax(x, axis=0),
         lambda T, x: T.softmax(x, dim=0), (r(3, 4),)),
    Case("special.log_softmax", lambda x: tsp.log_softmax(x, axis=-1),
         lambda T, x: T.log_softmax(x, dim=-1), (r(3, 4),)),
    Case("sinc", tnp.sinc, lambda T, x: T.sinc(x), (r(5) * 2,)),
    # -- scans, NaN-reductions, order statistics, statistics ----------------------------------
    *[Case(f"cumsum_{cx}", lambda x: tnp.cumsum(x, axis=1), lambda T, x: T.cumsum(x, dim=1),
           (c(2, 4) if cx == "c" else r(2, 4),)) for cx in ("r", "c")],
    Case("cumprod", lambda x: tnp.cumprod(x, axis=0), lambda T, x: T.cumprod(x, dim=0),
         (r(4, 2),)),
    Case("cumulative_sum", lambda x: tnp.cumulative_sum(x, axis=1),
         lambda T, x: T.cumsum(x, dim=1), (r(2, 4),)),
    Case("cumulative_prod", lambda x: tnp.cumulative_prod(x, axis=1),
         lambda T, x: T.cumprod(x, dim=1), (r(2, 4),)),
    Case("nansum", lambda x: tnp.nansum(x, axis=1),
         lambda T, x: T.nansum(x, dim=1), (np.where(r(3, 4) > 0.5, np.nan, r(3, 4)),)),
    Case("nanmean", lambda x: tnp.nanmean(x, axis=1),
         lambda T, x: T.nanmean(x, dim=1), (np.where(r(3, 4) > 0.5, np.nan, r(3, 4)),)),
    # torch's median is the lower middle value: odd lengths, where NumPy's agrees
    Case("median", lambda x: tnp.median(x, axis=1), lambda T, x: T.median(x, dim=1).values,
         (r(2, 5),)),
    Case("nanmedian", lambda x: tnp.nanmedian(x, axis=1),
         lambda T, x: T.nanmedian(x, dim=1).values,
         (np.array([[0.3, np.nan, -0.2, 0.8], [0.1, 0.5, -0.7, np.nan]]),)),
    Case("quantile", lambda x: tnp.quantile(x, [0.2, 0.5, 0.9], axis=1),
         lambda T, x: T.quantile(x, T.tensor([0.2, 0.5, 0.9], dtype=T.float64), dim=1), (r(3, 6),)),
    Case("nanquantile", lambda x: tnp.nanquantile(x, 0.3, axis=1),
         lambda T, x: T.nanquantile(x, 0.3, dim=1),
         (np.array([[0.3, np.nan, -0.2, 0.8], [0.1, 0.5, -0.7, 0.2]]),)),
    Case("ptp", lambda x: tnp.ptp(x, axis=1), lambda T, x: T.amax(x, 1) - T.amin(x, 1),
         (r(3, 4),)),
    Case("var_correction", lambda x: tnp.var(x, axis=1, correction=1),
         lambda T, x: T.var(x, dim=1, correction=1), (r(3, 4),)),
    Case("std_complex", lambda x: tnp.std(x, axis=0), lambda T, x: T.std(x, dim=0, correction=0),
         (c(4, 2),)),
    Case("cov", tnp.cov, lambda T, x: T.cov(x), (r(3, 5),)),
    Case("corrcoef", tnp.corrcoef, lambda T, x: T.corrcoef(x), (r(3, 5),)),
    Case("diff", lambda x: tnp.diff(x, n=2, axis=1), lambda T, x: T.diff(x, n=2, dim=1),
         (r(2, 5),)),
    Case("trapezoid", lambda y, x: tnp.trapezoid(y, x), lambda T, y, x: T.trapezoid(y, x),
         (r(2, 5), np.cumsum(pos(5)))),
    Case("sort", lambda x: tnp.sort(x, axis=1), lambda T, x: T.sort(x, dim=1).values,
         (r(3, 5),)),
    Case("nanmax", lambda x: tnp.nanmax(x, axis=1), lambda T, x: T.amax(T.nan_to_num(
        x, nan=-np.inf), 1), (np.array([[0.3, np.nan, -0.2], [0.1, 0.5, -0.7]]),)),
    Case("logaddexp2", tnp.logaddexp2, lambda T, x, y: T.logaddexp2(x, y), (r(4), r(4))),
    Case("float_power", tnp.float_power, lambda T, x, y: T.float_power(x, y), (pos(4), r(4))),
    Case("cbrt_positive", tnp.cbrt, lambda T, x: x ** (1 / 3), (pos(4),)),
    # -- products and shape ---------------------------------------------------------------------
    *[Case(f"kron_{cx}", tnp.kron, lambda T, a, b: T.kron(a, b),
           (c(2, 2), c(2, 3)) if cx == "c" else (r(2, 2), r(2, 3))) for cx in ("r", "c")],
    Case("cross", tnp.cross, lambda T, a, b: T.linalg.cross(a, b), (r(4, 3), r(1, 3))),
    # (torch.vander's own backward fails with an in-place error: the powers, written out)
    Case("vander", tnp.vander,
         lambda T, x: x[:, None] ** T.arange(3, -1, -1, dtype=T.float64), (r(4),)),
    Case("einsum", lambda a, b: tnp.einsum("ij,jk->ik", a, b),
         lambda T, a, b: T.einsum("ij,jk->ik", a, b), (c(2, 3), c(3, 2))),
    Case("rot90", lambda x: tnp.rot90(x, 1), lambda T, x: T.rot90(x, 1), (r(2, 3),)),
    Case("diagflat", tnp.diagflat, lambda T, x: T.diagflat(x), (r(2, 2),)),
    Case("tril", lambda x: tnp.tril(x, -1), lambda T, x: T.tril(x, -1), (r(3, 3),)),
    # -- scipy.stats: torch.distributions, derivatives in the value and every parameter ---------
    Case("stats.norm.logpdf", tst.norm.logpdf,
         lambda T, x, m, s: T.distributions.Normal(m, s).log_prob(x), (r(4), r(4), pos(4))),
    Case("stats.norm.cdf", tst.norm.cdf,
         lambda T, x, m, s: T.distributions.Normal(m, s).cdf(x), (r(4), r(4), pos(4))),
    Case("stats.t.logpdf", lambda x, df, m, s: tst.t.logpdf(x, df, m, s),
         lambda T, x, df, m, s: T.distributions.StudentT(df, m, s).log_prob(x),
         (r(4), pos(4, lo=1.0, hi=5.0), r(4), pos(4)), hvp=False),
    Case("stats.gamma.logpdf", lambda x, a, s: tst.gamma.logpdf(x, a, 0.0, s),
         lambda T, x, a, s: T.distributions.Gamma(a, 1.0 / s).log_prob(x),
         (pos(4), pos(4, lo=0.8, hi=3.0), pos(4))),
    Case("stats.beta.logpdf", tst.beta.logpdf,
         lambda T, x, a, b: T.distributions.Beta(a, b).log_prob(x),
         (pos(4, lo=0.1, hi=0.9), pos(4, lo=0.8, hi=3.0), pos(4, lo=0.8, hi=3.0))),
    Case("stats.chi2.logpdf", tst.chi2.logpdf,
         lambda T, x, df: T.distributions.Chi2(df).log_prob(x),
         (pos(4), pos(4, lo=1.0, hi=4.0))),
    Case("stats.poisson.logpmf", lambda mu: tst.poisson.logpmf(COUNTS.astype(int), mu),
         lambda T, mu: T.distributions.Poisson(mu).log_prob(T.tensor(COUNTS)),
         (pos(4, lo=0.5, hi=4.0),)),
    Case("stats.dirichlet.logpdf", tst.dirichlet.logpdf,
         lambda T, x, a: T.distributions.Dirichlet(a).log_prob(x),
         (np.array([0.2, 0.3, 0.5]), pos(3, lo=0.8, hi=3.0))),
    Case("stats.multivariate_normal.logpdf", tst.multivariate_normal.logpdf,
         lambda T, x, m, cv: T.distributions.MultivariateNormal(m, cv).log_prob(x),
         (r(4, 3), r(3), spd(3)), hvp=False),
    # -- scipy.linalg, scipy.signal -------------------------------------------------------------
    *[Case(f"slinalg.expm_{cx}", tsl.expm, lambda T, x: T.linalg.matrix_exp(x),
           (c(3, 3) if cx == "c" else r(3, 3),)) for cx in ("r", "c")],
    Case("slinalg.solve_triangular", lambda a, b: tsl.solve_triangular(tnp.tril(a), b,
                                                                       lower=True),
         lambda T, a, b: T.linalg.solve_triangular(T.tril(a), b, upper=False),
         (dense(3).T, r(3, 2))),
    Case("slinalg.cholesky", lambda x: tsl.cholesky(_sym(x), lower=True),
         lambda T, x: T.linalg.cholesky(_tsym(x)), (spd(3),)),
    Case("slinalg.inv", tsl.inv, lambda T, x: T.linalg.inv(x), (dense(3),)),
    Case("slinalg.det", tsl.det, lambda T, x: T.linalg.det(x), (dense(3),)),
    Case("signal.convolve_full_1d", lambda x, k: tsig.convolve(x, k, "full"),
         lambda T, x, k: T.nn.functional.conv1d(x[None, None], k.flip(0)[None, None],
                                                padding=k.shape[0] - 1)[0, 0], (r(6), r(3))),
    Case("signal.convolve_valid_2d", lambda x, k: tsig.convolve(x, k, "valid"),
         lambda T, x, k: T.nn.functional.conv2d(x[None, None], k.flip(0, 1)[None, None])[0, 0],
         (r(5, 4), r(2, 3))),
    Case("signal.correlate_valid_2d", lambda x, k: tsig.correlate(x, k, "valid"),
         lambda T, x, k: T.nn.functional.conv2d(x[None, None], k[None, None])[0, 0],
         (r(5, 4), r(2, 3))),
]


@pytest.mark.parametrize("case", CASES, ids=[cs.name for cs in CASES])
def test_matches_torch_autograd(case):
    _check(case)


def test_the_oracle_sees_a_wrong_convention():
    # guard against a check that cannot fail: the conjugated (torch) convention must not pass
    case = Case("abs2", lambda z: tnp.abs(z) ** 2, lambda T, z: z.abs() ** 2, (c(3),))
    f, _ = _ours_loss(case)
    _, _, gs = _torch_grads(case)
    ours = tg.grad(f)(tg.Tensor(case.args[0])).numpy()
    assert not np.allclose(ours, gs[0].numpy())
    np.testing.assert_allclose(ours, np.conj(gs[0].numpy()), rtol=1e-12)
