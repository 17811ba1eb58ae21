// fuzz_c_api.cpp - libFuzzer entry point: the whole softmax C API on the CPU device, driven by raw bytes.
//
// Each input is decoded into one problem, valid or not, and run through create -> workspace query ->
// forward -> destroy. Host buffers cover exactly the bytes the strides can reach, so any access outside
// them is an ASan report; UBSan aborts on undefined behaviour. Beyond memory safety, the fuzzer checks that
// every status is a known code, that failures leave a message and NULL outputs, and that a successful
// forward wrote every element of y with a value softmax (or log-softmax) can produce.
//
// Input format (bytes past the end read as 0, so every input decodes):
//   [0] ndim     = b % 10            0 and 9 are invalid (1..SMX_MAX_DIMS=8 are valid)
//   [1] x dtype  = b % 6             0 and 5 are not smxDataType_t values
//   [2] y dtype  = b % 6
//   [3] mode     = b % 4             0 and 3 are not smxSoftmaxMode_t values
//   [4] axis     = (int8_t)b % 12    -11..11, out of range included
//   [5] flags    bit0 x strides explicit   bit1 y strides explicit   bit2 y = x (in place)
//                bit3 y = x + shift bytes  bit4 x NULL   bit5 y NULL   bit6 shape NULL
//                bit7 workspace one byte short of the queried size
//   [6] shift    partial-overlap offset of y from x in bytes (bit3), 1..255 (0 reads as 1)
//   then ndim bytes:           shape[i] = (int8_t)b % 9, -8..8
//   then ndim x strides, then ndim y strides, each 2 bytes little-endian int16 s:
//                0x7fff -> +2^62 and 0x8000 -> -2^62 (huge: the span overflows), else s % 64 (-63..63;
//                0 broadcasts, equal strides overlap)
//   the remaining bytes, repeated, are the raw bits of x's buffer (NaN, inf, denormals included).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "smx/smx.h"

