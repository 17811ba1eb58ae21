"""smx's operations as PyTorch operators: torch.ops.smx.softmax, torch.ops.smx.log_softmax, their gradients
torch.ops.smx.softmax_backward and torch.ops.smx.log_softmax_backward (and the .out overloads of all four),
registered with the dispatcher for CPU and CUDA, with fake kernels and autograd formulas, so
torch.compile(fullgraph=True) traces through them and CUDA graphs capture them. The forward operators'
gradients run the backward operators, whose own gradients make double backward work. The log-probability
operators torch.ops.smx.logsumexp, log_softmax_gather and cross_entropy (with its fused-gradient variants)
are registered the same way.

    import torch, smx.torch
    y = torch.ops.smx.softmax(x, -1)                 # or smx.softmax(x), which routes torch tensors here

Importing this module imports torch (smx itself never does), defines the operators, and loads their kernels:
a C++ extension (csrc/smx_torch.cpp) compiled against the installed torch on first use into a cache folder
and bound to the libsmx the ctypes binding loaded; where it cannot be built, kernels in Python over the
ctypes binding (same results, more host time per call). docs/python.md says how to add an operator."""

import atexit
import ctypes
import functools
import hashlib
import importlib.util
import os
import sys
import sysconfig
import warnings

import torch

from . import _arrays, _dtypes, _errors, _lib

__all__ = ["softmax", "log_softmax", "softmax_backward", "log_softmax_backward", "softmax_with_options",
           "log_softmax_with_options", "logsumexp", "log_softmax_gather", "cross_entropy", "backend", "extension_path"]

_SOFTMAX, _LOG_SOFTMAX = 1, 2  # smxSoftmaxMode_t

# Every operator's schema; its kernels are registered under the same name in csrc/smx_torch.cpp and in
# _register_python_kernels, its fake kernel below. The .out overloads write `y` and return nothing
# (torch.compile functionalizes a custom op's mutation only when it returns no alias of it); `y`, not
# `out`: torch.compile gives an `out=` keyword torch's resize semantics and refuses a non-contiguous one.
_SCHEMAS = [
    "softmax(Tensor x, int dim=-1, ScalarType? dtype=None) -> Tensor",
    "softmax.out(Tensor x, int dim=-1, ScalarType? dtype=None, *, Tensor(a!) y) -> ()",
    "log_softmax(Tensor x, int dim=-1, ScalarType? dtype=None) -> Tensor",
    "log_softmax.out(Tensor x, int dim=-1, ScalarType? dtype=None, *, Tensor(a!) y) -> ()",
    # dtype: grad_input's (the forward input's dtype, torch's input_dtype); default output's.
    "softmax_backward(Tensor grad_output, Tensor output, int dim=-1, ScalarType? dtype=None) -> Tensor",
    "softmax_backward.out(Tensor grad_output, Tensor output, int dim=-1, ScalarType? dtype=None, *, "
    "Tensor(a!) grad_input) -> ()",
    "log_softmax_backward(Tensor grad_output, Tensor output, int dim=-1, ScalarType? dtype=None) -> Tensor",
    "log_softmax_backward.out(Tensor grad_output, Tensor output, int dim=-1, ScalarType? dtype=None, *, "
    "Tensor(a!) grad_input) -> ()",
]

# The options (issue 53) as operators of their own, so the ones above keep their schemas (and the extension's
# kernels): a scalar scale is `scale`, a per-row one `scale_tensor`. Their kernels are Python over the ctypes
# binding, whichever backend() is loaded; their gradient is composed from torch ops (_options_backward).
# Positional, not keyword-only: torch.library's autograd registration refuses keyword-only tensors.
_OPTIONS_ARGUMENTS = ("Tensor x, int dim=-1, ScalarType? dtype=None, float? scale=None, Tensor? scale_tensor=None, "
                      "Tensor? mask=None, int? causal=None, str masked_rows='nan', bool batch_invariant=False")
_OPTIONS_DEFAULTS = (-1, None, None, None, None, None, "nan", False)  # of every argument after x
_SCHEMAS += [
    f"softmax_with_options({_OPTIONS_ARGUMENTS}) -> Tensor",
    f"softmax_with_options.out({_OPTIONS_ARGUMENTS}, *, Tensor(a!) y) -> ()",
    f"log_softmax_with_options({_OPTIONS_ARGUMENTS}) -> Tensor",
    f"log_softmax_with_options.out({_OPTIONS_ARGUMENTS}, *, Tensor(a!) y) -> ()",
]

# The log-probability operators (their fake kernels, Python kernels and autograd below, "Log-probabilities").
# lse is always returned: its row of floats costs nothing beside the logits. cross_entropy_with_grad also
# returns dlogits, the gradient of the loss for a grad_output of 1 (per row: of their sum); the trailing
# underscore variant writes it over the logits instead.
_LOGPROB_SCHEMAS = [
    "logsumexp(Tensor x, int dim=-1, bool keepdim=False) -> Tensor",
    "logsumexp.out(Tensor x, int dim=-1, bool keepdim=False, *, Tensor(a!) y) -> ()",
    "log_softmax_gather(Tensor x, Tensor index, int dim=-1) -> Tensor",
    "cross_entropy(Tensor logits, Tensor target, int dim=-1, int ignore_index=-100, float label_smoothing=0.0, "
    "str reduction='mean') -> (Tensor, Tensor)",
    "cross_entropy_with_grad(Tensor logits, Tensor target, int dim=-1, int ignore_index=-100, "
    "float label_smoothing=0.0, str reduction='mean') -> (Tensor, Tensor, Tensor)",
    "cross_entropy_with_grad_(Tensor(a!) logits, Tensor target, int dim=-1, int ignore_index=-100, "
    "float label_smoothing=0.0, str reduction='mean') -> (Tensor, Tensor)",
]

