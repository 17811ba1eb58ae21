// status.cpp - status strings and the thread-local last-error message.
#include <string>
#include <utility>

#include "core/enum_value.hpp"
#include "core/error.hpp"
#include "smx/smx_status.h"

namespace {

thread_local std::string g_last_error;

}  // namespace

namespace smx {

void set_last_error(std::string message) { g_last_error = std::move(message); }

}  // namespace smx

extern "C" {

SMX_API const char* smxGetStatusString(smxStatus_t status_argument) {
    switch (smx::raw_enum_value(status_argument)) {
        case SMX_STATUS_SUCCESS: return "SMX_STATUS_SUCCESS: success";
        case SMX_STATUS_BAD_PARAM: return "SMX_STATUS_BAD_PARAM: invalid parameter (smxGetLastErrorMessage() says which)";
        case SMX_STATUS_BAD_PARAM_NULL_POINTER: return "SMX_STATUS_BAD_PARAM_NULL_POINTER: a required pointer is NULL";
        case SMX_STATUS_BAD_PARAM_DTYPE: return "SMX_STATUS_BAD_PARAM_DTYPE: unknown data type";
        case SMX_STATUS_BAD_PARAM_NDIM: return "SMX_STATUS_BAD_PARAM_NDIM: number of dimensions out of range";
        case SMX_STATUS_BAD_PARAM_SHAPE: return "SMX_STATUS_BAD_PARAM_SHAPE: invalid or mismatched shape";
        case SMX_STATUS_BAD_PARAM_STRIDES: return "SMX_STATUS_BAD_PARAM_STRIDES: strides out of range";
        case SMX_STATUS_BAD_PARAM_AXIS: return "SMX_STATUS_BAD_PARAM_AXIS: axis out of range";
        case SMX_STATUS_BAD_PARAM_OVERLAP: return "SMX_STATUS_BAD_PARAM_OVERLAP: output overlaps itself or the input";
        case SMX_STATUS_BAD_PARAM_WORKSPACE: return "SMX_STATUS_BAD_PARAM_WORKSPACE: workspace too small";
        case SMX_STATUS_BAD_PARAM_MODE: return "SMX_STATUS_BAD_PARAM_MODE: unknown softmax mode";
        case SMX_STATUS_BAD_PARAM_DEVICE: return "SMX_STATUS_BAD_PARAM_DEVICE: invalid device, or data on another device";
        case SMX_STATUS_BAD_PARAM_ALIGNMENT: return "SMX_STATUS_BAD_PARAM_ALIGNMENT: data pointer not aligned to its element size";
        case SMX_STATUS_BAD_PARAM_OBJECT: return "SMX_STATUS_BAD_PARAM_OBJECT: not a live handle or descriptor of the expected kind";
        case SMX_STATUS_NOT_SUPPORTED: return "SMX_STATUS_NOT_SUPPORTED: not supported";
        case SMX_STATUS_NOT_SUPPORTED_DEVICE_ABSENT: return "SMX_STATUS_NOT_SUPPORTED_DEVICE_ABSENT: no such device on this machine";
        case SMX_STATUS_NOT_SUPPORTED_BACKEND_NOT_BUILT: return "SMX_STATUS_NOT_SUPPORTED_BACKEND_NOT_BUILT: backend not built into this library";
        case SMX_STATUS_NOT_SUPPORTED_DTYPE_PAIR: return "SMX_STATUS_NOT_SUPPORTED_DTYPE_PAIR: input/output data type pair not supported";
        case SMX_STATUS_INTERNAL_ERROR: return "SMX_STATUS_INTERNAL_ERROR: internal error (a bug; set SMX_LOG_LEVEL=debug and report it)";
        case SMX_STATUS_ALLOC_FAILED: return "SMX_STATUS_ALLOC_FAILED: host memory allocation failed";
        case SMX_STATUS_EXECUTION_FAILED: return "SMX_STATUS_EXECUTION_FAILED: device execution failed (smxGetLastErrorMessage() has the CUDA error)";
    }
    return "SMX_STATUS_UNKNOWN: not an smx status code";
}

SMX_API const char* smxGetLastErrorMessage(void) { return g_last_error.c_str(); }

}  // extern "C"
