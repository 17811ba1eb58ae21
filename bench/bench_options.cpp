// bench_options.cpp - smx-bench's softmax options cases (bench_options.hpp).
#include "bench_options.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <stdexcept>

#include "bench_check.hpp"
#include "bench_data.hpp"

namespace smx_bench {
namespace {

constexpr double kScale = 1.25;               // temperature 0.8; exact in every compute type
constexpr float kLowestRowScale = 0.5f;       // per-row scales are drawn in [0.5, 2)
constexpr float kHighestRowScale = 2.0f;
constexpr std::int64_t kMinusInfPeriod = 16;  // additive mask: one element in 16 is -inf
constexpr int kExcludedOneIn = 8;             // bool mask: about one element in 8 excluded

struct OptionName {
    OptionCase option;
    const char* name;
};

const OptionName kOptionNames[] = {
    {OptionCase::Plain, "plain"},
    {OptionCase::Scale, "scale"},
    {OptionCase::ScalePerRow, "scale_per_row"},
    {OptionCase::Causal, "causal"},
    {OptionCase::AdditiveMask, "additive_mask"},
    {OptionCase::BoolMask, "bool_mask"},
    {OptionCase::MaskedRowsZero, "masked_rows_zero"},
    {OptionCase::BatchInvariant, "batch_invariant"},
};

int axis_index(const Layout& layout) {
    const int ndim = static_cast<int>(layout.shape.size());
    return layout.axis < 0 ? layout.axis + ndim : layout.axis;
}

std::int64_t row_len(const Layout& layout) { return layout.shape[axis_index(layout)]; }

std::int64_t row_count(const Layout& layout) { return row_len(layout) > 0 ? layout.numel() / row_len(layout) : 0; }

// x's shape with the axis of size 1: the per-row scale's shape (element r is row r's factor).
std::vector<std::int64_t> per_row_shape(const Layout& layout) {
    std::vector<std::int64_t> shape = layout.shape;
    shape[axis_index(layout)] = 1;
    return shape;
}

// x's shape with every dim but the axis of size 1: a mask along the axis, broadcast over every row.
std::vector<std::int64_t> along_axis_shape(const Layout& layout) {
    std::vector<std::int64_t> shape(layout.shape.size(), 1);
    shape[axis_index(layout)] = row_len(layout);
    return shape;
}

// Where the causal case puts its window: x viewed with (queries, keys) as its last two dims.
struct CausalView {
    Layout layout;               // the view the descriptor sees (the same memory as the layout)
    std::int64_t queries = 1;    // the second-to-last dim: row r's query index is r % queries
    std::int64_t offset = 0;     // element j of query i is kept when j <= i + offset
    double kept_fraction = 1.0;  // the share of elements inside the window
};

CausalView causal_view(const Layout& layout) {
    CausalView causal;
    causal.layout = layout;
    const std::int64_t keys = row_len(layout);
    if (layout.shape.size() == 2) {
        const std::int64_t rows = layout.shape[0];
        const bool decode = layout.group == Group::Decode;
        const bool square_blocks = keys > 0 && rows % keys == 0;
        // Decode: one query per row at the end of its keys. Else square (keys, keys) blocks where they tile the
        // rows; otherwise one block of every row, its window aligned to the bottom right where keys exceed rows
        // (queries at the end of a longer context, as in chunked prefill: offset keys - queries).
        causal.queries = decode ? 1 : (square_blocks ? keys : rows);
        causal.offset = decode ? keys - 1 : (square_blocks ? 0 : std::max<std::int64_t>(0, keys - rows));
        const std::int64_t batch = causal.queries > 0 ? rows / causal.queries : 0;
        causal.layout.shape = {batch, causal.queries, keys};
        causal.layout.strides = {causal.queries * layout.strides[0], layout.strides[0], layout.strides[1]};
        causal.layout.axis = -1;
    } else {
        causal.queries = layout.shape[layout.shape.size() - 2];
    }
    double kept = 0.0;
    for (std::int64_t i = 0; i < causal.queries; ++i) {
        kept += static_cast<double>(std::clamp<std::int64_t>(i + causal.offset + 1, 0, keys));
    }
    causal.kept_fraction = causal.queries * keys > 0 ? kept / static_cast<double>(causal.queries * keys) : 1.0;
    return causal;
}

std::string dims_text(const std::vector<std::int64_t>& dims) {
    std::string text = "[";
    for (std::size_t d = 0; d < dims.size(); ++d) text += (d ? "," : "") + std::to_string(dims[d]);
    return text + "]";
}

// An smxSoftmaxOptions_t, destroyed at the end of the scope, with one setter per option.
class OptionsObject {
public:
    OptionsObject() { check_smx(smxCreateSoftmaxOptions(&options_), "smxCreateSoftmaxOptions"); }
    ~OptionsObject() { smxDestroySoftmaxOptions(options_); }
    OptionsObject(const OptionsObject&) = delete;
    OptionsObject& operator=(const OptionsObject&) = delete;

