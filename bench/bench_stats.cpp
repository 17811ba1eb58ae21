// bench_stats.cpp - median, minimum and 90th percentile of repeated timings.
#include "bench_stats.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace smx_bench {

TimingSummary summarize(std::vector<double> micros) {
    std::sort(micros.begin(), micros.end());
    const std::size_t count = micros.size();
    TimingSummary summary;
    summary.min_us = micros.front();
    summary.median_us = count % 2 == 1 ? micros[count / 2] : 0.5 * (micros[count / 2 - 1] + micros[count / 2]);
    const std::size_t p90_rank = static_cast<std::size_t>(std::ceil(0.9 * static_cast<double>(count)));
    summary.p90_us = micros[std::max<std::size_t>(p90_rank, 1) - 1];
    return summary;
}

}  // namespace smx_bench