_library = torch.library.Library("smx", "DEF")  # module-level: the definitions live as long as it does
for _schema in _SCHEMAS + _LOGPROB_SCHEMAS:
    _library.define(_schema, tags=(torch.Tag.pt2_compliant_tag,))

_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def _dtype_name(dtype):
    return str(dtype).replace("torch.", "")


def _check_dtype(dtype):
    if dtype not in _DTYPES:
        raise TypeError(f"smx supports float16, bfloat16, float32 and float64; got dtype {_dtype_name(dtype)}")


def _check_dim(dim, ndim):
    rank = max(ndim, 1)  # a 0-d tensor counts as 1-d, as torch's own dim wrapping does
    if not -rank <= dim < rank:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-rank}, {rank - 1}], "
                         f"but got {dim})")
    return dim % rank


def _device_name(device):
    return f"{device.type}:{device.index or 0}"


def _check_out(x, dtype, out, x_name="x"):
    if out.device != x.device:
        raise ValueError(f"out is on {_device_name(out.device)} but {x_name} is on {_device_name(x.device)}")
    if out.shape != x.shape:
        raise ValueError(f"out has shape {tuple(out.shape)} but {x_name} has shape {tuple(x.shape)}")
    _check_dtype(out.dtype)
    if dtype is not None and dtype != out.dtype:
        raise TypeError(f"dtype={_dtype_name(dtype)} disagrees with out's dtype {_dtype_name(out.dtype)}")


# Fake kernels: the result's metadata exactly as the real kernels make it (torch.empty_like's layout, which
# keeps x's strides when x is dense), and the checks that need no data.

def _result_like(x, dim=-1, dtype=None):
    _check_dtype(x.dtype)
    _check_dtype(dtype or x.dtype)
    _check_dim(dim, x.dim())
    return torch.empty_like(x, dtype=dtype or x.dtype)


def _check_out_call(x, dim=-1, dtype=None, *, y):
    _check_dtype(x.dtype)
    _check_dim(dim, x.dim())
    _check_out(x, dtype, y)


for _name in ("softmax", "log_softmax"):
    torch.library.register_fake(f"smx::{_name}", _result_like, lib=_library)
    torch.library.register_fake(f"smx::{_name}.out", _check_out_call, lib=_library)


def _check_backward_inputs(grad_output, output, dim):
    """The backward operators' checks that need no data (as the C++ kernels make them); returns dim wrapped."""
    _check_dtype(grad_output.dtype)
    _check_dtype(output.dtype)
    if grad_output.dtype != output.dtype:
        raise TypeError(f"grad_output is {_dtype_name(grad_output.dtype)} but output is {_dtype_name(output.dtype)}; "
                        "smx needs both in the forward's output dtype")
    if grad_output.device != output.device:
        raise ValueError(f"grad_output is on {_device_name(grad_output.device)} but output is on "
                         f"{_device_name(output.device)}")
    if grad_output.shape != output.shape:
        raise ValueError(f"grad_output has shape {tuple(grad_output.shape)} but output has shape "
                         f"{tuple(output.shape)}")
    return _check_dim(dim, output.dim())


def _grad_input_like(grad_output, output, dim=-1, dtype=None):
    _check_backward_inputs(grad_output, output, dim)
    _check_dtype(dtype or output.dtype)
    return torch.empty_like(output, dtype=dtype or output.dtype)  # the forward's layout, where x's gradient goes


def _check_backward_out_call(grad_output, output, dim=-1, dtype=None, *, grad_input):
    _check_backward_inputs(grad_output, output, dim)
    _check_out(output, dtype, grad_input, "output")


for _name in ("softmax_backward", "log_softmax_backward"):
    torch.library.register_fake(f"smx::{_name}", _grad_input_like, lib=_library)
    torch.library.register_fake(f"smx::{_name}.out", _check_backward_out_call, lib=_library)


def _input_gradient(mode, grad, y, dim, x_dtype):
    """dL/dx of softmax (mode 1) or log-softmax (2) in x's dtype, given its output y and dL/dy: the smx
    backward operator (its twin is input_gradient in csrc/smx_torch.cpp)."""
    backward = _softmax_backward if mode == _SOFTMAX else _log_softmax_backward
    return backward(grad, y, dim, x_dtype)


def _gradients_of_backward(mode, grad, grad_output, y, dim):
    """(dL/dgrad_output, dL/dy) of the backward operator of softmax (mode 1) or log-softmax (2), given
    dL/dgrad_input = grad: what makes double backward work (its twin is SoftmaxBackwardFunction::backward in
    csrc/smx_torch.cpp). Written in y's dtype."""
    grad = grad.to(y.dtype)
    if mode == _SOFTMAX:  # grad_input = y * (g - sum(g * y))
        by_grad_output = _softmax_backward(grad, y, dim, y.dtype)
        by_y = grad * (grad_output - (grad_output * y).sum(dim, True)) - grad_output * (grad * y).sum(dim, True)
    else:  # grad_input = g - exp(y) * sum(g)
        exp_y = y.exp()
        by_grad_output = grad - (grad * exp_y).sum(dim, True)
        by_y = -grad * exp_y * grad_output.sum(dim, True)
    return by_grad_output, by_y


def _check_options(masked_rows):
    if masked_rows not in ("nan", "zero"):
        raise ValueError(f"masked_rows must be 'nan' or 'zero'; got {masked_rows!r}")


def _options_result_like(x, dim=-1, dtype=None, scale=None, scale_tensor=None, mask=None, causal=None,
                         masked_rows="nan", batch_invariant=False):
    _check_options(masked_rows)
    return _result_like(x, dim, dtype)


def _options_check_out_call(x, dim=-1, dtype=None, scale=None, scale_tensor=None, mask=None, causal=None,
                            masked_rows="nan", batch_invariant=False, *, y):
    _check_options(masked_rows)
    _check_out_call(x, dim, dtype, y=y)


