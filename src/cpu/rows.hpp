// rows.hpp - what every CPU plan shares: where a row starts in an operand, how many threads a problem gets,
// and running row ranges on those threads.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <new>
#include <system_error>
#include <thread>
#include <vector>

#include "ops/common/row_problem.hpp"

namespace smx {

// Every thread gets at least this many elements, so small problems stay on the calling thread.
constexpr std::int64_t kMinElementsPerThread = 1 << 16;

// The threads a CPU plan uses for `geometry` when a call touches `elements` elements: at most `max_threads`,
// one per kMinElementsPerThread elements, one per row.
inline int cpu_threads_for(const RowGeometry& geometry, int max_threads, std::int64_t elements) {
    const std::int64_t by_size = std::max<std::int64_t>(1, elements / kMinElementsPerThread);
    return static_cast<int>(
        std::min<std::int64_t>({std::max(1, max_threads), by_size, std::max<std::int64_t>(1, geometry.rows)}));
}

// The same for a call that touches the geometry's numel elements (x's).
inline int cpu_threads_for(const RowGeometry& geometry, int max_threads) {
    return cpu_threads_for(geometry, max_threads, geometry.numel);
}

// Element offset of row `row`'s first element in an operand laid out as `layout`.
inline std::int64_t row_offset(const RowGeometry& geometry, const OperandLayout& layout, std::int64_t row) {
    switch (geometry.layout) {
        case RowLayout::Rows:
            return row * layout.row_stride;
        case RowLayout::Spatial:
            return (row / geometry.inner) * layout.outer_stride + row % geometry.inner;
        case RowLayout::General: {
            std::int64_t rest = row, offset = 0;
            for (int d = geometry.index_ndim - 1; d >= 0; --d) {
                offset += (rest % geometry.index_shape[d]) * layout.index_strides[d];
                rest /= geometry.index_shape[d];
            }
            return offset;
        }
    }
    return 0;
}

// Calls rows(begin, end) over [0, row_count) in `threads` contiguous chunks, one per thread, the first on the
// calling thread, and returns when all are done. A thread that cannot be started (std::bad_alloc or
// std::system_error) leaves its rows to the calling thread rather than failing. `rows` must not throw.
template <typename RowsFn>
void run_row_chunks(std::int64_t row_count, int threads, const RowsFn& rows) {
    if (threads <= 1) {
        rows(std::int64_t{0}, row_count);
        return;
    }
    // Joins every started worker on every path out of this function: a joinable std::thread destroyed
    // unjoined calls std::terminate.
    struct JoinAll {
        std::vector<std::thread> workers;
        ~JoinAll() {
            for (std::thread& worker : workers) {
                if (worker.joinable()) worker.join();
            }
        }
    } started;
    const std::int64_t chunk = (row_count + threads - 1) / threads;
    std::int64_t handed_out = std::min(row_count, chunk);  // rows [0, handed_out) have an owner
    try {
        started.workers.reserve(threads - 1);  // up front: a failure in the loop is then a thread start's own
        for (int t = 1; t < threads && handed_out < row_count; ++t) {
            const std::int64_t end = std::min(row_count, handed_out + chunk);
            started.workers.emplace_back(std::cref(rows), handed_out, end);
            handed_out = end;
        }
    } catch (const std::bad_alloc&) {
        // No memory for a thread's state: as below, this thread computes the rows nobody took.
    } catch (const std::system_error&) {
        // The system refused a thread: this thread computes the rows nobody took.
    }
    rows(std::int64_t{0}, std::min(row_count, chunk));
    if (handed_out < row_count) rows(handed_out, row_count);
}

}  // namespace smx
