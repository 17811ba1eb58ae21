// bench_stats.hpp - order statistics of repeated timings.
#pragma once

#include <vector>

namespace smx_bench {

struct TimingSummary {
    double median_us = 0.0;
    double min_us = 0.0;
    double p90_us = 0.0;  // the 90th percentile, nearest rank
};

// Summarizes per-call times in microseconds; `micros` must not be empty.
TimingSummary summarize(std::vector<double> micros);

}  // namespace smx_bench