    smxSoftmaxOptions_t get() const { return options_; }

    void scale(double value) { check_smx(smxSetSoftmaxScale(options_, value), "smxSetSoftmaxScale"); }
    void scale_per_row(const std::vector<std::int64_t>& shape) {
        set_tensor(smxSetSoftmaxScaleTensor, "smxSetSoftmaxScaleTensor", SMX_DTYPE_F32, shape, {});
    }
    // Strides empty: row-major.
    void mask(smxDataType_t dtype, const std::vector<std::int64_t>& shape, const std::vector<std::int64_t>& strides) {
        set_tensor(smxSetSoftmaxMask, "smxSetSoftmaxMask", dtype, shape, strides);
    }
    void causal(std::int64_t offset) { check_smx(smxSetSoftmaxCausal(options_, 1, offset), "smxSetSoftmaxCausal"); }
    void masked_rows_zero() {
        check_smx(smxSetSoftmaxMaskedRows(options_, SMX_MASKED_ROWS_ZERO), "smxSetSoftmaxMaskedRows");
    }
    void batch_invariant() { check_smx(smxSetSoftmaxBatchInvariant(options_, 1), "smxSetSoftmaxBatchInvariant"); }

private:
    // The options object copies the tensor descriptor, so it is destroyed right after the setter.
    template <class Setter>
    void set_tensor(Setter setter, const char* what, smxDataType_t dtype, const std::vector<std::int64_t>& shape,
                    const std::vector<std::int64_t>& strides) {
        smxTensorDescriptor_t tensor = nullptr;
        check_smx(smxCreateTensorDescriptor(&tensor, dtype, static_cast<int>(shape.size()), shape.data(),
                                            strides.empty() ? nullptr : strides.data()),
                  std::string(what) + " tensor descriptor");
        const smxStatus_t status = setter(options_, tensor);
        smxDestroyTensorDescriptor(tensor);
        check_smx(status, what);
    }

    smxSoftmaxOptions_t options_ = nullptr;
};

// A softmax descriptor created with options, with its x and y tensor descriptors (y laid out as x).
class OptionDescriptor {
public:
    OptionDescriptor(smxHandle_t handle, const Layout& layout, DtypePair dtypes, smxSoftmaxMode_t mode,
                     smxSoftmaxOptions_t options) {
        const int ndim = static_cast<int>(layout.shape.size());
        try {
            check_smx(smxCreateTensorDescriptor(&x_, dtypes.x, ndim, layout.shape.data(), layout.strides.data()),
                      "x tensor descriptor");
            check_smx(smxCreateTensorDescriptor(&y_, dtypes.y, ndim, layout.shape.data(), layout.strides.data()),
                      "y tensor descriptor");
            check_smx(smxCreateSoftmaxDescriptorWithOptions(handle, &softmax_, mode, layout.axis, y_, x_, options),
                      "smxCreateSoftmaxDescriptorWithOptions");
            check_smx(smxGetSoftmaxPlan(softmax_, &plan_), "smxGetSoftmaxPlan");
            check_smx(smxGetSoftmaxWorkspaceSize(softmax_, &workspace_bytes_), "smxGetSoftmaxWorkspaceSize");
        } catch (...) {  // no destructor runs for a half-made object
            release();
            throw;
        }
    }
    ~OptionDescriptor() { release(); }
    OptionDescriptor(const OptionDescriptor&) = delete;
    OptionDescriptor& operator=(const OptionDescriptor&) = delete;

