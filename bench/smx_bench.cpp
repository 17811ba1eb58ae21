// smx_bench.cpp - smx-bench: runs a grid of softmax problems on the best device present (or the one
// asked for), checks every result against a float64 reference, then times it and reports time,
// bandwidth and % of the device's copy bandwidth measured in the same run. Uses only smx's C API
// (plus the CUDA runtime for device memory and events when built with CUDA).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_check.hpp"
#include "bench_data.hpp"
#include "bench_device.hpp"
#include "bench_grid.hpp"
#include "bench_logprobs.hpp"
#include "bench_report.hpp"
#include "bench_stats.hpp"
#include "smx/smx.h"

namespace smx_bench {
namespace {

constexpr int exit_all_passed = 0;
constexpr int exit_case_failed = 1;
constexpr int exit_usage = 2;

const char* const usage_text = R"(usage: smx-bench [options]
  --device auto|cpu|cuda  where to run (auto: CUDA if smxCreate(CUDA, 0) succeeds, else the CPU)
  --group lastdim|layouts|decode|all   which part of the grid (default all)
  --ops softmax,log_softmax            (default both)
  --dtypes X:Y,...        dtype pairs, e.g. f32:f32,bf16:f32 (default: the group's pairs)
  --shapes S,...          grid labels (8192x50257, 32x1024x1024:dim=1, 8192x4096:transposed), bare shapes
                          (matching every layout of that shape), or new layouts in the same forms: AxB...
                          (softmax over the last dim), AxB...:dim=N, RxC:transposed
  --logprobs OPS          the log-probability cases instead of the softmax grid: all, or some of
                          logsumexp,log_softmax_gather,cross_entropy_forward,cross_entropy (--shapes RxC,...
                          picks shapes; --quick, --list, --plans, --json, --seed apply)
  --quick                 fewer repetitions
  --graph                 also time each case as a CUDA graph replay
  --json PATH             write every record as JSON
  --commit TEXT           the commit measured (default: $SMX_COMMIT, else "unknown")
  --seed N                random seed (default: from the clock; printed)
  --list                  print the selected cases and exit
  --plans                 print each selected case's plan (smxGetSoftmaxPlan) and exit: no data, no timing
Exit status: 0 all cases passed their check, 1 some case failed, 2 bad usage or no such device.
)";

struct Options {
    std::string device = "auto";
    GridFilter filter;
    std::string logprobs;  // --logprobs: "all" or the ops
    bool quick = false;
    bool graph = false;
    bool list_only = false;
    bool plans_only = false;
    std::string json_path;
    std::string commit;
    std::uint64_t seed = 0;
    bool seed_given = false;
};

Options parse_options(int argc, char** argv) {
    Options options;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        const auto value = [&]() -> std::string {
            if (i + 1 >= argc) throw std::invalid_argument(arg + " needs a value");
            return argv[++i];
        };
        if (arg == "--device") {
            options.device = value();
            if (options.device != "auto" && options.device != "cpu" && options.device != "cuda") {
                throw std::invalid_argument("unknown device '" + options.device + "' (expected auto, cpu or cuda)");
            }
        } else if (arg == "--group") {
            options.filter.groups = parse_groups(value());
        } else if (arg == "--ops") {
            options.filter.modes = parse_modes(value());
        } else if (arg == "--dtypes") {
            options.filter.dtype_pairs = parse_dtype_pairs(value());
        } else if (arg == "--shapes") {
            options.filter.shape_tokens = split_list(value());
        } else if (arg == "--logprobs") {
            options.logprobs = value();
        } else if (arg == "--quick") {
            options.quick = true;
        } else if (arg == "--graph") {
            options.graph = true;
        } else if (arg == "--list") {
            options.list_only = true;
        } else if (arg == "--plans") {
            options.plans_only = true;
        } else if (arg == "--json") {
            options.json_path = value();
        } else if (arg == "--commit") {
            options.commit = value();
        } else if (arg == "--seed") {
            const std::string text = value();
            if (text.empty() || text.size() > 19 || text.find_first_not_of("0123456789") != std::string::npos) {
                throw std::invalid_argument("--seed needs a non-negative integer below 10^19, not '" + text + "'");
            }
            options.seed = std::stoull(text);
            options.seed_given = true;
        } else if (arg == "--help" || arg == "-h") {
            std::fputs(usage_text, stdout);
            std::exit(exit_all_passed);
        } else {
            throw std::invalid_argument("unknown option '" + arg + "'");
        }
    }
    return options;
}

std::string utc_now_iso8601() {
    const std::time_t now = std::time(nullptr);
    std::tm utc{};
    gmtime_r(&now, &utc);
    char text[32];
    std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
    return text;
}

// The device the run measures, its smx handle, and why it was chosen.
struct Target {
    std::unique_ptr<BenchDevice> device;
    smxHandle_t handle = nullptr;
    std::string reason;
};

Target choose_target(const std::string& requested) {
    Target target;
    if (requested != "cpu") {
        smxHandle_t cuda_handle = nullptr;
        const smxStatus_t status = smxCreate(&cuda_handle, SMX_DEVICE_CUDA, 0);
        std::string refusal;
        if (status != SMX_STATUS_SUCCESS) {
            refusal = std::string("smxCreate(CUDA, 0) failed: ") + smxGetStatusString(status) + ": " +
                      smxGetLastErrorMessage();
        } else if (!cuda_device_support_built()) {
            smxDestroy(cuda_handle);
            refusal = "this smx-bench was built without the CUDA runtime";
        } else {
            target.device = make_cuda_device(0);
            target.handle = cuda_handle;
            target.reason = "smxCreate(CUDA, 0) succeeded";
            return target;
        }
        if (requested == "cuda") throw BenchError("--device cuda: " + refusal);
        target.reason = "auto: " + refusal;
    } else {
        target.reason = "asked for with --device cpu";
    }
    check_smx(smxCreate(&target.handle, SMX_DEVICE_CPU, 0), "smxCreate(CPU, 0)");
    target.device = make_cpu_device();
    return target;
}

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

// Owns the smx descriptors of one case, created on `handle` (smx failures throw BenchError).
struct CaseDescriptors {
    smxTensorDescriptor_t x = nullptr;
    smxTensorDescriptor_t y = nullptr;
    smxSoftmaxDescriptor_t softmax = nullptr;
    CaseDescriptors(smxHandle_t handle, const Layout& layout, DtypePair dtypes, smxSoftmaxMode_t mode) {
        const int ndim = static_cast<int>(layout.shape.size());
        try {
            check_smx(smxCreateTensorDescriptor(&x, dtypes.x, ndim, layout.shape.data(), layout.strides.data()),
                      "x tensor descriptor");
            check_smx(smxCreateTensorDescriptor(&y, dtypes.y, ndim, layout.shape.data(), layout.strides.data()),
                      "y tensor descriptor");
            check_smx(smxCreateSoftmaxDescriptor(handle, &softmax, mode, layout.axis, y, x),
                      "smxCreateSoftmaxDescriptor");
        } catch (...) {  // no destructor runs for a half-made object
            release();
            throw;
        }
    }
    ~CaseDescriptors() { release(); }
    void release() {
        smxDestroySoftmaxDescriptor(softmax);
        smxDestroyTensorDescriptor(y);
        smxDestroyTensorDescriptor(x);
    }
    CaseDescriptors(const CaseDescriptors&) = delete;
    CaseDescriptors& operator=(const CaseDescriptors&) = delete;
};

// `count` buffers of one tensor, each starting on a 256-byte boundary of one allocation.
class RotatingBuffers {
public:
    RotatingBuffers(BenchDevice& device, std::size_t tensor_bytes, int count)
        : slot_bytes_((tensor_bytes + 255) / 256 * 256), count_(count), memory_(device, slot_bytes_ * count) {}
    void* slot(int call) const { return static_cast<unsigned char*>(memory_.data()) + slot_bytes_ * (call % count_); }
    int count() const { return count_; }
    std::size_t slot_bytes() const { return slot_bytes_; }

private:
    std::size_t slot_bytes_;
    int count_;
    DeviceBuffer memory_;
};

// Fills every slot with fresh random data of `dtype`, generated on the host in chunks.
void fill_inputs(BenchDevice& device, const RotatingBuffers& inputs, const Layout& layout, smxDataType_t dtype,
                 std::uint64_t seed) {
    constexpr std::int64_t chunk_elements = std::int64_t{1} << 24;
    const std::int64_t span = layout.span();
    std::vector<unsigned char> chunk(std::min(span, chunk_elements) * dtype_size(dtype));
    std::int64_t generated = 0;  // elements over all slots, so each slot holds different data
    for (int slot = 0; slot < inputs.count(); ++slot) {
        auto* destination = static_cast<unsigned char*>(inputs.slot(slot));
        for (std::int64_t first = 0; first < span; first += chunk_elements) {
            const std::int64_t count = std::min(chunk_elements, span - first);
            fill_random(chunk.data(), dtype, count, seed, generated);
            device.copy_to_device(destination + first * dtype_size(dtype), chunk.data(), count * dtype_size(dtype));
            generated += count;
        }
    }
}

class BenchRun {
public:
    BenchRun(Target& target, const Options& options, RunInfo& run)
        : target_(target), device_(*target.device), options_(options), run_(run), rng_(options.seed),
          table_(device_.type() == SMX_DEVICE_CUDA, options.graph) {
        check_smx(smxCreate(&cpu_reference_handle_, SMX_DEVICE_CPU, 0), "smxCreate(CPU, 0) for the reference");
    }
    ~BenchRun() { smxDestroy(cpu_reference_handle_); }

