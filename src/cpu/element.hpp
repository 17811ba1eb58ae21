// element.hpp - element access for the CPU plans, resolved at compile time per dtype so their row loops stay
// tight, and the visitor that picks a loop's instance for run-time dtypes.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/dtype.hpp"

namespace smx {

// Element reader/writer for one dtype: values travel as double, stores round once (core/dtype.hpp).
template <smxDataType_t D>
struct Element {
    static double load(const void* base, std::int64_t index) { return load_as_double(base, D, index); }
    static void store(void* base, std::int64_t index, double value) { store_from_double(base, D, index, value); }
};

template <smxDataType_t D>
using DtypeTag = std::integral_constant<smxDataType_t, D>;

// Calls visit(DtypeTag<dtype>{}) and returns its result, so a run-time dtype selects a template instance:
//   visit_cpu_dtype(d, [](auto tag) { return &loop<decltype(tag)::value>; })
// Descriptors hold validated dtypes only; anything else is taken as f64.
template <typename Visit>
auto visit_cpu_dtype(smxDataType_t dtype, const Visit& visit) {
    switch (dtype) {
        case SMX_DTYPE_F16: return visit(DtypeTag<SMX_DTYPE_F16>{});
        case SMX_DTYPE_BF16: return visit(DtypeTag<SMX_DTYPE_BF16>{});
        case SMX_DTYPE_F32: return visit(DtypeTag<SMX_DTYPE_F32>{});
        default: return visit(DtypeTag<SMX_DTYPE_F64>{});
    }
}

}  // namespace smx