for _name in ("softmax_with_options", "log_softmax_with_options"):
    torch.library.register_fake(f"smx::{_name}", _options_result_like, lib=_library)
    torch.library.register_fake(f"smx::{_name}.out", _options_check_out_call, lib=_library)


# ---------------------------------------------------------------------------------------------------------
# Kernels: the C++ extension, else Python over the ctypes binding.

_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "csrc", "smx_torch.cpp")
_LOOKUP = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_char_p)


def _build_folder():
    """Where the extension is built: $SMX_TORCH_BUILD_DIR, else smx/torch under the user's cache folder."""
    folder = os.environ.get("SMX_TORCH_BUILD_DIR")
    if folder:
        return folder
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "smx", "torch")


def _python_headers_found():
    """Whether the compiler will find Python.h: in the folder torch's extension builder adds (sysconfig's), or
    in one g++ searches by itself (CPATH, CPLUS_INCLUDE_PATH). Then the extension is also built as a Python
    module with the eager binding (SMX_TORCH_PYTHON in csrc/smx_torch.cpp)."""
    folders = [sysconfig.get_path("include", scheme="posix_prefix") or ""]
    for variable in ("CPATH", "CPLUS_INCLUDE_PATH"):
        folders += os.environ.get(variable, "").split(os.pathsep)
    return any(folder and os.path.isfile(os.path.join(folder, "Python.h")) for folder in folders)


def _extension_name(python_binding):
    """smx_torch_<digest>: the digest covers what the binary depends on (source, torch, Python, whether it
    holds the Python binding), so a changed source or another torch gets its own build instead of a stale one."""
    digest = hashlib.sha256()
    with open(_SOURCE, "rb") as source:
        digest.update(source.read())
    digest.update(f"{torch.__version__} {torch.__file__} {sys.version} {python_binding}".encode())
    return f"smx_torch_{digest.hexdigest()[:16]}"