    const char* plan() const { return plan_; }
    std::size_t workspace_bytes() const { return workspace_bytes_; }

    void run(void* workspace, void* y, const void* x, const void* scale, const void* mask, void* stream) const {
        check_smx(smxSoftmaxForwardWithOptions(softmax_, workspace, workspace_bytes_, y, x, scale, mask, stream),
                  "smxSoftmaxForwardWithOptions");
    }

private:
    void release() {
        smxDestroySoftmaxDescriptor(softmax_);
        smxDestroyTensorDescriptor(y_);
        smxDestroyTensorDescriptor(x_);
        softmax_ = nullptr;
        y_ = x_ = nullptr;
    }

    smxTensorDescriptor_t x_ = nullptr;
    smxTensorDescriptor_t y_ = nullptr;
    smxSoftmaxDescriptor_t softmax_ = nullptr;
    const char* plan_ = nullptr;
    std::size_t workspace_bytes_ = 0;
};

// What one case runs on: the layout the descriptor sees, what the option is set to, and the case's bytes.
struct CaseSpec {
    Layout layout;
    CausalView causal;   // the causal case's window (unused by the others)
    std::string detail;  // the record's option_detail
    std::int64_t bytes = 0;
};

CaseSpec describe_case(OptionCase option, const Layout& layout, DtypePair dtypes) {
    CaseSpec spec;
    spec.layout = layout;
    spec.bytes = layout.numel() * static_cast<std::int64_t>(dtype_size(dtypes.x) + dtype_size(dtypes.y));
    char text[200];
    switch (option) {
        case OptionCase::Plain: spec.detail = "no options"; break;
        case OptionCase::Scale: std::snprintf(text, sizeof text, "scale %g for every row", kScale); spec.detail = text; break;
        case OptionCase::ScalePerRow:
            spec.bytes += row_count(layout) * static_cast<std::int64_t>(sizeof(float));
            spec.detail = "f32 scale per row in [0.5, 2), shape " + dims_text(per_row_shape(layout));
            break;
        case OptionCase::Causal:
            spec.causal = causal_view(layout);
            spec.layout = spec.causal.layout;
            std::snprintf(text, sizeof text, "offset %lld on view %s, %.1f%% of elements kept",
                          static_cast<long long>(spec.causal.offset), dims_text(spec.layout.shape).c_str(),
                          100.0 * spec.causal.kept_fraction);
            spec.detail = text;
            break;
        case OptionCase::AdditiveMask:
            spec.bytes += layout.numel() * static_cast<std::int64_t>(dtype_size(dtypes.x));
            spec.detail = std::string(dtype_name(dtypes.x)) + " additive mask of x's shape and strides, 1 in " +
                          std::to_string(kMinusInfPeriod) + " elements -inf";
            break;
        case OptionCase::BoolMask:
            spec.bytes += row_len(layout);
            spec.detail = "bool keep-mask " + dims_text(along_axis_shape(layout)) + " broadcast over rows, ~1 in " +
                          std::to_string(kExcludedOneIn) + " excluded";
            break;
        case OptionCase::MaskedRowsZero:
            spec.detail = "SMX_MASKED_ROWS_ZERO; the checked call's row 0 all -inf, the timed calls' rows as plain's";
            break;
        case OptionCase::BatchInvariant: spec.detail = "batch invariant"; break;
    }
    return spec;
}

// Sets the case's options for x laid out as spec.layout.
void set_device_options(OptionsObject& options, OptionCase option, const CaseSpec& spec, smxDataType_t x_dtype) {
    switch (option) {
        case OptionCase::Plain: break;
        case OptionCase::Scale: options.scale(kScale); break;
        case OptionCase::ScalePerRow: options.scale_per_row(per_row_shape(spec.layout)); break;
        case OptionCase::Causal: options.causal(spec.causal.offset); break;
        case OptionCase::AdditiveMask: options.mask(x_dtype, spec.layout.shape, spec.layout.strides); break;
        case OptionCase::BoolMask: options.mask(SMX_DTYPE_BOOL, along_axis_shape(spec.layout), {}); break;
        case OptionCase::MaskedRowsZero: options.masked_rows_zero(); break;
        case OptionCase::BatchInvariant: options.batch_invariant(); break;
    }
}

// The option operands of one (layout, x dtype): filled once, shared by its dtype pairs, ops and cases. Only
// those the selected cases read are made.
struct OptionInputs {
    std::unique_ptr<RotatingBuffers> x;
    std::unique_ptr<RotatingBuffers> additive_mask;  // x's layout and dtype, as many slots as x
    std::vector<float> row_scales;                   // one per row, on the host for the reference
    DeviceBuffer row_scale;
    std::vector<unsigned char> keep;                 // one per element along the axis (1 keeps)
    DeviceBuffer bool_mask;
};

// Writes `values` (row_len elements of `dtype`, densely) into row 0 of a tensor laid out as `layout` (the row
// that starts at element 0) and returns the bytes that were there, densely.
std::vector<unsigned char> replace_first_row(BenchDevice& device, void* data, const Layout& layout, smxDataType_t dtype,
                                             const std::vector<unsigned char>& values) {
    const std::size_t element_bytes = dtype_size(dtype);
    const std::int64_t stride_bytes = layout.strides[axis_index(layout)] * static_cast<std::int64_t>(element_bytes);
    auto* row = static_cast<unsigned char*>(data);
    std::vector<unsigned char> previous(values.size());
    device.gather_to_host(previous.data(), row, element_bytes, stride_bytes, row_len(layout));
    if (stride_bytes == static_cast<std::int64_t>(element_bytes)) {
        device.copy_to_device(row, values.data(), values.size());
    } else {
        for (std::int64_t k = 0; k < row_len(layout); ++k) {
            device.copy_to_device(row + k * stride_bytes, values.data() + k * element_bytes, element_bytes);
        }
    }
    return previous;
}

bool selected(const std::vector<OptionCase>& options, OptionCase option) {
    return std::find(options.begin(), options.end(), option) != options.end();
}

// y's float64 reference for a batch of checked rows: the CPU backend with the case's options on the dense rows
// (the causal window as the keep-mask it stands for, the full mask as the rows read back as float64).
std::vector<double> reference_rows(smxHandle_t cpu_handle, OptionCase option, smxSoftmaxMode_t mode,
                                   const CaseSpec& spec, const OptionInputs& inputs, const CheckedRows& batch) {
    const std::int64_t rows = static_cast<std::int64_t>(batch.rows.size());
    const std::int64_t n = batch.row_len;
    OptionsObject options;
    std::vector<float> scales;
    std::vector<unsigned char> window;
    const void* scale = nullptr;
    const void* mask = nullptr;
    switch (option) {
        case OptionCase::Plain:
        case OptionCase::BatchInvariant: break;
        case OptionCase::Scale: options.scale(kScale); break;
        case OptionCase::ScalePerRow:
            for (std::int64_t row : batch.rows) scales.push_back(inputs.row_scales[row]);
            options.scale_per_row({rows});
            scale = scales.data();
            break;
        case OptionCase::Causal:
            window.resize(static_cast<std::size_t>(rows * n));
            for (std::int64_t r = 0; r < rows; ++r) {
                const std::int64_t query = batch.rows[r] % spec.causal.queries;
                for (std::int64_t j = 0; j < n; ++j) window[r * n + j] = j <= query + spec.causal.offset ? 1 : 0;
            }
            options.mask(SMX_DTYPE_BOOL, {rows, n}, {});
            mask = window.data();
            break;
        case OptionCase::AdditiveMask:
            options.mask(SMX_DTYPE_F64, {rows, n}, {});
            mask = batch.extra.at(0).data();
            break;
        case OptionCase::BoolMask:
            options.mask(SMX_DTYPE_BOOL, {n}, {});
            mask = inputs.keep.data();
            break;
        case OptionCase::MaskedRowsZero: options.masked_rows_zero(); break;
    }
    return reference_softmax(cpu_handle, mode, batch.x, rows, n, options.get(), scale, mask);
}

class OptionsBench {
public:
    OptionsBench(BenchDevice& device, smxHandle_t handle, smxHandle_t cpu_handle, const std::vector<OptionCase>& options,
                 const RunInfo& run, TimingChoice timing, std::mt19937_64& rng)
        : device_(device), handle_(handle), cpu_handle_(cpu_handle), options_(options), run_(run), timing_(timing),
          rng_(rng), table_(device.type() == SMX_DEVICE_CUDA, timing.graph, true) {}

