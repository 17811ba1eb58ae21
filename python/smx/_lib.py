"""Finds and loads libsmx, and declares the ctypes signature of every C entry point.

Search order (the first library that loads wins):
  1. the file named by the environment variable SMX_LIBRARY (when set, nothing else is tried);
  2. the package's own folder (a libsmx copied next to this file, e.g. bundled into a wheel);
  3. when the package runs from an smx source checkout: <repo>/build/src, then <repo>/build*/src;
  4. the system: ctypes.util.find_library("smx"), then the dynamic loader's own search for the SONAME.
"""

import ctypes
import ctypes.util
import os
import sys
from pathlib import Path

__all__ = ["lib", "path", "LOG_CALLBACK", "CrossEntropyOptions"]

_PACKAGE_DIR = Path(__file__).resolve().parent
_SOURCE_ROOT = _PACKAGE_DIR.parent.parent  # python/smx -> python -> the repository


def _file_names():
    """The library's file names on this platform, the ABI-versioned name first."""
    if sys.platform == "darwin":
        return ["libsmx.0.dylib", "libsmx.dylib"]
    if sys.platform == "win32":
        return ["smx.dll"]
    return ["libsmx.so.0", "libsmx.so"]


def _candidates():
    """Every place to try, in order, as (path or loader name, where it came from)."""
    override = os.environ.get("SMX_LIBRARY")
    if override:
        return [(override, "SMX_LIBRARY")]
    folders = [_PACKAGE_DIR]
    if (_SOURCE_ROOT / "include" / "smx" / "smx.h").is_file():  # the package runs from an smx checkout
        folders.append(_SOURCE_ROOT / "build" / "src")
        folders += [folder / "src" for folder in sorted(_SOURCE_ROOT.glob("build*")) if folder.name != "build"]
    places = [(str(folder / name), "package" if folder == _PACKAGE_DIR else "build tree")
              for folder in folders for name in _file_names()]
    found = ctypes.util.find_library("smx")
    if found:
        places.append((found, "find_library"))
    places += [(name, "system loader") for name in _file_names()]
    return places


def _load():
    tried = []
    for place, origin in _candidates():
        is_file_path = os.sep in place
        if is_file_path and not os.path.exists(place):
            tried.append(f"  {place} ({origin}): no such file")
            continue
        try:
            return ctypes.CDLL(place), place
        except OSError as error:
            tried.append(f"  {place} ({origin}): {error}")
    raise ImportError(
        "smx could not load libsmx. Tried, in order:\n" + "\n".join(tried) +
        "\nBuild it (cmake -S . -B build && cmake --build build), set SMX_LIBRARY to the library file, "
        "or install it where the dynamic loader finds it.")


def _loaded_file(library, fallback):
    """The file the dynamic loader actually mapped for `library` (dladdr), else `fallback`."""
    class DlInfo(ctypes.Structure):
        _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                    ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]
    try:
        dladdr = ctypes.CDLL(None).dladdr
    except (OSError, AttributeError, TypeError):  # no dladdr (Windows): keep the name that was loaded
        return fallback
    dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(DlInfo)]
    dladdr.restype = ctypes.c_int
    info = DlInfo()
    if dladdr(ctypes.cast(library.smxGetVersion, ctypes.c_void_p), ctypes.byref(info)) and info.dli_fname:
        return os.path.realpath(os.fsdecode(info.dli_fname))
    return fallback


lib, _loaded_name = _load()
path = _loaded_file(lib, _loaded_name)

_c_int_p = ctypes.POINTER(ctypes.c_int)
_c_int64_p = ctypes.POINTER(ctypes.c_int64)
_c_void_p_p = ctypes.POINTER(ctypes.c_void_p)

class CrossEntropyOptions(ctypes.Structure):
    """smxCrossEntropyOptions_t (its size field set by the constructor)."""
    _fields_ = [("size", ctypes.c_size_t), ("reduction", ctypes.c_int), ("ignoreIndex", ctypes.c_int64),
                ("labelSmoothing", ctypes.c_double)]

    def __init__(self, reduction, ignore_index, label_smoothing):
        super().__init__(ctypes.sizeof(CrossEntropyOptions), reduction, ignore_index, label_smoothing)


#: smxLogCallback_t: void (*)(smxLogLevel_t level, const char* message, void* userData)
LOG_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)

