// smx_bench.cpp - smx-bench: runs a grid of softmax problems (forward, or with --pass backward the softmax and
// log-softmax gradients on the same shapes) on the best device present (or the one asked for), checks every
// result against a float64 reference, then times it and reports time, bandwidth and % of the device's copy
// bandwidth measured in the same run. Uses only smx's C API (plus the CUDA runtime for device memory and
// events when built with CUDA).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <ctime>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_case.hpp"
#include "bench_check.hpp"
#include "bench_data.hpp"
#include "bench_device.hpp"
#include "bench_grid.hpp"
#include "bench_logprobs.hpp"
#include "bench_options.hpp"
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
  --pass forward|backward  forward: y from x; backward: dx from dy and y (the gradients of the same ops; a
                          pair X:Y is the forward's, so dy and y are Y and dx is X). Default forward
  --dtypes X:Y,...        dtype pairs, e.g. f32:f32,bf16:f32 (default: the group's pairs)
  --shapes S,...          grid labels (8192x50257, 32x1024x1024:dim=1, 8192x4096:transposed), bare shapes
                          (matching every layout of that shape), or new layouts in the same forms: AxB...
                          (softmax over the last dim), AxB...:dim=N, RxC:transposed
  --logprobs OPS          the log-probability cases instead of the softmax grid: all, or some of
                          logsumexp,log_softmax_gather,cross_entropy_forward,cross_entropy (--shapes RxC,...
                          picks shapes; --quick, --list, --plans, --json, --seed apply)
  --options LIST          the softmax options cases on the softmax grid's layouts, each beside plain softmax
                          on the same layout, pair and op: all, or some of scale,scale_per_row,causal,
                          additive_mask,bool_mask,masked_rows_zero,batch_invariant (--group, --ops, --dtypes,
                          --shapes filter as for the grid; default pairs f32:f32,bf16:bf16,bf16:f32, on the
                          CPU f32:f32,bf16:f32)
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
    bool backward = false;
    std::string logprobs;  // --logprobs: "all" or the ops
    std::string options;   // --options: "all" or the option cases
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
        } else if (arg == "--pass") {
            const std::string pass = value();
            if (pass != "forward" && pass != "backward") {
                throw std::invalid_argument("unknown pass '" + pass + "' (expected forward or backward)");
            }
            options.backward = pass == "backward";
        } else if (arg == "--logprobs") {
            options.logprobs = value();
        } else if (arg == "--options") {
            options.options = value();
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
    if (options.backward && !options.logprobs.empty()) {
        // The log-probability cases have no softmax pass: cross_entropy already times the forward with dlogits.
        throw std::invalid_argument("--pass backward applies to the softmax grid, not to --logprobs");
    }
    if (!options.options.empty() && (options.backward || !options.logprobs.empty())) {
        throw std::invalid_argument("--options measures the forward alone: not with --pass backward or --logprobs");
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

// The descriptors of one backward case: dy and y in the forward pair's y dtype, dx in its x dtype, all laid
// out as the layout says.
struct BackwardDescriptors {
    smxTensorDescriptor_t dy = nullptr;
    smxTensorDescriptor_t y = nullptr;
    smxTensorDescriptor_t dx = nullptr;
    smxSoftmaxBackwardDescriptor_t backward = nullptr;
    BackwardDescriptors(smxHandle_t handle, const Layout& layout, DtypePair dtypes, smxSoftmaxMode_t mode) {
        const int ndim = static_cast<int>(layout.shape.size());
        try {
            check_smx(smxCreateTensorDescriptor(&dy, dtypes.y, ndim, layout.shape.data(), layout.strides.data()),
                      "dy tensor descriptor");
            check_smx(smxCreateTensorDescriptor(&y, dtypes.y, ndim, layout.shape.data(), layout.strides.data()),
                      "y tensor descriptor");
            check_smx(smxCreateTensorDescriptor(&dx, dtypes.x, ndim, layout.shape.data(), layout.strides.data()),
                      "dx tensor descriptor");
            check_smx(smxCreateSoftmaxBackwardDescriptor(handle, &backward, mode, layout.axis, dx, dy, y),
                      "smxCreateSoftmaxBackwardDescriptor");
        } catch (...) {  // no destructor runs for a half-made object
            release();
            throw;
        }
    }
    ~BackwardDescriptors() { release(); }
    void release() {
        smxDestroySoftmaxBackwardDescriptor(backward);
        smxDestroyTensorDescriptor(dx);
        smxDestroyTensorDescriptor(y);
        smxDestroyTensorDescriptor(dy);
    }
    BackwardDescriptors(const BackwardDescriptors&) = delete;
    BackwardDescriptors& operator=(const BackwardDescriptors&) = delete;
};

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
            if (options_.backward) {
                run_backward_plan(plan);
                continue;
            }
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
    void run_input_group(const LayoutPlan& plan, std::size_t first, std::size_t end) {
        const Layout& layout = plan.layout;
        const smxDataType_t x_dtype = plan.dtype_pairs[first].x;
        const std::size_t x_bytes = layout.span() * dtype_size(x_dtype);
        const int buffers = buffers_for(device_, x_bytes);
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

    // Backward cases: each gets its own buffers (dy random, y the forward's output for fresh x, dx poisoned).
    void run_backward_plan(const LayoutPlan& plan) {
        const Layout& layout = plan.layout;
        for (const DtypePair& dtypes : plan.dtype_pairs) {
            for (smxSoftmaxMode_t mode : plan.modes) {
                const std::size_t value_bytes = layout.span() * dtype_size(dtypes.y);
                const int buffers = buffers_for(device_, 2 * value_bytes);
                CaseRecord record = new_record(layout, dtypes, mode, buffers);
                record.op += "_backward";
                // dy and y read, dx written.
                record.bytes = layout.numel() * static_cast<std::int64_t>(2 * dtype_size(dtypes.y) + dtype_size(dtypes.x));
                report_progress(record);
                try {
                    run_backward_case(layout, dtypes, mode, buffers, record);
                } catch (const std::exception& error) {  // BenchError, or memory running out
                    record.error = error.what();
                    record.check_passed = false;
                }
                clear_progress();
                table_.print_row(record, run_);
                records_.push_back(std::move(record));
            }
        }
    }

    // Fills every slot of `y` with the forward's output (smx's, on this device) for fresh random x: the y a
    // backward is given in practice (random y would make gradients that overflow 16-bit dx).
    void fill_forward_outputs(const Layout& layout, DtypePair dtypes, smxSoftmaxMode_t mode, const RotatingBuffers& y) {
        RotatingBuffers x(device_, layout.span() * dtype_size(dtypes.x), 1);
        CaseDescriptors forward(target_.handle, layout, dtypes, mode);
        size_t workspace_bytes = 0;
        check_smx(smxGetSoftmaxWorkspaceSize(forward.softmax, &workspace_bytes), "smxGetSoftmaxWorkspaceSize");
        const DeviceBuffer workspace(device_, workspace_bytes);
        for (int slot = 0; slot < y.count(); ++slot) {
            fill_inputs(device_, x, layout, dtypes.x, rng_());
            check_smx(smxSoftmaxForward(forward.softmax, workspace.data(), workspace_bytes, y.slot(slot), x.slot(0),
                                        device_.stream()),
                      "smxSoftmaxForward (making y)");
            device_.synchronize();
        }
    }

    void run_backward_case(const Layout& layout, DtypePair dtypes, smxSoftmaxMode_t mode, int buffers, CaseRecord& record) {
        const std::size_t value_bytes = layout.span() * dtype_size(dtypes.y);
        const RotatingBuffers dy(device_, value_bytes, buffers);
        const RotatingBuffers y(device_, value_bytes, buffers);
        const RotatingBuffers dx(device_, layout.span() * dtype_size(dtypes.x), buffers);
        fill_inputs(device_, dy, layout, dtypes.y, rng_());
        fill_forward_outputs(layout, dtypes, mode, y);

        BackwardDescriptors descriptors(target_.handle, layout, dtypes, mode);
        const char* plan_text = nullptr;
        check_smx(smxGetSoftmaxBackwardPlan(descriptors.backward, &plan_text), "smxGetSoftmaxBackwardPlan");
        record.plan = plan_text;
        size_t workspace_bytes = 0;
        check_smx(smxGetSoftmaxBackwardWorkspaceSize(descriptors.backward, &workspace_bytes),
                  "smxGetSoftmaxBackwardWorkspaceSize");
        const DeviceBuffer workspace(device_, workspace_bytes);
        device_.poison(dx.slot(0), dx.slot_bytes() * dx.count());

        const auto backward = [&](int call) {
            check_smx(smxSoftmaxBackward(descriptors.backward, workspace.data(), workspace_bytes, dx.slot(call),
                                         dy.slot(call), y.slot(call), device_.stream()),
                      "smxSoftmaxBackward");
        };
        backward(0);
        device_.synchronize();
        const CheckResult check = check_backward_against_reference(device_, layout, dtypes, mode, dy.slot(0), y.slot(0),
                                                                   dx.slot(0), rng_);
        if (!record_check(check, record)) return;
        time_calls(device_, backward, dy.count(), timing(), run_, record);
    }

    TimingChoice timing() const { return {options_.quick, options_.graph}; }

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
        if (!record_check(check, record)) return;
        time_calls(device_, forward, inputs.count(), timing(), run_, record);
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
std::string plan_of(smxHandle_t handle, const Layout& layout, DtypePair dtypes, smxSoftmaxMode_t mode, bool backward) {
    if (backward) {
        BackwardDescriptors descriptors(handle, layout, dtypes, mode);
        const char* plan_text = nullptr;
        check_smx(smxGetSoftmaxBackwardPlan(descriptors.backward, &plan_text), "smxGetSoftmaxBackwardPlan");
        return plan_text;
    }
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
    const bool with_options = !options.options.empty();
    const std::vector<OptionCase> option_cases =
        with_options ? parse_option_cases(options.options) : std::vector<OptionCase>{};
    GridFilter filter = options.filter;
    if (with_options && filter.dtype_pairs.empty()) filter.dtype_pairs = default_option_pairs(target.device->type());
    const std::vector<LayoutPlan> grid = logprobs ? std::vector<LayoutPlan>{} : build_grid(target.device->type(), filter);
    if (options.list_only) {
        for (const LogprobsCase& c : logprobs_grid) {
            std::printf("%-8s %-22s %-5s %s\n", c.group.c_str(), c.op.c_str(), dtype_name(c.dtype), c.label().c_str());
        }
        for (const LayoutPlan& plan : grid) {
            for (const DtypePair& pair : plan.dtype_pairs) {
                for (smxSoftmaxMode_t mode : plan.modes) {
                    if (with_options) {
                        for (OptionCase option : option_cases) {
                            if (!option_applies(option, plan.layout)) continue;
                            std::printf("%-8s %-11s %-16s %-10s %s\n", group_name(plan.layout.group), mode_name(mode),
                                        option_name(option), dtype_pair_text(pair.x, pair.y).c_str(),
                                        plan.layout.label.c_str());
                        }
                        continue;
                    }
                    std::printf("%-8s %-11s%s %-10s %s\n", group_name(plan.layout.group), mode_name(mode),
                                options.backward ? "_backward" : "", dtype_pair_text(pair.x, pair.y).c_str(),
                                plan.layout.label.c_str());
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
                    if (with_options) {  // the option joins the op ("softmax+causal"), so the columns stay
                        for (OptionCase option : option_cases) {
                            if (!option_applies(option, plan.layout)) continue;
                            std::printf("%s+%s\t%s\t%s\t%s\t%s\n", mode_name(mode), option_name(option),
                                        dtype_name(pair.x), dtype_name(pair.y), plan.layout.label.c_str(),
                                        option_plan(target.handle, plan.layout, pair, mode, option).c_str());
                        }
                        continue;
                    }
                    std::printf("%s%s\t%s\t%s\t%s\t%s\n", mode_name(mode), options.backward ? "_backward" : "",
                                dtype_name(pair.x), dtype_name(pair.y), plan.layout.label.c_str(),
                                plan_of(target.handle, plan.layout, pair, mode, options.backward).c_str());
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
    std::printf(options.backward ? "time: median per call; bytes = numel * (2 sizeof y + sizeof x): dy and y read, dx "
                                   "written (x->y is the forward's pair)\n\n"
                : with_options ? "time: median per call; bytes = numel * (sizeof x + sizeof y) + the mask's and the "
                                 "per-row scale's own bytes (causal: the unread elements counted as read); x plain = "
                                 "time / plain's time on the same layout, pair and op\n\n"
                               : "time: median per call; bytes = numel * (sizeof x + sizeof y)\n\n");

    int failed = 0;
    {
        BenchRun bench(target, options, run);
        std::vector<CaseRecord> mode_records;  // --options' or --logprobs' (the grid's are the BenchRun's)
        if (with_options) {
            std::mt19937_64 rng(options.seed);
            mode_records = run_option_cases(*target.device, target.handle, bench.cpu_handle(), grid, option_cases,
                                                run, {options.quick, options.graph}, rng);
        } else if (logprobs) {
            std::printf("log-probabilities: bytes = x read once (logsumexp, gather, cross_entropy_forward), logits read "
                        "once + dlogits written once (cross_entropy)\n");
            std::mt19937_64 rng(options.seed);
            mode_records = run_logprobs_cases(*target.device, target.handle, bench.cpu_handle(), logprobs_grid, run,
                                                  options.quick, rng);
        } else {
            bench.run_grid(grid);
        }
        const std::vector<CaseRecord>& records = logprobs || with_options ? mode_records : bench.records();
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