    void run_grid(const std::vector<LayoutPlan>& grid) {
        total_cases_ = 0;
        for (const LayoutPlan& plan : grid) total_cases_ += static_cast<int>(plan.dtype_pairs.size() * plan.modes.size());
        table_.print_header();
        for (const LayoutPlan& plan : grid) {
            for (std::size_t first = 0; first < plan.dtype_pairs.size();) {
                std::size_t end = first;  // pairs [first, end) share the x dtype, hence the input buffers
                while (end < plan.dtype_pairs.size() && plan.dtype_pairs[end].x == plan.dtype_pairs[first].x) ++end;
                run_input_group(plan, first, end);
                first = end;
            }
        }
    }

    const std::vector<CaseRecord>& records() const { return records_; }
    smxHandle_t cpu_handle() const { return cpu_reference_handle_; }

private:
    int buffers_for(std::size_t tensor_bytes) const {
        const double needed = 4.0 * static_cast<double>(device_.cache_bytes()) / std::max<std::size_t>(tensor_bytes, 1);
        return std::max(1, static_cast<int>(std::ceil(needed)));
    }

    void run_input_group(const LayoutPlan& plan, std::size_t first, std::size_t end) {
        const Layout& layout = plan.layout;
        const smxDataType_t x_dtype = plan.dtype_pairs[first].x;
        const std::size_t x_bytes = layout.span() * dtype_size(x_dtype);
        const int buffers = buffers_for(x_bytes);
        std::string setup_error;
        std::unique_ptr<RotatingBuffers> inputs;
        try {
            inputs = std::make_unique<RotatingBuffers>(device_, x_bytes, buffers);
            fill_inputs(device_, *inputs, layout, x_dtype, rng_());
        } catch (const std::exception& error) {  // BenchError, or host memory running out
            setup_error = std::string("input setup: ") + error.what();
        }
        for (std::size_t p = first; p < end; ++p) {
            const DtypePair dtypes = plan.dtype_pairs[p];
            std::unique_ptr<RotatingBuffers> outputs;
            std::string output_error = setup_error;
            if (output_error.empty()) {
                try {
                    outputs = std::make_unique<RotatingBuffers>(device_, layout.span() * dtype_size(dtypes.y), buffers);
                } catch (const std::exception& error) {
                    output_error = std::string("output setup: ") + error.what();
                }
            }
            for (smxSoftmaxMode_t mode : plan.modes) {
                CaseRecord record = new_record(layout, dtypes, mode, buffers);
                report_progress(record);
                if (!output_error.empty()) {
                    record.error = output_error;
                } else {
                    try {
                        run_case(layout, dtypes, mode, *inputs, *outputs, record);
                    } catch (const std::exception& error) {  // one broken case must not end the run
                        record.error = error.what();
                        record.check_passed = false;
                    }
                }
                clear_progress();
                table_.print_row(record, run_);
                records_.push_back(std::move(record));
            }
        }
    }

