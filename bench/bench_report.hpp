// bench_report.hpp - what smx-bench reports per case: the record, the table row printed as it goes, and
// the JSON file written at the end.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bench_grid.hpp"

namespace smx_bench {

// Facts about the whole run, repeated in every JSON record so records can be merged across runs.
struct RunInfo {
    std::string device_type;     // "cuda" or "cpu"
    std::string device_name;
    std::string commit;
    std::string date;            // ISO 8601, UTC
    double copy_bytes_per_s = 0; // read + write bytes per second of the device's own copy
    std::string copy_method;
    std::optional<double> launch_floor_us;  // GPU: median time of a 4-byte memset timed like a case
    std::uint64_t seed = 0;
};

struct CaseRecord {
    std::string op;                     // softmax, log_softmax, softmax_backward, log_softmax_backward
    std::string group;
    std::string label;
    smxDataType_t x_dtype = SMX_DTYPE_F32;
    smxDataType_t y_dtype = SMX_DTYPE_F32;
    std::vector<std::int64_t> shape;
    std::vector<std::int64_t> strides;
    int dim = -1;
    std::string plan;
    std::int64_t bytes = 0;             // numel * (sizeof x + sizeof y); backward: numel * (2 sizeof y + sizeof x)
    int calls = 0;                      // timed calls
    int buffers = 0;                    // input (and output) buffers rotated through
    std::optional<double> smx_us;       // median; empty when the case failed before timing
    std::optional<double> smx_min_us;
    std::optional<double> smx_p90_us;
    std::optional<double> graph_us;     // per forward, from graph replays (--graph)
    bool check_passed = false;
    std::optional<double> max_err_ratio;  // empty when infinite (NaN or unwritten output) or not checked
    std::int64_t rows_checked = 0;
    bool check_sampled = false;
    std::string error;                  // why the case failed, if it did
    // --options only (bench_options.hpp): the option measured ("plain" for the baseline beside it), what it was
    // set to, and the plain case's median on the same layout, dtype pair and op in the same run.
    std::string option;
    std::string option_detail;
    std::optional<double> plain_us;

    double bytes_per_s() const { return smx_us ? static_cast<double>(bytes) / (*smx_us * 1e-6) : 0.0; }
};

// Prints the table header and rows on standard output. GPU runs show TB/s, CPU runs GB/s. with_options adds
// the option's column and the time over the plain case's ("x plain").
class TablePrinter {
public:
    TablePrinter(bool gpu_units, bool with_graph, bool with_options = false)
        : gpu_units_(gpu_units), with_graph_(with_graph), with_options_(with_options) {}
    void print_header() const;
    void print_row(const CaseRecord& record, const RunInfo& run) const;

private:
    bool gpu_units_;
    bool with_graph_;
    bool with_options_;
};

// Writes {"tool": "smx-bench", run facts..., "records": [...]} to `path`; throws BenchError on I/O failure.
// Records of --options carry option, option_detail, plain_us and ratio_to_plain (smx_us / plain_us) too.
void write_json(const std::string& path, const RunInfo& run, const std::vector<CaseRecord>& records);

// "f32->bf16" style text of a dtype pair.
std::string dtype_pair_text(smxDataType_t x, smxDataType_t y);

}  // namespace smx_bench
