// bench_case.hpp - what every softmax case of smx-bench does around its smx call: input and output buffers
// rotated past the device's cache, fresh random inputs, the check's result copied into the record, and the
// timing (warm-up, timed calls, graph replays).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "bench_check.hpp"
#include "bench_device.hpp"
#include "bench_grid.hpp"
#include "bench_report.hpp"

namespace smx_bench {

// `count` buffers of one tensor, each starting on a 256-byte boundary of one allocation.
class RotatingBuffers {
public:
    RotatingBuffers(BenchDevice& device, std::size_t tensor_bytes, int count);
    // The buffer call number `call` uses (calls wrap around the buffers).
    void* slot(int call) const { return static_cast<unsigned char*>(memory_.data()) + slot_bytes_ * (call % count_); }
    int count() const { return count_; }
    std::size_t slot_bytes() const { return slot_bytes_; }

private:
    std::size_t slot_bytes_;
    int count_;
    DeviceBuffer memory_;
};

// How many buffers of `tensor_bytes` span at least four times the device's last-level cache (at least one).
int buffers_for(const BenchDevice& device, std::size_t tensor_bytes);

// Fills every slot with fresh random data of `dtype` (never zeros), over the layout's span, generated on the
// host in chunks; every slot holds different data. With minus_inf_period > 0, every element whose index in the
// slot is a multiple of it is -inf instead (an additive mask's excluded elements).
void fill_inputs(BenchDevice& device, const RotatingBuffers& inputs, const Layout& layout, smxDataType_t dtype,
                 std::uint64_t seed, std::int64_t minus_inf_period = 0);

// Copies a check's result into the record; false when it failed (the case is then not timed).
bool record_check(const CheckResult& check, CaseRecord& record);

// How a case is timed: quick (fewer calls) and with graph replays (--graph).
struct TimingChoice {
    bool quick = false;
    bool graph = false;
};

// Times `call` after its checked call into slot 0, so the timed calls rotate from slot 1: a warm-up, then the
// timed calls (as many as fit a budget on a GPU, a few on the CPU) into the record's smx_us, smx_min_us and
// smx_p90_us, and with choice.graph the replays of a graph of one call per buffer into graph_us.
void time_calls(BenchDevice& device, const std::function<void(int)>& call, int buffers, TimingChoice choice,
                const RunInfo& run, CaseRecord& record);

}  // namespace smx_bench
