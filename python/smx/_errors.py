"""Library statuses as Python exceptions.

Every error that libsmx reports derives from SmxError (so ``except smx.SmxError`` catches them all, with
``.status``) and from the built-in exception that fits its category, so ordinary handlers work too:
  2000s (bad parameter)             -> SmxValueError(ValueError)
  3003  (dtype pair not offered)    -> SmxTypeError(TypeError)
  other 3000s (not supported here)  -> SmxNotImplementedError(NotImplementedError, itself a RuntimeError)
  4000s, 5000s (internal, device)   -> SmxRuntimeError(RuntimeError)
"""

import re

from ._lib import lib

__all__ = ["SmxError", "SmxValueError", "SmxTypeError", "SmxNotImplementedError", "SmxRuntimeError", "check"]

STATUS_NOT_SUPPORTED_DTYPE_PAIR = 3003


class SmxError(Exception):
    """Mixin base of every error libsmx reports.

    Attributes: ``status`` (the smxStatus_t code), ``status_name`` (smxGetStatusString's text) and
    ``detail`` (smxGetLastErrorMessage's text for the failing call)."""

    def __init__(self, status, status_name, detail):
        super().__init__(f"{detail} [{status_name}]" if detail else status_name)
        self.status = status
        self.status_name = status_name
        self.detail = detail


class SmxValueError(SmxError, ValueError):
    """A parameter libsmx refused (statuses 2000-2999)."""


class SmxTypeError(SmxError, TypeError):
    """A (x dtype, y dtype) pair libsmx does not offer (status 3003)."""


class SmxNotImplementedError(SmxError, NotImplementedError):
    """Valid, but not supported by this build or machine (statuses 3000-3999 but 3003)."""


class SmxRuntimeError(SmxError, RuntimeError):
    """An internal or device failure (statuses 4000 and up)."""


def _error_class(status):
    if 2000 <= status < 3000:
        return SmxValueError
    if status == STATUS_NOT_SUPPORTED_DTYPE_PAIR:
        return SmxTypeError
    if 3000 <= status < 4000:
        return SmxNotImplementedError
    return SmxRuntimeError


def check(status):
    """Raises the exception for a failed smx call's status; returns quietly on success (0).

    Must run on the thread that made the call: the detail message is thread-local in libsmx."""
    if status == 0:
        return
    detail = lib.smxGetLastErrorMessage().decode("utf-8", "replace")
    status_name = lib.smxGetStatusString(status).decode("utf-8", "replace")
    raise _error_class(status)(status, status_name, detail)


_STATUS_TAIL = re.compile(r"(.*) \[(.*?)\] \(smx status (\d+)\)", re.S)


def translated(error):
    """The SmxError a torch kernel's exception stands for (the C++ kernels end their messages with "[NAME]
    (smx status N)"), else the exception itself."""
    found = _STATUS_TAIL.search(str(error))
    if found is None:
        return error
    detail, name, status = found.group(1), found.group(2), int(found.group(3))
    return _error_class(status)(status, name, "" if detail == name else detail)
