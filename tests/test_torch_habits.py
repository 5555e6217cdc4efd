"""What a PyTorch user types gets PyTorch's meaning where it fits a functional library
(``to``, ``tolist``, ``numel``, ``dim``, ``cpu``, ``clone``) or an error that shows the tapegrad
way (``backward``, ``.grad``, ``requires_grad``, in-place methods, ``tg.manual_seed``)."""

import subprocess
import sys
import traceback

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.core.backend import cupy_available
from tapegrad.core.tensor import _TORCH_NAMES

SHAPES = [(), (0,), (1,), (3,), (2, 3), (2, 0, 4), (1, 1, 2)]


def _rendered(e: BaseException) -> str:
    """The exception as the traceback module prints it; Python computes its "Did you mean"
    suggestion from ``name`` and ``obj``, so an error with no ``name`` gets none."""
    assert e.name is None, f"{e!r} would get a suggestion"  # pyright: ignore[reportAttributeAccessIssue]
    return "".join(traceback.format_exception_only(type(e), e))


def _attribute_error(obj, name) -> AttributeError:
    with pytest.raises(AttributeError) as info:
        getattr(obj, name)
    return info.value


# -- what works as in PyTorch -----------------------------------------------------------------
@pytest.mark.parametrize("shape", SHAPES)
def test_numel_dim_and_tolist_follow_pytorch_and_numpy(shape):
    a = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    x = tg.Tensor(a)
    assert x.numel() == a.size and type(x.numel()) is int
    assert x.dim() == a.ndim
    assert x.tolist() == a.tolist()
    # NumPy's attribute, a plain int: an int subclass (callable as PyTorch's x.size()) would
    # not be a weakly typed Python number, and x / x.size would turn float32 into float64
    assert x.size == a.size and type(x.size) is int
    if a.size:
        assert (x / x.size).dtype == np.float32


def test_tolist_is_refused_under_grad_and_vmap_like_numpy():
    x = tg.Tensor([1.0, 2.0])
    with pytest.raises(TypeError, match=r"tolist\(\).*stop_gradient"):
        tg.grad(lambda x: tnp.sum(tnp.asarray(x.tolist())))(x)
    with pytest.raises(TypeError, match=r"tolist\(\) of a batched value inside vmap"):
        tg.vmap(lambda x: tnp.asarray(x.tolist()))(tg.Tensor(np.ones((2, 3))))
    # a constant under grad (an integer Tensor) and a jit guard are fine, as for numpy()
    idx = tg.Tensor([1, 0])
    assert float(tg.grad(lambda x: x[idx.tolist()].sum() * 1.0)(x).sum()) == 2.0
    f = tg.jit(lambda x: x * len(x.tolist()))
    assert f(x).tolist() == [2.0, 4.0]
    assert f(tg.Tensor([1.0, 2.0, 3.0])).tolist() == [3.0, 6.0, 9.0]


@pytest.mark.parametrize(
    "dtype", [np.float16, np.float32, np.float64, np.complex64, np.int32, np.int64, np.bool_]
)
def test_to_dtype_casts_like_astype_and_is_differentiable(dtype):
    x = tg.Tensor([0.5, 1.5, -2.0])
    for spelling in (dtype, np.dtype(dtype).name, np.dtype(dtype)):
        for y in (x.to(spelling), x.to(dtype=spelling)):
            assert y.dtype == np.dtype(dtype)
            np.testing.assert_array_equal(y.numpy(), x.numpy().astype(dtype))
    if np.dtype(dtype).kind in "fc":  # a differentiable cast: the cotangent comes back float32
        g = tg.grad(lambda x: tnp.real(x.to(dtype) * 3.0).sum())(x)
        assert g.dtype == np.float32
        np.testing.assert_allclose(g.numpy(), 3.0)