# (name, restype, argtypes) for every exported function of smx.h, smx_status.h and smx_version.h.
_SIGNATURES = [
    ("smxGetVersion", ctypes.c_int, []),
    ("smxGetStatusString", ctypes.c_char_p, [ctypes.c_int]),
    ("smxGetLastErrorMessage", ctypes.c_char_p, []),
    ("smxCreate", ctypes.c_int, [_c_void_p_p, ctypes.c_int, ctypes.c_int]),
    ("smxDestroy", ctypes.c_int, [ctypes.c_void_p]),
    ("smxGetHandleDevice", ctypes.c_int, [ctypes.c_void_p, _c_int_p, _c_int_p]),
    ("smxCreateTensorDescriptor", ctypes.c_int, [_c_void_p_p, ctypes.c_int, ctypes.c_int, _c_int64_p, _c_int64_p]),
    ("smxGetTensorDescriptor", ctypes.c_int, [ctypes.c_void_p, _c_int_p, _c_int_p, _c_int64_p, _c_int64_p]),
    ("smxDestroyTensorDescriptor", ctypes.c_int, [ctypes.c_void_p]),
    ("smxCreateSoftmaxDescriptor", ctypes.c_int,
     [ctypes.c_void_p, _c_void_p_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]),
    ("smxGetSoftmaxWorkspaceSize", ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]),
    ("smxGetSoftmaxPlan", ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(ctypes.c_char_p)]),
    ("smxSoftmaxForward", ctypes.c_int,
     [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]),
    ("smxDestroySoftmaxDescriptor", ctypes.c_int, [ctypes.c_void_p]),
    ("smxCreateSoftmaxBackwardDescriptor", ctypes.c_int,
     [ctypes.c_void_p, _c_void_p_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]),
    ("smxSoftmaxBackward", ctypes.c_int,
     [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
      ctypes.c_void_p]),
    ("smxCreateSoftmaxOptions", ctypes.c_int, [_c_void_p_p]),
    ("smxDestroySoftmaxOptions", ctypes.c_int, [ctypes.c_void_p]),
    ("smxSetSoftmaxScale", ctypes.c_int, [ctypes.c_void_p, ctypes.c_double]),
    ("smxSetSoftmaxScaleTensor", ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p]),
    ("smxSetSoftmaxMask", ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p]),
    ("smxSetSoftmaxCausal", ctypes.c_int, [ctypes.c_void_p, ctypes.c_int, ctypes.c_int64]),
    ("smxSetSoftmaxMaskedRows", ctypes.c_int, [ctypes.c_void_p, ctypes.c_int]),
    ("smxSetSoftmaxBatchInvariant", ctypes.c_int, [ctypes.c_void_p, ctypes.c_int]),
    ("smxCreateSoftmaxDescriptorWithOptions", ctypes.c_int,
     [ctypes.c_void_p, _c_void_p_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]),
    ("smxSoftmaxForwardWithOptions", ctypes.c_int,
     [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
      ctypes.c_void_p, ctypes.c_void_p]),
    ("smxCreateLogsumexpDescriptor", ctypes.c_int,
     [ctypes.c_void_p, _c_void_p_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]),
    ("smxLogsumexp", ctypes.c_int,
     [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]),
    ("smxCreateLogSoftmaxGatherDescriptor", ctypes.c_int,
     [ctypes.c_void_p, _c_void_p_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]),
    ("smxLogSoftmaxGather", ctypes.c_int,
     [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
      ctypes.c_void_p]),
    ("smxCreateCrossEntropyDescriptor", ctypes.c_int,
     [ctypes.c_void_p, _c_void_p_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
      ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]),
    ("smxCrossEntropy", ctypes.c_int,
     [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
      ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]),
    ("smxCreateShardStatisticsDescriptor", ctypes.c_int,
     [ctypes.c_void_p, _c_void_p_p, ctypes.c_int, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]),
    ("smxShardStatistics", ctypes.c_int,
     [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
      ctypes.c_void_p]),
    ("smxCreateShardSoftmaxDescriptor", ctypes.c_int,
     [ctypes.c_void_p, _c_void_p_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]),
    ("smxShardSoftmax", ctypes.c_int,
     [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
      ctypes.c_void_p]),
    ("smxCreateShardLogsumexpDescriptor", ctypes.c_int,
     [ctypes.c_void_p, _c_void_p_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]),
    ("smxShardLogsumexp", ctypes.c_int,
     [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]),
    ("smxCreateShardCrossEntropyDescriptor", ctypes.c_int,
     [ctypes.c_void_p, _c_void_p_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p,
      ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]),
    ("smxShardCrossEntropy", ctypes.c_int,
     [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
      ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]),
    ("smxCreateShardPeers", ctypes.c_int, [ctypes.c_void_p, _c_void_p_p, ctypes.c_int, ctypes.c_int, ctypes.c_int64]),
    ("smxGetShardPeersHandle", ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p]),
    ("smxConnectShardPeers", ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p]),
    ("smxGetShardPeersTimeouts", ctypes.c_int, [ctypes.c_void_p, _c_int64_p]),
    ("smxDestroyShardPeers", ctypes.c_int, [ctypes.c_void_p]),
    ("smxCreateFusedShardSoftmaxDescriptor", ctypes.c_int,
     [ctypes.c_void_p, _c_void_p_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]),
    ("smxGetFusedShardSoftmaxMaxRowLength", ctypes.c_int, [ctypes.c_int, _c_int64_p]),
    ("smxGetFusedShardSoftmaxPlan", ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(ctypes.c_char_p)]),
    ("smxFusedShardSoftmax", ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]),
    ("smxDestroyFusedShardSoftmaxDescriptor", ctypes.c_int, [ctypes.c_void_p]),
    ("smxSetLogLevel", ctypes.c_int, [ctypes.c_int]),
    ("smxSetLogCallback", ctypes.c_int, [LOG_CALLBACK, ctypes.c_void_p]),
]

# The workspace, plan and destroy calls of every descriptor kind but the softmax forward's, alike but for the name.
for _kind in ("SoftmaxBackward", "Logsumexp", "LogSoftmaxGather", "CrossEntropy", "ShardStatistics", "ShardSoftmax",
              "ShardLogsumexp", "ShardCrossEntropy"):
    _SIGNATURES += [
        (f"smxGet{_kind}WorkspaceSize", ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]),
        (f"smxGet{_kind}Plan", ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(ctypes.c_char_p)]),
        (f"smxDestroy{_kind}Descriptor", ctypes.c_int, [ctypes.c_void_p]),
    ]

for _name, _restype, _argtypes in _SIGNATURES:
    _function = getattr(lib, _name)
    _function.restype = _restype
    _function.argtypes = _argtypes
