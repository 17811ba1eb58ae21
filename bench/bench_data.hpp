// bench_data.hpp - host-side element handling for smx-bench: dtype names and sizes, conversion of
// f16/bf16/f32/f64 bit patterns to and from double, and fast random fills that never produce zeros.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "smx/smx.h"

namespace smx_bench {

// Bytes per element of a dtype.
std::size_t dtype_size(smxDataType_t dtype);

// Short name used on the command line and in reports: "f16", "bf16", "f32", "f64".
const char* dtype_name(smxDataType_t dtype);

// Parses a short name; returns false for an unknown one.
bool parse_dtype(const std::string& name, smxDataType_t* dtype);

// Reads element `index` of a host array of `dtype` as a double (exact for every dtype).
double load_as_double(const void* data, smxDataType_t dtype, std::int64_t index);

// Writes `value` rounded to `dtype` (round to nearest, ties to even) into element `index`.
void store_from_double(void* data, smxDataType_t dtype, std::int64_t index, double value);

// The absolute slack for softmax outputs too small for y's dtype: f16's smallest subnormal (2^-24; it
// keeps gradual underflow, so its smallest normal would excuse zeroing most outputs of a long row), else
// the smallest normal (f32 and bf16 outputs below float32's may be flushed to 0).
double underflow_slack(smxDataType_t dtype);

// Fills `count` elements of `dtype` at `data` with pseudo-normal values of standard deviation ~3 (the
// spread the tests use), rounded to the dtype. Element i's value depends only on (seed, first_index + i),
// so a buffer filled in chunks, on any number of threads, holds the same data. Values are never zero.
void fill_random(void* data, smxDataType_t dtype, std::int64_t count, std::uint64_t seed, std::int64_t first_index);

}  // namespace smx_bench