def test_to_device_tensor_and_keywords():
    x = tg.Tensor([1.0, 2.0])
    assert x.to("cpu") is x and x.to(device="cpu") is x and x.cpu() is x
    assert x.to("float32") is x  # nothing to do: the Tensor itself
    other = tg.Tensor(np.zeros(3, np.float64))
    y = x.to(other)
    assert y.dtype == np.float64 and y.device == "cpu"
    z = x.to("cpu", "float64", non_blocking=True, copy=True)
    assert z.dtype == np.float64
    assert x.to("cpu", dtype="float16").dtype == np.float16
    assert x.clone() is x and x.contiguous() is x
    # jit records the cast
    assert tg.jit(lambda x: x.to("float64") * 2.0)(x).dtype == np.float64


def test_to_reads_torch_devices_and_dtypes():
    torch = pytest.importorskip("torch")
    x = tg.Tensor([1.0, 2.0])
    assert x.to(torch.float64).dtype == np.float64
    assert x.to(torch.device("cpu"), torch.int32).dtype == np.int32
    assert x.to(dtype=torch.float16).dtype == np.float16


def test_to_refuses_what_it_cannot_read():
    x = tg.Tensor([1.0])
    with pytest.raises(TypeError, match=r"Tensor\.to: expected a device .* got 'cuda0'"):
        x.to("cuda0")
    with pytest.raises(TypeError, match=r"Tensor\.to: expected a device .* got 3\.5"):
        x.to(3.5)
    with pytest.raises(TypeError, match="dtype given twice"):
        x.to("float64", dtype="float32")
    with pytest.raises(TypeError, match="device given twice"):
        x.to("cpu", device="cpu")
    with pytest.raises(TypeError, match="at most 2"):
        x.to("cpu", "float32", "float64")


@pytest.mark.skipif(cupy_available(), reason="checks the message without a GPU")
def test_cuda_without_a_gpu_says_so():
    x = tg.Tensor([1.0])
    for move in (lambda: x.cuda(), lambda: x.cuda(0), lambda: x.to("cuda")):
        with pytest.raises(RuntimeError, match="CuPy"):
            move()


# -- what gets the tapegrad way ----------------------------------------------------------------
def test_backward_and_grad_show_a_runnable_example():
    x = tg.Tensor([1.0, 2.0])
    for name in ("backward", "grad", "retain_grad"):
        e = _attribute_error(x, name)
        text = str(e)
        assert "tg.grad(loss_fn)(params)" in text and "tg.value_and_grad(loss_fn)" in text
        assert "Did you mean" not in _rendered(e)
        # the example lines in the message run as they are
        code = "\n".join(line.strip() for line in text.splitlines() if line.startswith("    "))
        scope = {"tg": tg, "loss_fn": lambda p: (p * p).sum(), "params": x}
        exec(code, scope)
        np.testing.assert_allclose(scope["grads"].numpy(), [2.0, 4.0])
        assert float(scope["loss"]) == 5.0


@pytest.mark.parametrize("name", sorted(_TORCH_NAMES))
def test_every_pytorch_name_gets_a_message_without_a_wrong_suggestion(name):
    x = tg.Tensor([1.0, 2.0])
    assert not hasattr(x, name)
    e = _attribute_error(x, name)
    assert str(e) == _TORCH_NAMES[name]
    assert "Did you mean" not in _rendered(e)  # (numel once got "Did you mean: 'numpy'?")
    # each message points to something that exists
    assert any(s in str(e) for s in ("tg.", "x.", "tnp.")), str(e)


# names a PyTorch user types on a Tensor: each works or gets a tapegrad message
TORCH_HABITS = [
    "backward", "grad", "requires_grad", "requires_grad_", "grad_fn", "is_leaf", "retain_grad",
    "register_hook", "zero_", "item", "detach", "cuda", "cpu", "size", "dim", "numel",
    "tolist", "to", "numpy", "data", "is_cuda", "float", "double", "long", "int", "half",
    "bool", "clone", "contiguous", "view", "reshape", "permute", "unsqueeze", "squeeze",
    "transpose", "T", "sum", "mean", "max", "type", "type_as", "new_zeros", "new_ones",
    "add_", "mul_", "copy_", "fill_", "normal_", "uniform_", "clamp_",
]  # fmt: skip


