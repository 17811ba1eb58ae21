// bench_case.cpp - buffers, inputs and timing shared by smx-bench's softmax cases (bench_case.hpp).
#include "bench_case.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "bench_data.hpp"
#include "bench_stats.hpp"

namespace smx_bench {
namespace {

// Repetitions for one case: GPU cases get up to 50 timed calls within a ~50 ms budget, CPU cases a few.
struct Repetitions {
    int warmup = 0;
    int calls = 0;
    int graph_replays = 0;
};

Repetitions repetitions_for(const BenchDevice& device, bool quick, double expected_us) {
    if (device.type() == SMX_DEVICE_CPU) return quick ? Repetitions{1, 3, 0} : Repetitions{1, 5, 0};
    if (quick) return {2, 10, 5};
    constexpr double budget_us = 50000.0;
    const int calls = static_cast<int>(std::clamp(budget_us / std::max(expected_us, 1.0), 10.0, 50.0));
    return {5, calls, 10};
}

}  // namespace

RotatingBuffers::RotatingBuffers(BenchDevice& device, std::size_t tensor_bytes, int count)
    : slot_bytes_((tensor_bytes + 255) / 256 * 256), count_(count), memory_(device, slot_bytes_ * count) {}

int buffers_for(const BenchDevice& device, std::size_t tensor_bytes) {
    const double needed = 4.0 * static_cast<double>(device.cache_bytes()) / std::max<std::size_t>(tensor_bytes, 1);
    return std::max(1, static_cast<int>(std::ceil(needed)));
}

void fill_inputs(BenchDevice& device, const RotatingBuffers& inputs, const Layout& layout, smxDataType_t dtype,
                 std::uint64_t seed, std::int64_t minus_inf_period) {
    constexpr std::int64_t chunk_elements = std::int64_t{1} << 24;
    const std::int64_t span = layout.span();
    std::vector<unsigned char> chunk(std::min(span, chunk_elements) * dtype_size(dtype));
    std::int64_t generated = 0;  // elements over all slots, so each slot holds different data
    for (int slot = 0; slot < inputs.count(); ++slot) {
        auto* destination = static_cast<unsigned char*>(inputs.slot(slot));
        for (std::int64_t first = 0; first < span; first += chunk_elements) {
            const std::int64_t count = std::min(chunk_elements, span - first);
            fill_random(chunk.data(), dtype, count, seed, generated);
            if (minus_inf_period > 0) {
                const std::int64_t skip = (minus_inf_period - first % minus_inf_period) % minus_inf_period;
                for (std::int64_t i = skip; i < count; i += minus_inf_period) {
                    store_from_double(chunk.data(), dtype, i, -HUGE_VAL);
                }
            }
            device.copy_to_device(destination + first * dtype_size(dtype), chunk.data(), count * dtype_size(dtype));
            generated += count;
        }
    }
}

bool record_check(const CheckResult& check, CaseRecord& record) {
    record.check_passed = check.passed;
    record.rows_checked = check.rows_checked;
    record.check_sampled = check.sampled;
    if (std::isfinite(check.max_error_ratio)) record.max_err_ratio = check.max_error_ratio;
    if (!check.passed) record.error = "check: " + check.detail;
    return check.passed;
}

void time_calls(BenchDevice& device, const std::function<void(int)>& call, int buffers, TimingChoice choice,
                const RunInfo& run, CaseRecord& record) {
    const double expected_us = static_cast<double>(record.bytes) / run.copy_bytes_per_s * 1e6;
    const Repetitions repetitions = repetitions_for(device, choice.quick, expected_us);
    const auto rotated = [&](int index) { call(1 + index); };
    for (int index = 0; index < repetitions.warmup; ++index) rotated(index);
    device.synchronize();
    const TimingSummary summary =
        summarize(device.time_each([&](int index) { rotated(repetitions.warmup + index); }, repetitions.calls));
    record.calls = repetitions.calls;
    record.smx_us = summary.median_us;
    record.smx_min_us = summary.min_us;
    record.smx_p90_us = summary.p90_us;
    if (choice.graph) {
        constexpr int max_captured = 4096;  // enough calls to rotate through 4x the L2 on decode shapes
        record.graph_us = device.time_graph(call, std::min(buffers, max_captured), repetitions.graph_replays);
    }
}

}  // namespace smx_bench
