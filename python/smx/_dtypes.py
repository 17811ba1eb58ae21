"""The four element types smx computes on, the two index types, and their spellings in NumPy, PyTorch, DLPack
and CUDA arrays.

Internally a dtype is its smxDataType_t code (F16, BF16, F32, F64; I32, I64 for indices and class targets;
BOOL for masks). The readers below accept the first six, and BOOL where asked (`allow_bool`); whoever
describes an operand says which kind it takes (_arrays.describe)."""

import sys

import numpy as np

F16, BF16, F32, F64 = 1, 2, 3, 4
I32, I64 = 5, 6
FLOATING = (F16, BF16, F32, F64)
INDEX = (I32, I64)
NAMES = {F16: "float16", BF16: "bfloat16", F32: "float32", F64: "float64", I32: "int32", I64: "int64"}
ITEMSIZE = {F16: 2, BF16: 2, F32: 4, F64: 8, I32: 4, I64: 8}
_CODE_BY_NAME = {name: code for code, name in NAMES.items()}

BOOL = 7  # SMX_DTYPE_BOOL: keep-masks only, never x or y (the `allow_bool` arguments below)

# DLPack's DLDataTypeCode values, for naming the dtypes smx refuses.
_DLPACK_KIND_NAMES = {0: "int", 1: "uint", 2: "float", 3: "opaque_handle", 4: "bfloat", 5: "complex", 6: "bool"}
_DLPACK_INT, _DLPACK_FLOAT, _DLPACK_BFLOAT, _DLPACK_BOOL = 0, 2, 4, 6

_SUPPORTED = "smx supports float16, bfloat16, float32 and float64"
_SUPPORTED_INDICES = "smx takes int32 and int64 indices"
_READABLE = f"{_SUPPORTED} (and int32 and int64 for indices)"  # what the readers below accept


def check_kind(code, index):
    """TypeError unless `code` is of the kind an operand takes: an index type where `index`, else floating."""
    if index and code not in INDEX:
        raise TypeError(f"{_SUPPORTED_INDICES}; got dtype {NAMES[code]}")
    if not index and code not in FLOATING:
        raise TypeError(f"{_SUPPORTED}; got dtype {NAMES[code]}")


def _ml_dtypes_bfloat16():
    """NumPy's bfloat16 dtype from ml_dtypes, or None when ml_dtypes is not installed."""
    try:
        import ml_dtypes
    except ImportError:
        return None
    return np.dtype(ml_dtypes.bfloat16)


# Native-order NumPy dtypes by object: a dict lookup, cheaper than reading dtype.name on every call.
_NUMPY_CODES = {np.dtype(NAMES[code]): code for code in (F16, F32, F64, I32, I64)}
if _ml_dtypes_bfloat16() is not None:
    _NUMPY_CODES[_ml_dtypes_bfloat16()] = BF16


def from_numpy(dtype, allow_bool=False):
    """The code of a NumPy dtype (also CuPy's), or TypeError naming an unsupported one."""
    code = _NUMPY_CODES.get(dtype)
    if code is not None:
        return code
    if allow_bool and dtype == np.bool_:
        return BOOL
    name = dtype.name
    code = _CODE_BY_NAME.get(name)
    if code is None or (code == BF16 and dtype.itemsize != 2):
        raise TypeError(f"{_READABLE}; got dtype {name}")
    if not dtype.isnative:
        raise TypeError(f"{name} data in non-native byte order ({dtype.str}) is not supported; "
                        "convert it with .astype(its_dtype.newbyteorder('='))")
    return code


def to_numpy(code):
    """The NumPy dtype for a code; bfloat16 needs ml_dtypes (TypeError otherwise)."""
    if code == BF16:
        bfloat16 = _ml_dtypes_bfloat16()
        if bfloat16 is None:
            raise TypeError("bfloat16 NumPy arrays need the ml_dtypes package (pip install ml_dtypes)")
        return bfloat16
    return np.dtype(NAMES[code])


_torch_code_of = None  # {torch.dtype: code}, built on first use (torch is imported by then)
_torch_dtype_of = None  # {code: torch.dtype}


def _torch_tables():
    global _torch_code_of, _torch_dtype_of
    if _torch_code_of is None:
        torch = sys.modules["torch"]
        dtype_of = {F16: torch.float16, BF16: torch.bfloat16, F32: torch.float32, F64: torch.float64,
                    I32: torch.int32, I64: torch.int64}
        _torch_dtype_of = dtype_of
        _torch_code_of = {dtype: code for code, dtype in dtype_of.items()}  # published last: the check above
    return _torch_code_of, _torch_dtype_of


def from_torch(dtype, allow_bool=False):
    """The code of a torch.dtype, or TypeError naming an unsupported one."""
    code = (_torch_code_of or _torch_tables()[0]).get(dtype)
    if code is None and allow_bool and dtype == sys.modules["torch"].bool:
        return BOOL
    if code is None:
        raise TypeError(f"{_READABLE}; got dtype {str(dtype).replace('torch.', '')}")
    return code


def to_torch(code):
    """The torch.dtype for a code."""
    return _torch_tables()[1][code]


def from_dlpack(type_code, bits, lanes, allow_bool=False):
    """The code of a DLPack DLDataType, or TypeError naming an unsupported one."""
    if allow_bool and lanes == 1 and type_code == _DLPACK_BOOL and bits == 8:
        return BOOL
    if lanes == 1:
        if type_code == _DLPACK_INT and bits in (32, 64):
            return {32: I32, 64: I64}[bits]
        if type_code == _DLPACK_FLOAT and bits in (16, 32, 64):
            return {16: F16, 32: F32, 64: F64}[bits]
        if type_code == _DLPACK_BFLOAT and bits == 16:
            return BF16
    kind = _DLPACK_KIND_NAMES.get(type_code, f"dlpack_code{type_code}_")
    name = "bool" if kind == "bool" else f"{kind}{bits}" + (f"x{lanes}" if lanes != 1 else "")
    raise TypeError(f"{_READABLE}; got dtype {name}")


def from_typestr(typestr, allow_bool=False):
    """The code of an array-interface type string ('<f4'), or None when it does not name one of ours
    (bfloat16 has no typestr of its own: callers then try DLPack)."""
    dtype = np.dtype(typestr)
    if dtype.kind == "V":
        return None
    if allow_bool and dtype.kind == "b":
        return BOOL
    floating, integer = dtype.kind == "f" and dtype.itemsize in (2, 4, 8), dtype.kind == "i" and dtype.itemsize in (4, 8)
    if not (floating or integer):
        raise TypeError(f"{_READABLE}; got dtype {dtype.name}")
    return from_numpy(dtype)


def from_argument(dtype):
    """The code of a user's dtype= argument, a floating dtype: a torch dtype, one of the four names, or anything
    np.dtype() accepts (np.float32, 'f4', ml_dtypes.bfloat16)."""
    if isinstance(dtype, str) and dtype in _CODE_BY_NAME:
        code = _CODE_BY_NAME[dtype]
    else:
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(dtype, torch.dtype):
            code = from_torch(dtype)
        else:
            try:
                numpy_dtype = np.dtype(dtype)
            except TypeError:
                raise TypeError(f"dtype={dtype!r} is not a dtype; {_SUPPORTED}") from None
            code = from_numpy(numpy_dtype)
    check_kind(code, index=False)
    return code
