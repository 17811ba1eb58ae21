// tensor.hpp - the tensor descriptor behind smxTensorDescriptor_t.
#pragma once

#include <cstdint>
#include <string>

#include "core/object_tag.hpp"
#include "smx/smx.h"

struct smxTensorDescriptor {
    SMX_OBJECT_TAG("smxTensorDescriptor_t");
    smxDataType_t dtype;
    int ndim;
    std::int64_t shape[SMX_MAX_DIMS];
    std::int64_t strides[SMX_MAX_DIMS];  // in elements, explicit (row-major filled in when given NULL)
    std::int64_t numel;                  // product of shape, validated not to overflow
};

namespace smx {

// "[4,5]" - for error messages and logs.
std::string format_dims(const std::int64_t* dims, int ndim);

}  // namespace smx