    CaseRecord new_record(const Layout& layout, DtypePair dtypes, smxSoftmaxMode_t mode, int buffers) const {
        CaseRecord record;
        record.op = mode_name(mode);
        record.group = group_name(layout.group);
        record.label = layout.label;
        record.x_dtype = dtypes.x;
        record.y_dtype = dtypes.y;
        record.shape = layout.shape;
        record.strides = layout.strides;
        record.dim = layout.axis;
        record.bytes = layout.numel() * static_cast<std::int64_t>(dtype_size(dtypes.x) + dtype_size(dtypes.y));
        record.buffers = buffers;
        return record;
    }

    // One line per case on stderr; on a terminal it is transient and the table row replaces it.
    void report_progress(const CaseRecord& record) const {
        std::fprintf(stderr, "[%d/%d] %s %s %s%s", static_cast<int>(records_.size()) + 1, total_cases_,
                     record.op.c_str(), dtype_pair_text(record.x_dtype, record.y_dtype).c_str(), record.label.c_str(),
                     stderr_is_terminal_ ? "" : "\n");
        std::fflush(stderr);
    }

    void clear_progress() const {
        if (stderr_is_terminal_) std::fprintf(stderr, "\r\033[K");
    }

    void run_case(const Layout& layout, DtypePair dtypes, smxSoftmaxMode_t mode, const RotatingBuffers& inputs,
                  const RotatingBuffers& outputs, CaseRecord& record) {
        CaseDescriptors descriptors(target_.handle, layout, dtypes, mode);
        const char* plan_text = nullptr;
        check_smx(smxGetSoftmaxPlan(descriptors.softmax, &plan_text), "smxGetSoftmaxPlan");
        record.plan = plan_text;
        size_t workspace_bytes = 0;
        check_smx(smxGetSoftmaxWorkspaceSize(descriptors.softmax, &workspace_bytes), "smxGetSoftmaxWorkspaceSize");
        const DeviceBuffer workspace(device_, workspace_bytes);
        device_.poison(outputs.slot(0), outputs.slot_bytes() * outputs.count());

        const auto forward = [&](int call) {
            check_smx(smxSoftmaxForward(descriptors.softmax, workspace.data(), workspace_bytes, outputs.slot(call),
                                        inputs.slot(call), device_.stream()),
                      "smxSoftmaxForward");
        };

        // Correct first: one forward into poisoned memory, checked before anything is timed.
        forward(0);
        device_.synchronize();
        const CheckResult check = check_against_reference(device_, cpu_reference_handle_, layout, dtypes, mode,
                                                          inputs.slot(0), outputs.slot(0), rng_);
        record.check_passed = check.passed;
        record.rows_checked = check.rows_checked;
        record.check_sampled = check.sampled;
        if (std::isfinite(check.max_error_ratio)) record.max_err_ratio = check.max_error_ratio;
        if (!check.passed) {
            record.error = "check: " + check.detail;
            return;
        }

        const double expected_us = static_cast<double>(record.bytes) / run_.copy_bytes_per_s * 1e6;
        const Repetitions repetitions = repetitions_for(device_, options_.quick, expected_us);
        // Calls rotate through the buffers starting after slot 0, whose output was just checked.
        const auto rotated = [&](int call) { forward(1 + call); };
        for (int call = 0; call < repetitions.warmup; ++call) rotated(call);
        device_.synchronize();
        const TimingSummary summary = summarize(device_.time_each(
            [&](int call) { rotated(repetitions.warmup + call); }, repetitions.calls));
        record.calls = repetitions.calls;
        record.smx_us = summary.median_us;
        record.smx_min_us = summary.min_us;
        record.smx_p90_us = summary.p90_us;
        if (options_.graph) {
            constexpr int max_captured = 4096;  // enough forwards to rotate through 4x the L2 on decode shapes
            record.graph_us =
                device_.time_graph(forward, std::min(inputs.count(), max_captured), repetitions.graph_replays);
        }
    }

