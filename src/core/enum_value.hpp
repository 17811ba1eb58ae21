// enum_value.hpp - reading a C enum argument safely.
//
// A C caller may pass any int where the API declares an enum. In C++ merely loading an enum object whose
// value lies outside its enumerators' range is undefined behaviour (UBSan's -fsanitize=enum flags it), so
// entry points copy the argument's bits into an int first and validate that.
#pragma once

#include <cstring>

namespace smx {

template <typename Enum>
int raw_enum_value(const Enum& argument) {
    static_assert(sizeof(Enum) == sizeof(int), "C enums of the API are int-sized");
    int raw;
    std::memcpy(&raw, &argument, sizeof raw);
    return raw;
}

}  // namespace smx