@pytest.mark.parametrize("name", TORCH_HABITS)
def test_common_pytorch_names_work_or_explain(name):
    x = tg.Tensor([1.0, 2.0])
    if hasattr(x, name):
        return
    e = _attribute_error(x, name)
    assert str(e) != f"'Tensor' object has no attribute {name!r}", name
    assert "Did you mean" not in _rendered(e)


@pytest.mark.parametrize("name", ["zero_", "add_", "mul_", "copy_", "fill_", "normal_"])
def test_in_place_methods_point_to_new_tensors(name):
    e = _attribute_error(tg.Tensor([1.0]), name)
    assert f"no {name}()" in str(e) and "immutable" in str(e) and "x.at[idx].set(v)" in str(e)


def test_python_prints_a_suggestion_for_a_typo_and_none_for_pytorch_names():
    code = (
        "import tapegrad as tg\n"
        "for obj, name in [(tg.Tensor([1.0]), 'nump'), (tg, 'valeu_and_grad'),\n"
        "                  (tg.Tensor([1.0]), 'numel_'), (tg.Tensor([1.0]), 'backward'),\n"
        "                  (tg, 'manual_seed')]:\n"
        "    try:\n"
        "        getattr(obj, name)\n"
        "    except AttributeError:\n"
        "        sys.excepthook(*sys.exc_info())\n"
    )
    out = subprocess.run([sys.executable, "-c", "import sys\n" + code], capture_output=True,
                         text=True, check=True).stderr  # fmt: skip
    blocks = out.split("Traceback")[1:]
    assert len(blocks) == 5, out
    assert "Did you mean: 'numpy'?" in blocks[0]
    assert "Did you mean: 'value_and_grad'?" in blocks[1]
    assert all("Did you mean" not in b for b in blocks[2:]), out


def test_requires_grad_explains_grad_over_arguments():
    for make in (lambda: tg.tensor([1.0], requires_grad=True),
                 lambda: tg.Tensor([1.0], requires_grad=True)):  # fmt: skip
        with pytest.raises(TypeError, match=r"requires_grad=True is PyTorch's.*argnums"):
            make()
    assert tg.tensor([1.0], requires_grad=False).dtype == np.float32  # PyTorch's default
    with pytest.raises(TypeError) as info:
        tg.tensor([1.0], requires_grad=True)
    code = "\n".join(line.strip() for line in str(info.value).splitlines()
                     if line.startswith("    "))  # fmt: skip
    scope = {"tg": tg}
    exec(code, scope)
    np.testing.assert_allclose(scope["g"].numpy(), [2.0, 4.0])


def test_manual_seed_explains_keys_with_a_runnable_example():
    for name in ("manual_seed", "seed", "randn", "rand", "randint", "randperm"):
        e = _attribute_error(tg, name)
        assert "tg.random.key(0)" in str(e) and "PRNGKey" in str(e)
        assert "Did you mean" not in _rendered(e)
    text = str(_attribute_error(tg, "manual_seed"))
    code = "\n".join(line.strip() for line in text.splitlines() if line.startswith("    "))
    scope = {"tg": tg}
    exec(code, scope)
    assert scope["x"].shape == (3, 4)
    for name in ("randn", "rand", "randint", "randperm"):  # the sampler named exists
        sampler = str(_attribute_error(tg, name)).split("tg.random.")[1].split("(")[0]
        assert callable(getattr(tg.random, sampler))


@pytest.mark.parametrize("name", ["zeros", "ones", "arange", "float32", "int64", "exp", "stack"])
def test_numpy_names_at_the_top_level_point_to_tapegrad_numpy(name):
    e = _attribute_error(tg, name)
    assert f"tnp.{name}" in str(e)
    assert hasattr(tnp, name)


@pytest.mark.parametrize("name", ["cuda", "autograd", "set_grad_enabled", "from_numpy", "cat"])
def test_other_torch_modules_and_functions_explain(name):
    e = _attribute_error(tg, name)
    assert "tg." in str(e) or "tnp." in str(e)
