// threads.hpp - how the CPU backend shares a problem's rows among threads, for every operator.
//
// Rows are split into contiguous chunks, one per thread, the calling thread taking the first. A thread that
// cannot be started (no memory for its state, or the system refuses it) leaves its rows to the calling thread,
// so a call never fails for want of threads; every thread started has finished when run_rows returns.
#pragma once

#include <algorithm>
#include <cstdint>
#include <new>
#include <system_error>
#include <thread>
#include <vector>

namespace smx {

// Every thread gets at least this many elements, so small problems stay on the calling thread.
constexpr std::int64_t kMinElementsPerThread = 1 << 16;

// How many threads a problem of `elements` elements in `rows` rows takes, at most `max_threads`.
inline int cpu_thread_count(std::int64_t elements, std::int64_t rows, int max_threads) {
    const std::int64_t by_size = std::max<std::int64_t>(1, elements / kMinElementsPerThread);
    return static_cast<int>(std::min<std::int64_t>({std::max(1, max_threads), by_size, std::max<std::int64_t>(1, rows)}));
}

// Joins every joinable thread of `threads` when it goes out of scope, on every path out of the scope.
struct JoinAll {
    std::vector<std::thread>& threads;
    ~JoinAll() {
        for (std::thread& thread : threads) {
            if (thread.joinable()) thread.join();
        }
    }
};

// Calls rows_fn(begin, end) over [0, rows) in `threads` contiguous chunks, one per thread.
template <class RowsFn>
void run_rows(std::int64_t rows, int threads, const RowsFn& rows_fn) {
    if (threads <= 1) {
        rows_fn(std::int64_t{0}, rows);
        return;
    }
    std::vector<std::thread> workers;
    const JoinAll join_on_exit{workers};  // a joinable std::thread destroyed unjoined calls std::terminate
    const std::int64_t chunk = (rows + threads - 1) / threads;
    std::int64_t handed_out = std::min(rows, chunk);  // rows [0, handed_out) have an owner
    try {
        workers.reserve(threads - 1);  // up front: a failure in the loop is then a thread start's own
        for (int t = 1; t < threads && handed_out < rows; ++t) {
            const std::int64_t end = std::min(rows, handed_out + chunk);
            workers.emplace_back(rows_fn, handed_out, end);
            handed_out = end;
        }
    } catch (const std::bad_alloc&) {
        // No memory for a thread's state: as below, this thread computes the rows nobody took.
    } catch (const std::system_error&) {
        // The system refused a thread: this thread computes the rows nobody took.
    }
    rows_fn(std::int64_t{0}, std::min(rows, chunk));
    if (handed_out < rows) rows_fn(handed_out, rows);
}

}  // namespace smx