    std::vector<CaseRecord> run_grid(const std::vector<LayoutPlan>& grid) {
        for (const LayoutPlan& plan : grid) {
            const auto applying = std::count_if(options_.begin(), options_.end(),
                                                [&](OptionCase option) { return option_applies(option, plan.layout); });
            total_cases_ += static_cast<int>(plan.dtype_pairs.size() * plan.modes.size()) * static_cast<int>(applying);
        }
        table_.print_header();
        for (const LayoutPlan& plan : grid) {
            std::vector<smxDataType_t> x_dtypes;  // inputs are made once per x dtype, in the pairs' order
            for (const DtypePair& pair : plan.dtype_pairs) {
                if (std::find(x_dtypes.begin(), x_dtypes.end(), pair.x) == x_dtypes.end()) x_dtypes.push_back(pair.x);
            }
            for (smxDataType_t x_dtype : x_dtypes) run_input_group(plan, x_dtype);
        }
        return std::move(records_);
    }

private:
    void run_input_group(const LayoutPlan& plan, smxDataType_t x_dtype) {
        const Layout& layout = plan.layout;
        const int buffers = buffers_for(device_, layout.span() * dtype_size(x_dtype));
        OptionInputs inputs;
        std::string setup_error;
        try {
            make_inputs(layout, x_dtype, buffers, inputs);
        } catch (const std::exception& error) {  // BenchError, or memory running out
            setup_error = std::string("input setup: ") + error.what();
        }
        for (const DtypePair& dtypes : plan.dtype_pairs) {
            if (dtypes.x != x_dtype) continue;
            std::unique_ptr<RotatingBuffers> outputs;
            std::string error = setup_error;
            if (error.empty()) {
                try {
                    outputs = std::make_unique<RotatingBuffers>(device_, layout.span() * dtype_size(dtypes.y), buffers);
                } catch (const std::exception& failure) {
                    error = std::string("output setup: ") + failure.what();
                }
            }
            for (smxSoftmaxMode_t mode : plan.modes) {
                std::optional<double> plain_us;  // plain runs first: every other case is divided by it
                for (OptionCase option : options_) {
                    if (!option_applies(option, layout)) continue;
                    CaseRecord record = new_record(option, layout, dtypes, mode, buffers);
                    std::fprintf(stderr, "[%zu/%d] %s %s %s %s\n", records_.size() + 1, total_cases_, record.op.c_str(),
                                 record.option.c_str(), dtype_pair_text(dtypes.x, dtypes.y).c_str(),
                                 record.label.c_str());
                    if (!error.empty()) {
                        record.error = error;
                    } else {
                        try {
                            run_case(option, layout, dtypes, mode, inputs, *outputs, record);
                        } catch (const std::exception& failure) {  // one broken case must not end the run
                            record.error = failure.what();
                            record.check_passed = false;
                        }
                    }
                    if (option == OptionCase::Plain) {
                        plain_us = record.smx_us;
                    } else {
                        record.plain_us = plain_us;
                    }
                    table_.print_row(record, run_);
                    records_.push_back(std::move(record));
                }
            }
        }
    }