def _import_binding(name, path):
    """The extension's Python module (its PyInit runs; the library itself is already loaded)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _load_extension():
    """(path, the library through ctypes, its Python binding or None): loaded into torch.ops and bound to
    libsmx; built first when absent (once per source, torch and Python: ~15 s on two cores). Raises when it
    cannot be built or loaded."""
    python_binding = _python_headers_found()
    name = _extension_name(python_binding)
    folder = os.path.join(_build_folder(), name)
    path = os.path.join(folder, name + ".so")
    try:
        torch.ops.load_library(path)
    except OSError:  # not built yet (or a build cut short): build it; cpp_extension locks the folder
        from torch.utils import cpp_extension
        os.makedirs(folder, exist_ok=True)
        # No CUDA toolkit needed, and the Python headers only for the eager binding, which is left out
        # where they are missing (smx.softmax then calls torch.ops.smx.*).
        flags = ["-O2", "-DNDEBUG"] + (["-DSMX_TORCH_PYTHON"] if python_binding else [])
        cpp_extension.load(name, [_SOURCE], extra_cflags=flags, build_directory=folder, with_cuda=False,
                           is_python_module=False, verbose=False)
    extension = ctypes.CDLL(path)

    def lookup(function_name):
        try:
            return ctypes.cast(getattr(_lib.lib, function_name.decode()), ctypes.c_void_p).value
        except AttributeError:
            return None

    unresolved = extension.smx_torch_bind(_LOOKUP(lookup)) or extension.smx_torch_bind_logprobs(_LOOKUP(lookup))
    if unresolved:
        raise RuntimeError(f"the loaded libsmx ({_lib.path}) lacks entry point {unresolved} that the extension uses")
    extension.smx_torch_cache_info.argtypes = [ctypes.POINTER(ctypes.c_int64)]
    atexit.register(extension.smx_torch_release)  # descriptors and handles go while libsmx is loaded
    return path, extension, _import_binding(name, path) if python_binding else None


def _register_python_operators(names, functional, out_variant, backward, setup_context):
    """Registers, for the softmax and log-softmax operators `names`, functional(mode) and out_variant(mode) as
    their CPU and CUDA kernels (and .out's) and backward(mode) as their autograd formula."""
    for name, mode in zip(names, (_SOFTMAX, _LOG_SOFTMAX)):
        for device in ("CPU", "CUDA"):
            _library.impl(name, functional(mode), device)
            _library.impl(f"{name}.out", out_variant(mode), device)
        torch.library.register_autograd(f"smx::{name}", backward(mode), setup_context=setup_context, lib=_library)


def _register_python_kernels():
    """CPU and CUDA kernels through the ctypes binding, and the autograd formula through torch.library:
    the same operators without a compiler, at several us more host time per call (docs/python.md)."""
    from . import _forward  # the ctypes binding's call, which smx.softmax uses for other arrays

    def functional(mode):
        def kernel(x, dim=-1, dtype=None):
            y = _result_like(x, dim, dtype)
            _forward(x, dim, None, y, None, mode)
            return y
        return kernel

    def out_variant(mode):
        def kernel(x, dim=-1, dtype=None, *, y):
            _check_out_call(x, dim, dtype, y=y)
            _forward(x, dim, None, y, None, mode)
        return kernel

    def setup_context(ctx, inputs, output):
        x, dim = inputs[0], inputs[1] if len(inputs) > 1 else -1
        ctx.save_for_backward(output)
        ctx.dim, ctx.x_dtype = _check_dim(dim, x.dim()), x.dtype

    def backward(mode):
        def formula(ctx, grad):
            (y,) = ctx.saved_tensors
            return _input_gradient(mode, grad, y, ctx.dim, ctx.x_dtype), None, None
        return formula

    _register_python_operators(("softmax", "log_softmax"), functional, out_variant, backward, setup_context)
    _register_python_backward_kernels()
    _register_python_logprob_kernels()


def _register_python_logprob_kernels():
    """The log-probability operators' CPU and CUDA kernels through the ctypes binding (_logprobs)."""
    from . import _logprobs

    def logsumexp(x, dim=-1, keepdim=False):
        _logsumexp_result(x, dim, keepdim)
        return _logprobs.logsumexp(x, dim, keepdim, None, None)

    def logsumexp_out(x, dim=-1, keepdim=False, *, y):
        _logsumexp_out_check(x, dim, keepdim, y=y)
        _logprobs.logsumexp(x, dim, keepdim, y, None)

    def log_softmax_gather(x, index, dim=-1):
        _gather_result(x, index, dim)
        return _logprobs.log_softmax_gather(x, index, dim, False, None)

    def cross_entropy(logits, target, dim=-1, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
        _cross_entropy_results(logits, target, dim, ignore_index, label_smoothing, reduction)
        return _logprobs.cross_entropy(logits, target, dim, ignore_index, label_smoothing, reduction, True, None, None)

    def cross_entropy_with_grad(logits, target, dim=-1, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
        *_, dlogits = _cross_entropy_with_grad_results(logits, target, dim, ignore_index, label_smoothing, reduction)
        loss, lse = _logprobs.cross_entropy(logits, target, dim, ignore_index, label_smoothing, reduction, True,
                                            dlogits, None)
        return loss, lse, dlogits

    def cross_entropy_with_grad_(logits, target, dim=-1, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
        _cross_entropy_results(logits, target, dim, ignore_index, label_smoothing, reduction)
        return _logprobs.cross_entropy(logits, target, dim, ignore_index, label_smoothing, reduction, True, logits,
                                       None)

    kernels = {"logsumexp": logsumexp, "logsumexp.out": logsumexp_out, "log_softmax_gather": log_softmax_gather,
               "cross_entropy": cross_entropy, "cross_entropy_with_grad": cross_entropy_with_grad,
               "cross_entropy_with_grad_": cross_entropy_with_grad_}
    for name, kernel in kernels.items():
        for device in ("CPU", "CUDA"):
            _library.impl(name, kernel, device)


def _register_python_backward_kernels():
    """The backward operators' kernels and autograd formula for _register_python_kernels."""
    from . import _backward  # the ctypes binding's call, which smx.softmax_backward uses for other arrays

    def functional(mode):
        def kernel(grad_output, output, dim=-1, dtype=None):
            grad_input = _grad_input_like(grad_output, output, dim, dtype)
            _backward(grad_output, output, dim, None, grad_input, None, mode)
            return grad_input
        return kernel

    def out_variant(mode):
        def kernel(grad_output, output, dim=-1, dtype=None, *, grad_input):
            _check_backward_out_call(grad_output, output, dim, dtype, grad_input=grad_input)
            _backward(grad_output, output, dim, None, grad_input, None, mode)
        return kernel

    def setup_context(ctx, inputs, output):
        grad_output, y, dim = inputs[0], inputs[1], inputs[2] if len(inputs) > 2 else -1
        ctx.save_for_backward(grad_output, y)
        ctx.dim = _check_dim(dim, y.dim())

    def backward(mode):
        def formula(ctx, grad):
            grad_output, y = ctx.saved_tensors
            return (*_gradients_of_backward(mode, grad, grad_output, y, ctx.dim), None, None)
        return formula

    _register_python_operators(("softmax_backward", "log_softmax_backward"), functional, out_variant, backward,
                               setup_context)


def _kept(y, mask, causal, dim):
    """Where the forward kept elements (a bool tensor broadcastable to y), or None when it kept them all: a
    keep-mask's True elements within the causal window j <= i + causal of y's last two dims."""
    kept = mask if mask is not None and mask.dtype == torch.bool else None
    if causal is not None:
        queries, keys = y.shape[-2], y.shape[-1]
        window = torch.ones(queries, keys, dtype=torch.bool, device=y.device).tril(causal)
        kept = window if kept is None else kept & window
    return kept


def _options_backward(mode, grad, y, dim, scale, scale_tensor, mask, causal, zero_rows):
    """dL/dx of softmax (mode 1) or log-softmax (2) with options (smx.h, smxCreateSoftmaxBackwardDescriptorWithOptions):
    the plain gradient over the kept elements (sums over them only), 0 at the excluded ones and in rows with
    nothing to normalize under masked_rows='zero', times the scale."""
    kept = _kept(y, mask, causal, dim)
    if mode == _SOFTMAX:
        dz = y * (grad - (grad * y).sum(dim, keepdim=True))  # y is 0 at excluded elements
    else:
        kept_grad = grad if kept is None else grad.masked_fill(~kept, 0)
        dz = kept_grad - torch.exp(y) * kept_grad.sum(dim, keepdim=True)
    if kept is not None:
        dz = dz.masked_fill(~kept, 0)
    if zero_rows:
        empty = (y == 0).all(dim, keepdim=True) if mode == _SOFTMAX else torch.isneginf(y).all(dim, keepdim=True)
        dz = dz.masked_fill(empty, 0)
    if scale_tensor is not None:
        dz = dz * scale_tensor.reshape([1 if d == dim else size for d, size in enumerate(y.shape)]).to(dz.dtype)
    elif scale is not None:
        dz = dz * scale
    return dz


def _register_options_kernels():
    """The options operators' CPU and CUDA kernels (the ctypes binding) and autograd formula."""
    from . import _forward

    def call(x, dim, y, mode, scale, scale_tensor, mask, causal, masked_rows, batch_invariant):
        _forward(x, dim, None, y, None, mode, scale if scale_tensor is None else scale_tensor, mask, causal,
                 masked_rows, batch_invariant)

    def functional(mode):
        def kernel(x, dim=-1, dtype=None, scale=None, scale_tensor=None, mask=None, causal=None,
                   masked_rows="nan", batch_invariant=False):
            y = _options_result_like(x, dim, dtype, masked_rows=masked_rows)
            call(x, dim, y, mode, scale, scale_tensor, mask, causal, masked_rows, batch_invariant)
            return y
        return kernel

    def out_variant(mode):
        def kernel(x, dim=-1, dtype=None, scale=None, scale_tensor=None, mask=None, causal=None,
                   masked_rows="nan", batch_invariant=False, *, y):
            _options_check_out_call(x, dim, dtype, masked_rows=masked_rows, y=y)
            call(x, dim, y, mode, scale, scale_tensor, mask, causal, masked_rows, batch_invariant)
        return kernel

    def setup_context(ctx, inputs, output):
        x, rest = inputs[0], tuple(inputs[1:]) + _OPTIONS_DEFAULTS[len(inputs) - 1:]
        dim, _dtype, scale, scale_tensor, mask, causal, masked_rows, _batch_invariant = rest
        ctx.save_for_backward(output, scale_tensor, mask)
        ctx.dim, ctx.x_dtype = _check_dim(dim, x.dim()), x.dtype
        ctx.scale, ctx.causal, ctx.zero_rows = scale, causal, masked_rows == "zero"

    def backward(mode):
        def formula(ctx, grad):
            y, scale_tensor, mask = ctx.saved_tensors
            dx = _options_backward(mode, grad, y, ctx.dim, ctx.scale, scale_tensor, mask, ctx.causal, ctx.zero_rows)
            return (dx.to(ctx.x_dtype),) + (None,) * len(_OPTIONS_DEFAULTS)  # no gradient for the options
        return formula

    _register_python_operators(("softmax_with_options", "log_softmax_with_options"), functional, out_variant, backward,
                      setup_context)


_register_options_kernels()

_extension = None
_binding = None  # the extension's Python module (the eager calls), where it was built with one
extension_path = None  # the loaded extension's file, or None on the Python kernels
if os.environ.get("SMX_TORCH_EXTENSION", "1").strip() == "0":  # asked for the Python kernels
    _register_python_kernels()
else:
    try:
        extension_path, _extension, _binding = _load_extension()
    except Exception as error:  # no compiler, no ninja, a failed build: the Python kernels still work
        warnings.warn(f"smx: the torch extension could not be built or loaded ({type(error).__name__}: {error}); "
                      "torch.ops.smx runs through the ctypes binding instead, at several us more host time per "
                      "call. Set SMX_TORCH_EXTENSION=0 to choose that path without trying.", RuntimeWarning,
                      stacklevel=2)
        _register_python_kernels()


def backend():
    """'extension' when the C++ kernels are loaded, 'python' on the ctypes kernels."""
    return "python" if _extension is None else "extension"


def _cache_info():
    """The extension's descriptor cache: (hits, misses, descriptors, handles); None on the Python kernels."""
    if _extension is None:
        return None
    counters = (ctypes.c_int64 * 4)()
    _extension.smx_torch_cache_info(counters)
    return tuple(counters)


# ---------------------------------------------------------------------------------------------------------
# What smx.softmax / smx.log_softmax do with torch tensors.

def _torch_dtype(dtype):
    return dtype if dtype is None or isinstance(dtype, torch.dtype) else _dtypes.to_torch(_dtypes.from_argument(dtype))


def _launch_stream(stream, device):
    """stream= (any spelling smx takes) as a torch stream of `device`."""
    if isinstance(stream, torch.cuda.Stream):
        if stream.device != device:
            raise ValueError(f"stream is on {_device_name(stream.device)} but x is on {_device_name(device)}")
        return stream
    handle = _arrays.stream_handle(stream)
    if handle in (0, 1):  # the legacy default stream, under either handle
        return torch.cuda.default_stream(device)
    return torch.cuda.ExternalStream(handle, device=device)


# Read once: _run asks it on every call. Only Dynamo needs the torch.ops call (it cannot trace into the
# binding); every other tracer (make_fx, export, dispatch modes) sees the binding's calls in the dispatcher.
_Tensor = torch.Tensor  # what smx.softmax routes here
_is_dynamo_compiling = torch.compiler.is_dynamo_compiling


def _run(functional, out_variant, x, dim, dtype, out, stream, eager=None):
    """One smx call on a torch tensor through the operators; smx's own exceptions for libsmx's errors.
    `eager`: the binding's call of the same operator (x, dim, dtype, out), or None; tried first outside
    Dynamo's tracing: it computes what torch.ops would through the same kernels, or declines (NotImplemented)
    a call whose arguments need torch.ops' own handling (a tensor subclass, a __torch_function__ mode, a dim
    that is not an int)."""
    if dtype is not None:
        dtype = _torch_dtype(dtype)
    if stream is not None:
        return _run_on_stream(functional, out_variant, x, dim, dtype, out, stream, eager)
    try:
        if eager is not None and not _is_dynamo_compiling():
            result = eager(x, dim, dtype, out)
            if result is not NotImplemented:
                return result
        if out is None:
            return functional(x, dim, dtype)
        if not isinstance(out, torch.Tensor):
            raise TypeError(f"out is a {_arrays.library_of(out)} array but x is a torch array; smx writes only "
                            "into arrays of x's own library")
        out_variant(x, dim, dtype, y=out)
        return out
    except (RuntimeError, ValueError, TypeError) as error:  # NotImplementedError is a RuntimeError
        raise _errors.translated(error) from None


def _run_on_stream(functional, out_variant, x, dim, dtype, out, stream, eager=None):
    """stream= given: the operators run with it as torch's current stream (on the CPU it is checked, then
    ignored)."""
    if x.device.type != "cuda":
        _arrays.stream_handle(stream)
        return _run(functional, out_variant, x, dim, dtype, out, None, eager)
    with torch.cuda.stream(_launch_stream(stream, x.device)):
        return _run(functional, out_variant, x, dim, dtype, out, None, eager)


# Looked up once: each torch.ops attribute step costs on every call.
_softmax, _softmax_out = torch.ops.smx.softmax.default, torch.ops.smx.softmax.out
_log_softmax, _log_softmax_out = torch.ops.smx.log_softmax.default, torch.ops.smx.log_softmax.out
_softmax_backward, _softmax_backward_out = torch.ops.smx.softmax_backward.default, torch.ops.smx.softmax_backward.out
_log_softmax_backward = torch.ops.smx.log_softmax_backward.default
_log_softmax_backward_out = torch.ops.smx.log_softmax_backward.out
_eager_softmax = None if _binding is None else _binding.softmax
_eager_log_softmax = None if _binding is None else _binding.log_softmax


def softmax(x, dim=-1, dtype=None, out=None, stream=None):
    """smx.softmax for a torch tensor: torch.ops.smx.softmax (.out with out=), on `stream` when given; in
    eager mode through the binding's unboxed call of it."""
    return _run(_softmax, _softmax_out, x, dim, dtype, out, stream, _eager_softmax)


def log_softmax(x, dim=-1, dtype=None, out=None, stream=None):
    """smx.log_softmax for a torch tensor: torch.ops.smx.log_softmax (.out with out=), as softmax."""
    return _run(_log_softmax, _log_softmax_out, x, dim, dtype, out, stream, _eager_log_softmax)


def _run_backward(functional, out_variant, grad_output, output, dim, dtype, out, stream):
    """One smx backward call on torch tensors through the operators, as _run makes a forward one (output
    standing for x: it decides the device and, with out=, the stream)."""
    for name, value, other in (("grad_output", grad_output, "output"), ("output", output, "grad_output")):
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"{name} is a {_arrays.library_of(value)} array but {other} is a torch tensor; smx "
                            "takes both from one library")
    if out is not None and not isinstance(out, torch.Tensor):
        raise TypeError(f"out is a {_arrays.library_of(out)} array but output is a torch array; smx writes only "
                        "into arrays of the inputs' own library")
    # _run calls functional(x, dim, dtype) and out_variant(x, dim, dtype, y=out): output stands in for x.
    return _run(lambda output, dim, dtype: functional(grad_output, output, dim, dtype),
                lambda output, dim, dtype, *, y: out_variant(grad_output, output, dim, dtype, grad_input=y),
                output, dim, dtype, out, stream)


def softmax_backward(grad_output, output, dim=-1, dtype=None, out=None, stream=None):
    """smx.softmax_backward for torch tensors: torch.ops.smx.softmax_backward (.out with out=)."""
    return _run_backward(_softmax_backward, _softmax_backward_out, grad_output, output, dim, dtype, out, stream)


def log_softmax_backward(grad_output, output, dim=-1, dtype=None, out=None, stream=None):
    """smx.log_softmax_backward for torch tensors: torch.ops.smx.log_softmax_backward (.out with out=)."""
    return _run_backward(_log_softmax_backward, _log_softmax_backward_out, grad_output, output, dim, dtype, out,
                         stream)


def _with_options(operator, scale, mask, causal, masked_rows, batch_invariant):
    """operator (an options overload) with the options bound as its keywords."""
    if mask is not None and not isinstance(mask, torch.Tensor):
        raise TypeError(f"mask is a {_arrays.library_of(mask)} array but x is a torch tensor; pass a torch tensor")
    keywords = {"mask": mask, "causal": causal, "masked_rows": masked_rows, "batch_invariant": bool(batch_invariant)}
    if isinstance(scale, torch.Tensor):
        keywords["scale_tensor"] = scale
    elif scale is not None:
        keywords["scale"] = float(scale)
    return functools.partial(operator, **keywords)


_softmax_options = torch.ops.smx.softmax_with_options.default, torch.ops.smx.softmax_with_options.out
_log_softmax_options = torch.ops.smx.log_softmax_with_options.default, torch.ops.smx.log_softmax_with_options.out


def softmax_with_options(x, dim=-1, dtype=None, out=None, stream=None, scale=None, mask=None, causal=None,
                         masked_rows="nan", batch_invariant=False):
    """smx.softmax with options for a torch tensor: torch.ops.smx.softmax_with_options (.out with out=)."""
    options = (scale, mask, causal, masked_rows, batch_invariant)
    return _run(*(_with_options(operator, *options) for operator in _softmax_options), x, dim, dtype, out, stream)


def log_softmax_with_options(x, dim=-1, dtype=None, out=None, stream=None, scale=None, mask=None, causal=None,
                             masked_rows="nan", batch_invariant=False):
    """smx.log_softmax with options for a torch tensor: torch.ops.smx.log_softmax_with_options."""
    options = (scale, mask, causal, masked_rows, batch_invariant)
    return _run(*(_with_options(operator, *options) for operator in _log_softmax_options), x, dim, dtype, out, stream)


# ---------------------------------------------------------------------------------------------------------
# Log-probabilities: logsumexp, log_softmax_gather, cross_entropy (schemas at the top, _LOGPROB_SCHEMAS).

_INDEX_DTYPES = (torch.int32, torch.int64)


def _statistics_dtype(dtype):
    """float64 for float64 input, else float32: the dtype of every log-probability result but dlogits."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def _check_index_tensor(x, index, name):
    if index.dtype not in _INDEX_DTYPES:
        raise TypeError(f"smx takes int32 and int64 indices; got dtype {_dtype_name(index.dtype)} for {name}")
    if index.device != x.device:
        raise ValueError(f"{name} is on {_device_name(index.device)} but x is on {_device_name(x.device)}")


def _logsumexp_meta(x, dim, keepdim):
    """(result shape, result dtype) after the checks that need no data."""
    from ._logprobs import per_row_shape
    _check_dtype(x.dtype)
    axis = _check_dim(dim, x.dim())
    return per_row_shape(tuple(x.shape), axis, keepdim), _statistics_dtype(x.dtype)


def _logsumexp_result(x, dim=-1, keepdim=False):
    shape, dtype = _logsumexp_meta(x, dim, keepdim)
    return x.new_empty(shape, dtype=dtype)


def _logsumexp_out_check(x, dim=-1, keepdim=False, *, y):
    shape, dtype = _logsumexp_meta(x, dim, keepdim)
    if y.device != x.device:
        raise ValueError(f"out is on {_device_name(y.device)} but x is on {_device_name(x.device)}")
    if tuple(y.shape) != shape:
        raise ValueError(f"out has shape {tuple(y.shape)} but must have shape {shape}")
    if y.dtype != dtype:
        raise TypeError(f"out has dtype {_dtype_name(y.dtype)} but must be {_dtype_name(dtype)}")


def _gather_result(x, index, dim=-1):
    from ._logprobs import check_gathered_shape
    _check_dtype(x.dtype)
    _check_index_tensor(x, index, "index")
    axis = _check_dim(dim, x.dim())
    check_gathered_shape(tuple(x.shape), tuple(index.shape), axis)
    return index.new_empty(index.shape, dtype=_statistics_dtype(x.dtype))


def _cross_entropy_meta(logits, target, dim, ignore_index, label_smoothing, reduction):
    """(axis, loss shape, per-row shape, result dtype) after the checks that need no data."""
    from ._logprobs import check_label_smoothing, check_reduction, check_target_shape, per_row_shape
    _check_dtype(logits.dtype)
    _check_index_tensor(logits, target, "target")
    axis = _check_dim(dim, logits.dim())
    check_target_shape(tuple(logits.shape), tuple(target.shape), axis)
    reduced = check_reduction(reduction) != 0
    check_label_smoothing(label_smoothing)
    rows = per_row_shape(tuple(logits.shape), axis)
    return axis, () if reduced else rows, rows, _statistics_dtype(logits.dtype)


def _cross_entropy_results(logits, target, dim=-1, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
    _, loss_shape, rows, dtype = _cross_entropy_meta(logits, target, dim, ignore_index, label_smoothing, reduction)
    return logits.new_empty(loss_shape, dtype=dtype), logits.new_empty(rows, dtype=dtype)


def _cross_entropy_with_grad_results(logits, target, dim=-1, ignore_index=-100, label_smoothing=0.0,
                                     reduction="mean"):
    loss, lse = _cross_entropy_results(logits, target, dim, ignore_index, label_smoothing, reduction)
    return loss, lse, torch.empty_like(logits)


for _name, _fake in (("logsumexp", _logsumexp_result), ("logsumexp.out", _logsumexp_out_check),
                     ("log_softmax_gather", _gather_result), ("cross_entropy", _cross_entropy_results),
                     ("cross_entropy_with_grad", _cross_entropy_with_grad_results),
                     ("cross_entropy_with_grad_", _cross_entropy_results)):
    torch.library.register_fake(f"smx::{_name}", _fake, lib=_library)


# Autograd of the operators called directly, in torch ops: what the fused path (cross_entropy below, with
# dlogits from the forward) does not need. lse carries no gradient.

def _unsqueeze_rows(t, axis, ndim):
    """A per-row tensor broadcastable against the full one (nothing to do for a 0-d full tensor)."""
    return t.unsqueeze(axis) if ndim > 0 else t


def _logsumexp_setup(ctx, inputs, output):
    x, dim, keepdim = (list(inputs) + [-1, False])[:3]
    ctx.save_for_backward(x, output)
    ctx.axis, ctx.keepdim = _check_dim(dim, x.dim()), keepdim


def _logsumexp_backward(ctx, grad):
    x, out = ctx.saved_tensors
    if not ctx.keepdim:
        out, grad = _unsqueeze_rows(out, ctx.axis, x.dim()), _unsqueeze_rows(grad, ctx.axis, x.dim())
    return (grad * torch.exp(x.to(out.dtype) - out)).to(x.dtype), None, None


def _gather_setup(ctx, inputs, output):
    x, index, dim = (list(inputs) + [-1])[:3]
    ctx.save_for_backward(x, index)
    ctx.axis = _check_dim(dim, x.dim())


def _gather_backward(ctx, grad):
    x, index = ctx.saved_tensors
    n = x.shape[ctx.axis] if x.dim() else 1
    inside = (index >= 0) & (index < n)  # an index out of range got +inf and passes no gradient back
    grad = torch.where(inside, grad, torch.zeros((), dtype=grad.dtype, device=grad.device))
    flat_x, flat_index, flat_grad = (t.reshape(1) if x.dim() == 0 else t for t in (x, index.clamp(0, n - 1), grad))
    probabilities = torch.softmax(flat_x, ctx.axis, dtype=grad.dtype)
    dx = torch.zeros_like(probabilities).scatter_add_(ctx.axis, flat_index.long(), flat_grad)
    dx = dx - probabilities * flat_grad.sum(ctx.axis, keepdim=True)
    return dx.reshape(x.shape).to(x.dtype), None, None


def _cross_entropy_setup(ctx, inputs, output):
    logits, target, dim, ignore_index, label_smoothing, reduction = (
        list(inputs) + [-1, -100, 0.0, "mean"][len(inputs) - 2:])[:6]
    ctx.save_for_backward(logits, target, output[1])
    ctx.mark_non_differentiable(output[1])
    ctx.axis = _check_dim(dim, logits.dim())
    ctx.ignore_index, ctx.label_smoothing, ctx.reduction = ignore_index, label_smoothing, reduction


def _cross_entropy_backward(ctx, grad_loss, _grad_lse):
    logits, target, lse = ctx.saved_tensors
    axis, eps = ctx.axis, ctx.label_smoothing
    full = logits.reshape(1) if logits.dim() == 0 else logits
    rows_target = target.reshape(1) if logits.dim() == 0 else target
    classes = full.shape[axis]
    counted = rows_target != ctx.ignore_index
    smoothed = torch.softmax(full, axis, dtype=lse.dtype) - eps / classes
    picked = torch.where(counted, rows_target, 0).clamp(0, classes - 1).long().unsqueeze(axis)
    grad = smoothed.scatter_add(axis, picked, torch.full(picked.shape, eps - 1.0, dtype=lse.dtype,
                                                         device=lse.device))
    scale = counted.to(lse.dtype)
    if ctx.reduction == "mean":
        scale = scale / counted.sum()
    scale = scale * (grad_loss if ctx.reduction != "none" else grad_loss.reshape(scale.shape))
    return (grad * scale.unsqueeze(axis)).reshape(logits.shape).to(logits.dtype), None, None, None, None, None


torch.library.register_autograd("smx::logsumexp", _logsumexp_backward, setup_context=_logsumexp_setup, lib=_library)
torch.library.register_autograd("smx::log_softmax_gather", _gather_backward, setup_context=_gather_setup,
                                lib=_library)
torch.library.register_autograd("smx::cross_entropy", _cross_entropy_backward, setup_context=_cross_entropy_setup,
                                lib=_library)


class _CrossEntropyFunction(torch.autograd.Function):
    """The loss with dlogits computed in its forward pass (logits read once): backward only scales them by
    grad_output. In place (inplace_backward) dlogits overwrite the logits, which autograd then sees as
    written (mark_dirty), so any other use of their old values refuses rather than reading gradients."""

    @staticmethod
    def forward(ctx, logits, target, dim, ignore_index, label_smoothing, reduction, inplace):
        if inplace:
            loss, lse = _cross_entropy_with_grad_(logits, target, dim, ignore_index, label_smoothing, reduction)
            dlogits = logits
            ctx.mark_dirty(logits)
        else:
            loss, lse, dlogits = _cross_entropy_with_grad(logits, target, dim, ignore_index, label_smoothing,
                                                          reduction)
        ctx.mark_non_differentiable(lse)
        ctx.save_for_backward(dlogits)
        ctx.axis, ctx.reduced = _check_dim(dim, logits.dim()), reduction != "none"
        return (loss, lse, logits) if inplace else (loss, lse)

    @staticmethod
    def backward(ctx, grad_loss, _grad_lse, *_grad_logits):
        (dlogits,) = ctx.saved_tensors
        scale = grad_loss if ctx.reduced else _unsqueeze_rows(grad_loss, ctx.axis, dlogits.dim())
        return (dlogits * scale).to(dlogits.dtype), None, None, None, None, None, None


_logsumexp, _logsumexp_out = torch.ops.smx.logsumexp.default, torch.ops.smx.logsumexp.out
_log_softmax_gather = torch.ops.smx.log_softmax_gather.default
_cross_entropy = torch.ops.smx.cross_entropy.default
_cross_entropy_with_grad = torch.ops.smx.cross_entropy_with_grad.default
_cross_entropy_with_grad_ = torch.ops.smx.cross_entropy_with_grad_.default


def _translated(call, x, stream):
    """call() on `stream` (as torch's current stream; on the CPU checked, then ignored), with libsmx's errors
    as smx's exceptions."""
    if stream is not None:
        if x.device.type != "cuda":
            _arrays.stream_handle(stream)
        else:
            with torch.cuda.stream(_launch_stream(stream, x.device)):
                return _translated(call, x, None)
    try:
        return call()
    except (RuntimeError, ValueError, TypeError) as error:  # NotImplementedError is a RuntimeError
        raise _errors.translated(error) from None


def logsumexp(x, dim=-1, keepdim=False, out=None, stream=None):
    """smx.logsumexp for a torch tensor: torch.ops.smx.logsumexp (.out with out=)."""
    if out is None:
        return _translated(lambda: _logsumexp(x, dim, keepdim), x, stream)
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"out is a {_arrays.library_of(out)} array but x is a torch array; smx writes only into "
                        "arrays of x's own library")
    _translated(lambda: _logsumexp_out(x, dim, keepdim, y=out), x, stream)
    return out


def log_softmax_gather(x, index, dim=-1, check=False, stream=None):
    """smx.log_softmax_gather for a torch tensor: torch.ops.smx.log_softmax_gather; check=True on a GPU
    waits for the result and raises IndexError where an index was out of range (+inf)."""
    result = _translated(lambda: _log_softmax_gather(x, index, dim), x, stream)
    if check and x.device.type == "cuda" and bool(torch.isposinf(result).any()):
        raise IndexError(f"an index is out of bounds for dimension {_check_dim(dim, x.dim())} with size "
                         f"{x.shape[_check_dim(dim, x.dim())] if x.dim() else 1} (check=True)")
    return result


def cross_entropy(logits, target, dim=-1, ignore_index=-100, label_smoothing=0.0, reduction="mean",
                  inplace_backward=False, return_lse=False, stream=None):
    """smx.cross_entropy for torch tensors: where autograd records, the fused loss-and-dlogits forward
    (_CrossEntropyFunction), else torch.ops.smx.cross_entropy."""
    if isinstance(target, torch.Tensor) and target.is_floating_point():
        raise NotImplementedError("smx.cross_entropy takes class indices (int32/int64 target); probability "
                                  "targets are not supported yet")
    from ._logprobs import check_integer
    ignore_index = check_integer("ignore_index", ignore_index)
    label_smoothing = float(label_smoothing) if isinstance(label_smoothing, int) else label_smoothing

    def call():
        if torch.is_grad_enabled() and logits.requires_grad:
            loss, lse = _CrossEntropyFunction.apply(logits, target, dim, ignore_index, label_smoothing, reduction,
                                                    bool(inplace_backward))[:2]
        else:
            loss, lse = _cross_entropy(logits, target, dim, ignore_index, label_smoothing, reduction)
        return (loss, lse) if return_lse else loss

    return _translated(call, logits, stream)