namespace {

constexpr std::int64_t kMaxElements = 4096;          // keeps each input fast
constexpr std::int64_t kMaxBufferBytes = 1 << 22;    // larger spans are created and queried, never run
constexpr std::int64_t kHugeStride = std::int64_t{1} << 62;

// Reads the input front to back; past the end every byte is 0.
class ByteReader {
public:
    ByteReader(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
    std::uint8_t byte() { return pos_ < size_ ? data_[pos_++] : 0; }
    std::int16_t int16() {
        const std::uint16_t low = byte();
        const std::uint16_t high = byte();
        return static_cast<std::int16_t>(low | (high << 8));
    }
    const std::uint8_t* rest() const { return data_ + pos_; }
    std::size_t rest_size() const { return pos_ < size_ ? size_ - pos_ : 0; }

private:
    const std::uint8_t* data_;
    std::size_t size_;
    std::size_t pos_ = 0;
};

[[noreturn]] void finding(const char* what, smxStatus_t status) {
    std::fprintf(stderr, "smx fuzz finding: %s (status %d: %s; last error: %s)\n", what, static_cast<int>(status),
                 smxGetStatusString(status), smxGetLastErrorMessage());
    std::abort();
}

// A returned status must be a known code, and a failure must say why.
void check_status(smxStatus_t status, const char* call) {
    if (std::strncmp(smxGetStatusString(status), "SMX_STATUS_UNKNOWN", 18) == 0) finding(call, status);
    if (status != SMX_STATUS_SUCCESS && smxGetLastErrorMessage()[0] == '\0') finding(call, status);
}

std::int64_t decode_stride(std::int16_t raw) {
    if (raw == std::numeric_limits<std::int16_t>::max()) return kHugeStride;
    if (raw == std::numeric_limits<std::int16_t>::min()) return -kHugeStride;
    return raw % 64;
}

std::int64_t element_size(int dtype) {
    switch (dtype) {
        case SMX_DTYPE_F16:
        case SMX_DTYPE_BF16: return 2;
        case SMX_DTYPE_F32: return 4;
        case SMX_DTYPE_F64: return 8;
        default: return 4;  // not a dtype: creation fails, the size only shapes the buffer
    }
}

// The bytes, relative to element [0,...,0], that a tensor's elements occupy: [low, high).
// Returns false when that range cannot be computed in int64 or exceeds kMaxBufferBytes.
bool byte_range(int ndim, const std::int64_t* shape, const std::int64_t* strides, std::int64_t elem_bytes,
                std::int64_t* low, std::int64_t* high) {
    __int128 min_offset = 0;
    __int128 max_offset = 0;
    for (int i = 0; i < ndim; ++i) {
        if (shape[i] <= 0) {  // empty: nothing is reached
            *low = 0;
            *high = 0;
            return true;
        }
        const __int128 extent = static_cast<__int128>(shape[i] - 1) * strides[i];
        (extent < 0 ? min_offset : max_offset) += extent;
    }
    const __int128 low_bytes = min_offset * elem_bytes;
    const __int128 high_bytes = (max_offset + 1) * elem_bytes;
    if (high_bytes - low_bytes > kMaxBufferBytes) return false;
    *low = static_cast<std::int64_t>(low_bytes);
    *high = static_cast<std::int64_t>(high_bytes);
    return true;
}

void row_major_strides(int ndim, const std::int64_t* shape, std::int64_t* strides) {
    std::int64_t stride = 1;
    for (int i = ndim - 1; i >= 0; --i) {
        strides[i] = stride;
        stride *= shape[i] > 0 ? shape[i] : 1;
    }
}

// The +inf bit pattern of a dtype: softmax and log-softmax never produce it, so it marks unwritten outputs.
void store_positive_infinity(std::uint8_t* at, int dtype) {
    switch (dtype) {
        case SMX_DTYPE_F16: { const std::uint16_t bits = 0x7c00; std::memcpy(at, &bits, 2); break; }
        case SMX_DTYPE_BF16: { const std::uint16_t bits = 0x7f80; std::memcpy(at, &bits, 2); break; }
        case SMX_DTYPE_F32: { const float v = INFINITY; std::memcpy(at, &v, 4); break; }
        default: { const double v = INFINITY; std::memcpy(at, &v, 8); break; }
    }
}

double load_as_double(const std::uint8_t* at, int dtype) {
    switch (dtype) {
        case SMX_DTYPE_F16: {
            std::uint16_t bits;
            std::memcpy(&bits, at, 2);
            const int exponent = (bits >> 10) & 0x1f;
            const int mantissa = bits & 0x3ff;
            const double sign = (bits & 0x8000) ? -1.0 : 1.0;
            if (exponent == 0x1f) return mantissa ? NAN : sign * INFINITY;
            if (exponent == 0) return sign * std::ldexp(mantissa, -24);
            return sign * std::ldexp(1024 + mantissa, exponent - 25);
        }
        case SMX_DTYPE_BF16: {
            std::uint16_t bits;
            std::memcpy(&bits, at, 2);
            const std::uint32_t wide = static_cast<std::uint32_t>(bits) << 16;
            float v;
            std::memcpy(&v, &wide, 4);
            return v;
        }
        case SMX_DTYPE_F32: { float v; std::memcpy(&v, at, 4); return v; }
        default: { double v; std::memcpy(&v, at, 8); return v; }
    }
}

// Calls fn(byte offset of the element) for every element of a non-empty tensor.
template <typename Fn>
void for_each_element(int ndim, const std::int64_t* shape, const std::int64_t* strides, std::int64_t elem_bytes,
                      Fn&& fn) {
    std::int64_t index[SMX_MAX_DIMS] = {};
    while (true) {
        std::int64_t offset = 0;
        for (int i = 0; i < ndim; ++i) offset += index[i] * strides[i];
        fn(offset * elem_bytes);
        int dim = ndim - 1;
        while (dim >= 0 && ++index[dim] == shape[dim]) index[dim--] = 0;
        if (dim < 0) return;
    }
}

// Owns one malloc'd buffer (exact size, so ASan sees the first byte past it).
struct Buffer {
    std::uint8_t* bytes = nullptr;
    explicit Buffer(std::int64_t size) : bytes(static_cast<std::uint8_t*>(std::malloc(size > 0 ? size : 1))) {
        if (bytes == nullptr) std::abort();
    }
    ~Buffer() { std::free(bytes); }
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
};

void fill_from_input(std::uint8_t* at, std::int64_t size, const ByteReader& reader) {
    const std::size_t available = reader.rest_size();
    for (std::int64_t i = 0; i < size; ++i) at[i] = available ? reader.rest()[i % available] : 0x3c;
}

struct Problem {
    int ndim = 0;
    int x_dtype = 0;
    int y_dtype = 0;
    int mode = 0;
    int axis = 0;
    std::uint8_t flags = 0;
    std::int64_t shift = 1;
    std::int64_t shape[9] = {};
    std::int64_t x_strides[9] = {};
    std::int64_t y_strides[9] = {};