    void make_inputs(const Layout& layout, smxDataType_t x_dtype, int buffers, OptionInputs& inputs) {
        const std::size_t x_bytes = layout.span() * dtype_size(x_dtype);
        inputs.x = std::make_unique<RotatingBuffers>(device_, x_bytes, buffers);
        fill_inputs(device_, *inputs.x, layout, x_dtype, rng_());
        if (selected(options_, OptionCase::AdditiveMask)) {
            inputs.additive_mask = std::make_unique<RotatingBuffers>(device_, x_bytes, buffers);
            fill_inputs(device_, *inputs.additive_mask, layout, x_dtype, rng_(), kMinusInfPeriod);
        }
        if (selected(options_, OptionCase::ScalePerRow)) {
            std::uniform_real_distribution<float> any_scale(kLowestRowScale, kHighestRowScale);
            inputs.row_scales.resize(static_cast<std::size_t>(row_count(layout)));
            for (float& scale : inputs.row_scales) scale = any_scale(rng_);
            inputs.row_scale = DeviceBuffer(device_, inputs.row_scales.size() * sizeof(float));
            device_.copy_to_device(inputs.row_scale.data(), inputs.row_scales.data(), inputs.row_scale.bytes());
        }
        if (selected(options_, OptionCase::BoolMask)) {
            std::uniform_int_distribution<int> one_in(0, kExcludedOneIn - 1);
            inputs.keep.resize(static_cast<std::size_t>(row_len(layout)));
            for (unsigned char& keep : inputs.keep) keep = one_in(rng_) == 0 ? 0 : 1;
            inputs.bool_mask = DeviceBuffer(device_, inputs.keep.size());
            device_.copy_to_device(inputs.bool_mask.data(), inputs.keep.data(), inputs.keep.size());
        }
    }