    Target& target_;
    BenchDevice& device_;
    const Options& options_;
    RunInfo& run_;
    std::mt19937_64 rng_;
    TablePrinter table_;
    smxHandle_t cpu_reference_handle_ = nullptr;
    std::vector<CaseRecord> records_;
    int total_cases_ = 0;
    const bool stderr_is_terminal_ = isatty(STDERR_FILENO) != 0;
};

// The plan smx makes for one case (descriptors only: nothing is allocated or launched).
std::string plan_of(smxHandle_t handle, const Layout& layout, DtypePair dtypes, smxSoftmaxMode_t mode) {
    CaseDescriptors descriptors(handle, layout, dtypes, mode);
    const char* plan_text = nullptr;
    check_smx(smxGetSoftmaxPlan(descriptors.softmax, &plan_text), "smxGetSoftmaxPlan");
    return plan_text;
}

int run_main(int argc, char** argv) {
    Options options = parse_options(argc, argv);
    if (!options.seed_given) {
        options.seed = static_cast<std::uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
    }
    if (options.commit.empty()) {
        const char* from_environment = std::getenv("SMX_COMMIT");
        options.commit = from_environment != nullptr && *from_environment != '\0' ? from_environment : "unknown";
    }

    Target target = choose_target(options.device);
    const bool on_gpu = target.device->type() == SMX_DEVICE_CUDA;
    const bool logprobs = !options.logprobs.empty();
    const std::vector<LogprobsCase> logprobs_grid =
        logprobs ? logprobs_cases(options.logprobs == "all" ? std::vector<std::string>{} : split_list(options.logprobs),
                                  options.filter.shape_tokens)
                 : std::vector<LogprobsCase>{};
    const std::vector<LayoutPlan> grid = logprobs ? std::vector<LayoutPlan>{} : build_grid(target.device->type(), options.filter);
    if (options.list_only) {
        for (const LogprobsCase& c : logprobs_grid) {
            std::printf("%-8s %-22s %-5s %s\n", c.group.c_str(), c.op.c_str(), dtype_name(c.dtype), c.label().c_str());
        }
        for (const LayoutPlan& plan : grid) {
            for (const DtypePair& pair : plan.dtype_pairs) {
                for (smxSoftmaxMode_t mode : plan.modes) {
                    std::printf("%-8s %-11s %-10s %s\n", group_name(plan.layout.group), mode_name(mode),
                                dtype_pair_text(pair.x, pair.y).c_str(), plan.layout.label.c_str());
                }
            }
        }
        smxDestroy(target.handle);
        return exit_all_passed;
    }

    if (options.plans_only) {
        // One tab-separated line per case, in the JSON records' terms, so plans can be compared with them.
        std::printf("op\tx_dtype\ty_dtype\tlabel\tplan\n");
        for (const LogprobsCase& c : logprobs_grid) {
            std::printf("%s\t%s\t-\t%s\t%s\n", c.op.c_str(), dtype_name(c.dtype), c.label().c_str(),
                        logprobs_plan(target.handle, c).c_str());
        }
        for (const LayoutPlan& plan : grid) {
            for (const DtypePair& pair : plan.dtype_pairs) {
                for (smxSoftmaxMode_t mode : plan.modes) {
                    std::printf("%s\t%s\t%s\t%s\t%s\n", mode_name(mode), dtype_name(pair.x), dtype_name(pair.y),
                                plan.layout.label.c_str(), plan_of(target.handle, plan.layout, pair, mode).c_str());
                }
            }
        }
        smxDestroy(target.handle);
        return exit_all_passed;
    }

    RunInfo run;
    run.device_type = on_gpu ? "cuda" : "cpu";
    run.device_name = target.device->name();
    run.commit = options.commit;
    run.date = utc_now_iso8601();
    run.seed = options.seed;
    run.copy_bytes_per_s = target.device->copy_bandwidth(on_gpu ? 20 : 5, &run.copy_method);
    run.launch_floor_us = target.device->smallest_operation_us(200);

    const int version = smxGetVersion();  // MAJOR * 10000 + MINOR * 100 + PATCH
    std::printf("smx-bench: smx %d.%d.%d, commit %s, %s\n", version / 10000, version / 100 % 100, version % 100,
                run.commit.c_str(), run.date.c_str());
    std::printf("device: %s %s (%s)\n", run.device_type.c_str(), run.device_name.c_str(), target.reason.c_str());
    std::printf("last-level cache %.1f MiB: inputs rotate through >= %.0f MiB; seed %llu\n",
                target.device->cache_bytes() / 1048576.0, 4.0 * target.device->cache_bytes() / 1048576.0,
                static_cast<unsigned long long>(run.seed));
    std::printf("copy bandwidth: %.3f %s (%s, bytes read + written, median)\n",
                run.copy_bytes_per_s / (on_gpu ? 1e12 : 1e9), on_gpu ? "TB/s" : "GB/s", run.copy_method.c_str());
    if (run.launch_floor_us) {
        std::printf("launch floor: %.1f us (a 4-byte memset timed like a case: no one-launch case can be faster)\n",
                    *run.launch_floor_us);
    }
    std::printf("time: median per call; bytes = numel * (sizeof x + sizeof y)\n\n");

    int failed = 0;
    {
        BenchRun bench(target, options, run);
        std::vector<CaseRecord> logprobs_records;
        if (logprobs) {
            std::printf("log-probabilities: bytes = x read once (logsumexp, gather, cross_entropy_forward), logits read "
                        "once + dlogits written once (cross_entropy)\n");
            std::mt19937_64 rng(options.seed);
            logprobs_records = run_logprobs_cases(*target.device, target.handle, bench.cpu_handle(), logprobs_grid, run,
                                                  options.quick, rng);
        } else {
            bench.run_grid(grid);
        }
        const std::vector<CaseRecord>& records = logprobs ? logprobs_records : bench.records();
        for (const CaseRecord& record : records) failed += record.check_passed ? 0 : 1;
        std::printf("\n%zu cases, %d failed\n", records.size(), failed);
        if (!options.json_path.empty()) {
            write_json(options.json_path, run, records);
            std::printf("wrote %s\n", options.json_path.c_str());
        }
    }
    smxDestroy(target.handle);
    return failed == 0 ? exit_all_passed : exit_case_failed;
}

}  // namespace
}  // namespace smx_bench

int main(int argc, char** argv) {
    try {
        return smx_bench::run_main(argc, argv);
    } catch (const std::logic_error& error) {  // invalid_argument, or out_of_range from a number
        std::fprintf(stderr, "smx-bench: %s\n\n%s", error.what(), smx_bench::usage_text);
        return smx_bench::exit_usage;
    } catch (const smx_bench::BenchError& error) {
        std::fprintf(stderr, "smx-bench: %s\n", error.what());
        return smx_bench::exit_usage;
    }
}