    bool flag(int bit) const { return (flags >> bit) & 1; }
};

Problem decode(ByteReader& reader) {
    Problem p;
    p.ndim = reader.byte() % 10;
    p.x_dtype = reader.byte() % 6;
    p.y_dtype = reader.byte() % 6;
    p.mode = reader.byte() % 4;
    p.axis = static_cast<std::int8_t>(reader.byte()) % 12;
    p.flags = reader.byte();
    p.shift = reader.byte();
    if (p.shift == 0) p.shift = 1;
    for (int i = 0; i < p.ndim; ++i) p.shape[i] = static_cast<std::int8_t>(reader.byte()) % 9;
    for (int i = 0; i < p.ndim; ++i) p.x_strides[i] = decode_stride(reader.int16());
    for (int i = 0; i < p.ndim; ++i) p.y_strides[i] = decode_stride(reader.int16());
    return p;
}

// Runs forward on buffers laid out as the problem asks, then checks y when the call succeeded.
void run_forward(const Problem& p, smxSoftmaxDescriptor_t softmax, smxTensorDescriptor_t y_desc,
                 const ByteReader& reader, std::int64_t numel) {
    const int ndim = p.ndim;
    std::int64_t x_strides[SMX_MAX_DIMS];
    std::int64_t y_strides[SMX_MAX_DIMS];
    if (p.flag(0)) std::memcpy(x_strides, p.x_strides, sizeof(x_strides));
    else row_major_strides(ndim, p.shape, x_strides);
    check_status(smxGetTensorDescriptor(y_desc, nullptr, nullptr, nullptr, y_strides), "smxGetTensorDescriptor");

    const std::int64_t x_elem = element_size(p.x_dtype);
    const std::int64_t y_elem = element_size(p.y_dtype);
    std::int64_t x_low, x_high, y_low, y_high;
    if (!byte_range(ndim, p.shape, x_strides, x_elem, &x_low, &x_high)) return;
    if (!byte_range(ndim, p.shape, y_strides, y_elem, &y_low, &y_high)) return;

    const bool in_place = p.flag(2);
    const bool aliased = in_place || p.flag(3);
    const std::int64_t y_offset = in_place ? 0 : p.shift;  // y's element [0..0], in bytes from x's, when aliased

    size_t workspace_bytes = 0;
    check_status(smxGetSoftmaxWorkspaceSize(softmax, &workspace_bytes), "smxGetSoftmaxWorkspaceSize");
    if (p.flag(7) && workspace_bytes > 0) --workspace_bytes;
    Buffer workspace(static_cast<std::int64_t>(workspace_bytes));

    std::uint8_t* x = nullptr;
    std::uint8_t* y = nullptr;
    Buffer x_buffer(aliased ? std::max(x_high, y_high + y_offset) - std::min(x_low, y_low + y_offset)
                            : x_high - x_low);
    Buffer y_buffer(aliased ? 0 : y_high - y_low);
    if (aliased) {
        const std::int64_t low = std::min(x_low, y_low + y_offset);
        const std::int64_t high = std::max(x_high, y_high + y_offset);
        fill_from_input(x_buffer.bytes, high - low, reader);
        x = x_buffer.bytes - low;
        y = x + y_offset;
    } else {
        fill_from_input(x_buffer.bytes, x_high - x_low, reader);
        x = x_buffer.bytes - x_low;
        y = y_buffer.bytes - y_low;
        if (numel > 0) for_each_element(ndim, p.shape, y_strides, y_elem, [&](std::int64_t at) {
            store_positive_infinity(y + at, p.y_dtype);
        });
    }

    const smxStatus_t status = smxSoftmaxForward(softmax, workspace.bytes, workspace_bytes, p.flag(5) ? nullptr : y,
                                                 p.flag(4) ? nullptr : x, nullptr);
    check_status(status, "smxSoftmaxForward");
    if (status != SMX_STATUS_SUCCESS || numel == 0) return;
    if (p.flag(4) || p.flag(5)) finding("forward accepted a NULL x or y with elements to compute", status);
    for_each_element(ndim, p.shape, y_strides, y_elem, [&](std::int64_t at) {
        const double v = load_as_double(y + at, p.y_dtype);
        const bool valid = std::isnan(v) || (p.mode == SMX_SOFTMAX ? (v >= 0.0 && v <= 1.0) : v <= 0.0);
        if (!valid) finding("forward succeeded but an element of y is unwritten or out of range", status);
    });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    ByteReader reader(data, size);
    const Problem p = decode(reader);

    std::int64_t numel = 1;
    for (int i = 0; i < p.ndim; ++i) numel *= p.shape[i] > 0 ? p.shape[i] : 0;
    if (numel > kMaxElements) return -1;  // keeps the run fast; -1 also keeps such inputs out of the corpus

    smxHandle_t handle = nullptr;
    const smxStatus_t handle_status = smxCreate(&handle, SMX_DEVICE_CPU, 0);
    check_status(handle_status, "smxCreate");
    if (handle_status != SMX_STATUS_SUCCESS) finding("smxCreate failed on the CPU", handle_status);

    const std::int64_t* shape = p.flag(6) ? nullptr : p.shape;
    smxTensorDescriptor_t x_desc = nullptr;
    smxTensorDescriptor_t y_desc = nullptr;
    const smxStatus_t x_status = smxCreateTensorDescriptor(&x_desc, static_cast<smxDataType_t>(p.x_dtype), p.ndim,
                                                           shape, p.flag(0) ? p.x_strides : nullptr);
    check_status(x_status, "smxCreateTensorDescriptor(x)");
    const smxStatus_t y_status = smxCreateTensorDescriptor(&y_desc, static_cast<smxDataType_t>(p.y_dtype), p.ndim,
                                                           shape, p.flag(1) ? p.y_strides : nullptr);
    check_status(y_status, "smxCreateTensorDescriptor(y)");
    if ((x_status != SMX_STATUS_SUCCESS && x_desc != nullptr) || (y_status != SMX_STATUS_SUCCESS && y_desc != nullptr)) {
        finding("a failed smxCreateTensorDescriptor left a descriptor behind", x_status != 0 ? x_status : y_status);
    }

    smxSoftmaxDescriptor_t softmax = nullptr;
    const smxStatus_t softmax_status = smxCreateSoftmaxDescriptor(handle, &softmax, static_cast<smxSoftmaxMode_t>(p.mode),
                                                                  p.axis, y_desc, x_desc);
    check_status(softmax_status, "smxCreateSoftmaxDescriptor");
    if (softmax_status != SMX_STATUS_SUCCESS && softmax != nullptr) {
        finding("a failed smxCreateSoftmaxDescriptor left a descriptor behind", softmax_status);
    }
    if (softmax_status == SMX_STATUS_SUCCESS) {
        const char* plan = nullptr;
        check_status(smxGetSoftmaxPlan(softmax, &plan), "smxGetSoftmaxPlan");
        if (plan == nullptr || plan[0] == '\0') finding("smxGetSoftmaxPlan gave no text", SMX_STATUS_SUCCESS);
        run_forward(p, softmax, y_desc, reader, numel);
    }

    check_status(smxDestroySoftmaxDescriptor(softmax), "smxDestroySoftmaxDescriptor");
    check_status(smxDestroyTensorDescriptor(y_desc), "smxDestroyTensorDescriptor(y)");
    check_status(smxDestroyTensorDescriptor(x_desc), "smxDestroyTensorDescriptor(x)");
    check_status(smxDestroy(handle), "smxDestroy");
    return 0;
}