    CaseRecord new_record(OptionCase option, const Layout& layout, DtypePair dtypes, smxSoftmaxMode_t mode,
                          int buffers) const {
        const CaseSpec spec = describe_case(option, layout, dtypes);
        CaseRecord record;
        record.op = mode_name(mode);
        record.option = option_name(option);
        record.option_detail = spec.detail;
        record.group = group_name(layout.group);
        record.label = layout.label;
        record.x_dtype = dtypes.x;
        record.y_dtype = dtypes.y;
        record.shape = spec.layout.shape;
        record.strides = spec.layout.strides;
        record.dim = spec.layout.axis;
        record.bytes = spec.bytes;
        record.buffers = buffers;
        return record;
    }

    void run_case(OptionCase option, const Layout& layout, DtypePair dtypes, smxSoftmaxMode_t mode,
                  const OptionInputs& inputs, const RotatingBuffers& outputs, CaseRecord& record) {
        const CaseSpec spec = describe_case(option, layout, dtypes);
        OptionsObject options;
        set_device_options(options, option, spec, dtypes.x);
        const OptionDescriptor descriptor(handle_, spec.layout, dtypes, mode, options.get());
        record.plan = descriptor.plan();
        const DeviceBuffer workspace(device_, descriptor.workspace_bytes());
        device_.poison(outputs.slot(0), outputs.slot_bytes() * outputs.count());

        const void* scale = option == OptionCase::ScalePerRow ? inputs.row_scale.data() : nullptr;
        const auto mask = [&](int call) -> const void* {
            if (option == OptionCase::AdditiveMask) return inputs.additive_mask->slot(call);
            return option == OptionCase::BoolMask ? inputs.bool_mask.data() : nullptr;
        };
        const auto forward = [&](int call) {
            descriptor.run(workspace.data(), outputs.slot(call), inputs.x->slot(call), scale, mask(call), device_.stream());
        };

        // Correct first: one forward into poisoned memory, checked before anything is timed. masked_rows_zero's
        // checked call gets a row with nothing to normalize (row 0 all -inf), put back before timing.
        std::vector<unsigned char> first_row;
        if (option == OptionCase::MaskedRowsZero) {
            std::vector<unsigned char> minus_inf(row_len(spec.layout) * dtype_size(dtypes.x));
            for (std::int64_t k = 0; k < row_len(spec.layout); ++k) store_from_double(minus_inf.data(), dtypes.x, k, -HUGE_VAL);
            first_row = replace_first_row(device_, inputs.x->slot(0), spec.layout, dtypes.x, minus_inf);
        }
        forward(0);
        device_.synchronize();
        std::vector<RowTensor> extra;
        if (option == OptionCase::AdditiveMask) extra.push_back({inputs.additive_mask->slot(0), dtypes.x});
        const CheckResult check = check_against(
            device_, spec.layout, dtypes, mode, inputs.x->slot(0), outputs.slot(0), extra,
            [&](const CheckedRows& batch) { return reference_rows(cpu_handle_, option, mode, spec, inputs, batch); },
            rng_);
        if (!first_row.empty()) replace_first_row(device_, inputs.x->slot(0), spec.layout, dtypes.x, first_row);
        if (!record_check(check, record)) return;
        time_calls(device_, forward, inputs.x->count(), timing_, run_, record);
    }

