// object_tag.hpp - a tag that tells a live smx object of one kind from a destroyed one or another kind.
//
// Each public object kind declares its tag as its first member, naming its C type:
//     struct smxSoftmaxDescriptor {
//         SMX_OBJECT_TAG("smxSoftmaxDescriptor_t");
//         ...
// Every entry point that takes one calls check_live(object, "desc") before reading it, and its destroy
// function is destroy_live(object, "desc"). A destroyed object's tag is poisoned, then its memory freed:
// reading it afterwards is undefined behaviour that the tag only makes detectable in the common cases
// (memory not yet reused by an object of the same kind), never a guarantee.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/error.hpp"

namespace smx {

// FNV-1a of a kind's name: a distinct 64-bit tag per kind without a list of kinds to keep in step.
constexpr std::uint64_t live_tag_of(const char* kind) {
    std::uint64_t hash = 0xcbf29ce484222325ull;
    for (; *kind != '\0'; ++kind) hash = (hash ^ static_cast<unsigned char>(*kind)) * 0x100000001b3ull;
    return hash;
}

// What destroy_live leaves in a tag before freeing the object.
constexpr std::uint64_t kDestroyedTag = 0xdead0b1ec7dead00ull;

}  // namespace smx

// Declares the tag of the object kind whose C type is named `kind` ("smxHandle_t"). The first member.
#define SMX_OBJECT_TAG(kind)                                                                   \
    static constexpr const char* kObjectKind = kind;                                           \
    static constexpr std::uint64_t kLiveTag = ::smx::live_tag_of(kind);                        \
    static_assert(kLiveTag != ::smx::kDestroyedTag, "a live tag equal to the destroyed one"); \
    std::uint64_t object_tag = kLiveTag

namespace smx {

// SMX_STATUS_BAD_PARAM_NULL_POINTER for NULL, SMX_STATUS_BAD_PARAM_OBJECT unless `object` holds the live tag
// of `Object`; `argument` names the parameter in the message ("desc").
template <typename Object>
smxStatus_t check_live(const Object* object, const char* argument) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winvalid-offsetof"  // offsetof works on these types in GCC and Clang
    // First in every kind, so one kind cast to another is read at the other's tag, not inside its data.
    static_assert(offsetof(Object, object_tag) == 0, "SMX_OBJECT_TAG must be the object's first member");
#pragma GCC diagnostic pop
    if (object == nullptr) return fail(SMX_STATUS_BAD_PARAM_NULL_POINTER, "{} is NULL", argument);
    if (object->object_tag != Object::kLiveTag) {
        return fail(SMX_STATUS_BAD_PARAM_OBJECT, "{} is not a live {} (destroyed, or another kind of object)",
                    argument, Object::kObjectKind);
    }
    return SMX_STATUS_SUCCESS;
}

// Destroys a live `object` (NULL: nothing to do); refuses anything else as check_live does, freeing nothing.
template <typename Object>
smxStatus_t destroy_live(Object* object, const char* argument) {
    if (object == nullptr) return SMX_STATUS_SUCCESS;
    SMX_RETURN_IF_ERROR(check_live(object, argument));
    // Volatile: a plain store to an object about to be freed is dead to the compiler, which may drop it.
    *static_cast<volatile std::uint64_t*>(&object->object_tag) = kDestroyedTag;
    delete object;
    return SMX_STATUS_SUCCESS;
}

}  // namespace smx
