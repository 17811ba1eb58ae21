// options.cu - split-row's options instances: the unmasked set (scale, causal window, masked rows) of
// RowsOptionsInput for the pairs of kRowsOptionsPair, each kernel with the launch's scale folded into the exps and
// without (the plan picks one by RowsOptionsParams::fold_scale).
#include "cuda/online/kernel.cuh"

namespace smx::cuda {
namespace {

// The unmasked set's input of x type X, its scale folded into the exps where kFoldScale.
template <class X, bool kFoldScale>
using UnmaskedInput = RowsOptionsInput<RowsOptionSet::Unmasked, X, kFoldScale>;

// Calls make(std::bool_constant<fold>) and returns its kernel, for pairs with options instances; nullptr for others.
template <class X, class Y, class Make>
const void* options_instance(bool fold, const Make& make) {
    if constexpr (kRowsOptionsPair<X, Y>) {
        return fold ? make(std::true_type{}) : make(std::false_type{});
    } else {
        return nullptr;
    }
}

}  // namespace

const void* split_row_stats_options_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype, bool fold) {
    return visit_dtype_pair(x_dtype, y_dtype, [fold](auto x_tag, auto y_tag) -> const void* {
        using X = typename decltype(x_tag)::type;
        return options_instance<X, typename decltype(y_tag)::type>(fold, [](auto fold_tag) {
            return reinterpret_cast<const void*>(&split_row_stats<X, UnmaskedInput<X, decltype(fold_tag)::value>>);
        });
    });
}

const void* split_row_write_options_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype, bool fold) {
    return visit_dtype_pair(x_dtype, y_dtype, [fold](auto x_tag, auto y_tag) -> const void* {
        using X = typename decltype(x_tag)::type;
        using Y = typename decltype(y_tag)::type;
        return options_instance<X, Y>(fold, [](auto fold_tag) {
            return reinterpret_cast<const void*>(&split_row_write<X, Y, UnmaskedInput<X, decltype(fold_tag)::value>>);
        });
    });
}

}  // namespace smx::cuda