    BenchDevice& device_;
    smxHandle_t handle_;
    smxHandle_t cpu_handle_;
    const std::vector<OptionCase>& options_;
    const RunInfo& run_;
    TimingChoice timing_;
    std::mt19937_64& rng_;
    TablePrinter table_;
    std::vector<CaseRecord> records_;
    int total_cases_ = 0;
};

}  // namespace

const char* option_name(OptionCase option) {
    for (const OptionName& entry : kOptionNames) {
        if (entry.option == option) return entry.name;
    }
    return "?";
}

std::vector<OptionCase> parse_option_cases(const std::string& list) {
    std::vector<OptionCase> options = {OptionCase::Plain};
    for (const std::string& item : split_list(list)) {
        if (item == "all") {
            for (const OptionName& entry : kOptionNames) {
                if (!selected(options, entry.option)) options.push_back(entry.option);
            }
            continue;
        }
        const auto found = std::find_if(std::begin(kOptionNames), std::end(kOptionNames),
                                         [&](const OptionName& entry) { return item == entry.name; });
        if (found == std::end(kOptionNames)) {
            std::string names;
            for (const OptionName& entry : kOptionNames) names += std::string(names.empty() ? "" : ", ") + entry.name;
            throw std::invalid_argument("unknown option case '" + item + "' (expected all or some of " + names + ")");
        }
        if (!selected(options, found->option)) options.push_back(found->option);
    }
    return options;
}

std::vector<DtypePair> default_option_pairs(smxDeviceType_t device) {
    if (device == SMX_DEVICE_CUDA) {
        return {{SMX_DTYPE_F32, SMX_DTYPE_F32}, {SMX_DTYPE_BF16, SMX_DTYPE_BF16}, {SMX_DTYPE_BF16, SMX_DTYPE_F32}};
    }
    return {{SMX_DTYPE_F32, SMX_DTYPE_F32}, {SMX_DTYPE_BF16, SMX_DTYPE_F32}};
}

bool option_applies(OptionCase option, const Layout& layout) {
    if (option != OptionCase::Causal) return true;
    return layout.shape.size() >= 2 && axis_index(layout) == static_cast<int>(layout.shape.size()) - 1;
}

std::string option_plan(smxHandle_t handle, const Layout& layout, DtypePair dtypes, smxSoftmaxMode_t mode,
                        OptionCase option) {
    const CaseSpec spec = describe_case(option, layout, dtypes);
    OptionsObject options;
    set_device_options(options, option, spec, dtypes.x);
    const OptionDescriptor descriptor(handle, spec.layout, dtypes, mode, options.get());
    return descriptor.plan();
}

std::vector<CaseRecord> run_option_cases(BenchDevice& device, smxHandle_t handle, smxHandle_t cpu_handle,
                                         const std::vector<LayoutPlan>& grid, const std::vector<OptionCase>& options,
                                         const RunInfo& run, TimingChoice timing, std::mt19937_64& rng) {
    OptionsBench bench(device, handle, cpu_handle, options, run, timing, rng);
    return bench.run_grid(grid);
}

}  // namespace smx_bench
