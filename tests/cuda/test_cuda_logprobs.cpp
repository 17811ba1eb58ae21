// [cuda] logsumexp, log-softmax gather and cross-entropy against the float64 references of
// support/logprobs_reference.hpp (and, for the reduced losses, the CPU backend): every kernel path of
// src/cuda/logprobs and its plan boundary (stats in lane groups of 8 and 32, a CTA, a cluster and a split per
// row; ce-regs with one CTA and a cluster; the two-pass path; the general kernel on spatial, general and
// rows-with-any-dlogits layouts), every dtype, special rows, out-of-range indices and targets, ignore_index,
// label smoothing, K = 0, reductions (and their bits on a second run), in-place dlogits, misaligned pointers, a
// stream of the caller's, and rows of a million elements and more. Outputs and the workspace are poisoned before
// each run.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cuda_helpers.hpp"
#include "support/environment.hpp"
#include "support/logprobs_reference.hpp"

#if SMX_TEST_WITH_CUDA

using namespace smx_test;

namespace {

const smxDataType_t kFloatTypes[] = {SMX_DTYPE_F16, SMX_DTYPE_BF16, SMX_DTYPE_F32, SMX_DTYPE_F64};
constexpr double kInf = std::numeric_limits<double>::infinity();

smxDataType_t statistics_dtype(smxDataType_t x) { return x == SMX_DTYPE_F64 ? SMX_DTYPE_F64 : SMX_DTYPE_F32; }

// A descriptor destroyed when the scope ends.
template <class Desc, smxStatus_t (*Destroy)(Desc)>
struct Owned {
    Desc desc = nullptr;
    ~Owned() { Destroy(desc); }
};

// What one call on the CUDA handle gave: its status (and message), the plan text and the workspace size.
struct CudaCall {
    smxStatus_t status = SMX_STATUS_SUCCESS;
    std::string error;
    std::string plan;
    std::size_t workspace = 0;
};

// A workspace of `bytes` with every byte 0xFF: the plans may assume nothing of its contents.
DeviceBuffer poisoned_workspace(std::size_t bytes) {
    DeviceBuffer workspace(bytes);
    SMX_REQUIRE_CUDA(cudaMemset(workspace.get(), 0xFF, workspace.bytes()));
    return workspace;
}

// After a descriptor's creation: its failure into `call` (false), or its plan text and workspace size (true).
template <class Desc>
bool describe(CudaCall& call, Desc desc, smxStatus_t (*get_plan)(Desc, const char**),
              smxStatus_t (*get_workspace)(Desc, size_t*)) {
    if (call.status != SMX_STATUS_SUCCESS) {
        call.error = smxGetLastErrorMessage();
        return false;
    }
    const char* plan = nullptr;
    SMX_REQUIRE_OK(get_plan(desc, &plan));
    call.plan = plan;
    SMX_REQUIRE_OK(get_workspace(desc, &call.workspace));
    return true;
}

void finish_call(CudaCall& call, cudaStream_t stream) {
    if (call.status != SMX_STATUS_SUCCESS) {
        call.error = smxGetLastErrorMessage();
        return;
    }
    SMX_REQUIRE_CUDA(cudaStreamSynchronize(stream));
    SMX_REQUIRE_CUDA(cudaGetLastError());
}

CudaCall cuda_logsumexp(HostTensor& out, const HostTensor& x, int axis, cudaStream_t stream = nullptr) {
    CudaHandle handle;
    CudaCall call;
    TensorDesc x_desc(x), out_desc(out);
    Owned<smxLogsumexpDescriptor_t, smxDestroyLogsumexpDescriptor> desc;
    call.status = smxCreateLogsumexpDescriptor(handle.get(), &desc.desc, axis, out_desc.desc, x_desc.desc);
    if (!describe(call, desc.desc, smxGetLogsumexpPlan, smxGetLogsumexpWorkspaceSize)) return call;
    DeviceTensor x_device(x), out_device(out);
    x_device.upload(x);
    out_device.poison();
    DeviceBuffer workspace = poisoned_workspace(call.workspace);
    call.status = smxLogsumexp(desc.desc, workspace.get(), call.workspace, out_device.data(), x_device.data(), stream);
    finish_call(call, stream);
    out_device.download(out);
    return call;
}

CudaCall cuda_log_softmax_gather(HostTensor& out, const HostTensor& x, const HostTensor& index, int axis) {
    CudaHandle handle;
    CudaCall call;
    TensorDesc x_desc(x), index_desc(index), out_desc(out);
    Owned<smxLogSoftmaxGatherDescriptor_t, smxDestroyLogSoftmaxGatherDescriptor> desc;
    call.status = smxCreateLogSoftmaxGatherDescriptor(handle.get(), &desc.desc, axis, out_desc.desc, x_desc.desc,
                                                      index_desc.desc);
    if (!describe(call, desc.desc, smxGetLogSoftmaxGatherPlan, smxGetLogSoftmaxGatherWorkspaceSize)) return call;
    DeviceTensor x_device(x), index_device(index), out_device(out);
    x_device.upload(x);
    index_device.upload(index);
    out_device.poison();
    DeviceBuffer workspace = poisoned_workspace(call.workspace);
    call.status = smxLogSoftmaxGather(desc.desc, workspace.get(), call.workspace, out_device.data(), x_device.data(),
                                      index_device.data(), nullptr);
    finish_call(call, nullptr);
    out_device.download(out);
    return call;
}

// Cross-entropy on the CUDA handle. lse and dlogits may be NULL (not asked for); dlogits == &logits runs in
// place: the logits' device copy is passed as both, and comes back in `logits`.
CudaCall cuda_cross_entropy(HostTensor& loss, HostTensor* lse, HostTensor* dlogits, HostTensor& logits,
                            const HostTensor& target, int axis, const smxCrossEntropyOptions_t& options) {
    CudaHandle handle;
    CudaCall call;
    const bool in_place = dlogits == &logits;
    TensorDesc logits_desc(logits), target_desc(target), loss_desc(loss);
    std::unique_ptr<TensorDesc> lse_desc, dlogits_desc;
    if (lse != nullptr) lse_desc = std::make_unique<TensorDesc>(*lse);
    if (dlogits != nullptr) dlogits_desc = std::make_unique<TensorDesc>(*dlogits);
    Owned<smxCrossEntropyDescriptor_t, smxDestroyCrossEntropyDescriptor> desc;
    call.status = smxCreateCrossEntropyDescriptor(handle.get(), &desc.desc, axis, &options, loss_desc.desc,
                                                  lse_desc ? lse_desc->desc : nullptr,
                                                  dlogits_desc ? dlogits_desc->desc : nullptr, logits_desc.desc,
                                                  target_desc.desc);
    if (!describe(call, desc.desc, smxGetCrossEntropyPlan, smxGetCrossEntropyWorkspaceSize)) return call;
    DeviceTensor logits_device(logits), target_device(target), loss_device(loss);
    logits_device.upload(logits);
    target_device.upload(target);
    loss_device.poison();
    std::unique_ptr<DeviceTensor> lse_device, dlogits_device;
    if (lse != nullptr) {
        lse_device = std::make_unique<DeviceTensor>(*lse);
        lse_device->poison();
    }
    if (dlogits != nullptr && !in_place) {
        dlogits_device = std::make_unique<DeviceTensor>(*dlogits);
        dlogits_device->poison();
    }
    void* dlogits_pointer = in_place ? logits_device.data() : dlogits_device ? dlogits_device->data() : nullptr;
    DeviceBuffer workspace = poisoned_workspace(call.workspace);
    call.status = smxCrossEntropy(desc.desc, workspace.get(), call.workspace, loss_device.data(),
                                  lse_device ? lse_device->data() : nullptr, dlogits_pointer, logits_device.data(),
                                  target_device.data(), nullptr);
    finish_call(call, nullptr);
    loss_device.download(loss);
    if (lse_device) lse_device->download(*lse);
    if (in_place) {
        poison(logits);  // what comes back must be the device's dlogits
        logits_device.download(logits);
    } else if (dlogits_device) {
        dlogits_device->download(*dlogits);
    }
    return call;
}

// The family a plan text names: "cuda <family> | ..." -> <family>.
std::string family_of(const std::string& plan) { return kernel_kind(plan); }

bool plan_has(const std::string& plan, const std::string& text) { return plan.find(text) != std::string::npos; }

// Whether the plan has one of the '|'-separated texts.
bool plan_has_one_of(const std::string& plan, const std::string& texts) {
    std::size_t begin = 0;
    while (true) {
        const std::size_t end = texts.find('|', begin);
        if (plan_has(plan, texts.substr(begin, end == std::string::npos ? std::string::npos : end - begin))) return true;
        if (end == std::string::npos) return false;
        begin = end + 1;
    }
}

// Targets in [0, n) with every third row ignore_index and, where asked, every seventh out of range.
void fill_targets(HostTensor& target, std::int64_t n, std::int64_t ignore_index, bool out_of_range = false) {
    fill_indices(target, test_rng(), 0, n - 1);
    const std::vector<std::int64_t> offsets = logical_offsets(target);
    for (std::size_t r = 2; r < offsets.size(); r += 3) set_index(target, offsets[r], ignore_index);
    if (!out_of_range) return;
    for (std::size_t r = 6; r < offsets.size(); r += 7) set_index(target, offsets[r], r % 2 == 0 ? n : -1);
}

// One contiguous (rows, n) case of each stats path, the plan text that names it, and the override (if any)
// that reaches it on shapes this small.
struct RowsPath {
    std::int64_t rows;
    std::int64_t n;
    const char* group;     // "group=8", "group=32", "group=cta", "group=cluster", "group=split" ('|': one of)
    const char* override;  // SMX_CUDA_LONG_ROWS, or nullptr
};
const RowsPath kStatsPaths[] = {
    {700, 100, "group=8", nullptr},
    {300, 1500, "group=32", nullptr},
    {3000, 2500, "group=cta", nullptr},
    {21, 9000, "group=cluster", "cluster"},
    {21, 9000, "group=split", "split"},
    {40, 70000, "group=cluster|group=split", nullptr},  // few long rows: several CTAs a row by the rule
};

}  // namespace

// ---- logsumexp ------------------------------------------------------------------------------------------------

TEST_CASE("CUDA logsumexp matches the reference on every stats path, dtype and special row", "[cuda][logprobs]") {
    for (const RowsPath& path : kStatsPaths) {
        const std::unique_ptr<ScopedLongRowsOverride> override =
            path.override ? std::make_unique<ScopedLongRowsOverride>(path.override) : nullptr;
        for (smxDataType_t dtype : kFloatTypes) {
            HostTensor x = make_tensor(dtype, {path.rows, path.n});
            fill_random(x, test_rng());
            set_special_rows(x, 1);
            HostTensor out = make_per_row_tensor(statistics_dtype(dtype), {path.rows, path.n}, 1);
            const CudaCall call = cuda_logsumexp(out, x, 1);
            INFO(dtype_name(dtype) << " " << path.rows << "x" << path.n << " | " << call.error << " | plan: " << call.plan);
            REQUIRE(call.status == SMX_STATUS_SUCCESS);
            CHECK(plan_has_one_of(call.plan, path.group));
            CHECK(compare_to_scaled_reference(out, reference_logsumexp(x, 1)) == "");
        }
    }
}

TEST_CASE("CUDA logsumexp on spatial, general and strided layouts, keepdim and reversed outputs", "[cuda][logprobs]") {
    struct Case {
        std::vector<std::int64_t> shape, strides;
        int axis;
        const char* family;
    };
    const Case cases[] = {
        {{4, 33, 5}, {}, 1, "general"},            // spatial
        {{15, 3000}, {1, -16}, 1, "general"},       // transposed, reversed, long rows: a CTA per row
        {{3, 10, 4}, {1, 12, 3}, 1, "general"},     // general
        {{40, 129}, {260, 2}, 1, "general"},        // a strided axis
        {{40, 129}, {131, 1}, 1, "stats"},          // padded rows
        {{3, 5, 33}, {}, 2, "stats"},
        {{19}, {}, 0, "stats"},
    };
    for (const Case& c : cases) {
        for (smxDataType_t dtype : {SMX_DTYPE_BF16, SMX_DTYPE_F32, SMX_DTYPE_F64}) {
            for (int variant = 0; variant < 2; ++variant) {
                HostTensor x = make_tensor(dtype, c.shape, c.strides);
                fill_random(x, test_rng());
                set_special_rows(x, c.axis);
                HostTensor out = make_per_row_tensor(statistics_dtype(dtype), c.shape, c.axis, variant == 0, variant == 0 ? 2 : -1);
                const CudaCall call = cuda_logsumexp(out, x, c.axis);
                INFO(dtype_name(dtype) << " " << c.shape.size() << "-d axis " << c.axis << " | " << call.error
                                       << " | plan: " << call.plan);
                REQUIRE(call.status == SMX_STATUS_SUCCESS);
                CHECK(family_of(call.plan) == c.family);
                CHECK(compare_to_scaled_reference(out, reference_logsumexp(x, c.axis)) == "");
            }
        }
    }
}

TEST_CASE("CUDA logsumexp reads misaligned rows and runs on the caller's stream", "[cuda][logprobs]") {
    for (smxDataType_t dtype : kFloatTypes) {
        for (std::int64_t n : {std::int64_t{77}, std::int64_t{1500}, std::int64_t{20001}}) {
            HostTensor x = make_tensor(dtype, {9, n}, {n + 3, 1}, 1);  // one element past an aligned base; odd row stride
            fill_random(x, test_rng());
            HostTensor out = make_per_row_tensor(statistics_dtype(dtype), {9, n}, 1);
            DeviceStream stream;
            const CudaCall call = cuda_logsumexp(out, x, 1, stream.get());
            INFO(dtype_name(dtype) << " n " << n << " | " << call.error << " | plan: " << call.plan);
            REQUIRE(call.status == SMX_STATUS_SUCCESS);
            CHECK(compare_to_scaled_reference(out, reference_logsumexp(x, 1)) == "");
        }
    }
}

TEST_CASE("CUDA logsumexp of an empty axis is -inf per row", "[cuda][logprobs]") {
    HostTensor x = make_tensor(SMX_DTYPE_F32, {5, 0});
    HostTensor out = make_per_row_tensor(SMX_DTYPE_F32, {5, 0}, 1);
    const CudaCall call = cuda_logsumexp(out, x, 1);
    INFO(call.error << " | plan: " << call.plan);
    REQUIRE(call.status == SMX_STATUS_SUCCESS);
    for (std::int64_t offset : logical_offsets(out)) CHECK(out.get(offset) == -kInf);
}

TEST_CASE("CUDA logsumexp of rows of a million elements and more (split and cluster), bitwise the same twice",
          "[cuda][logprobs]") {
    for (const auto& [rows, n] : {std::pair<std::int64_t, std::int64_t>{2, 1 << 21}, {3, 1048583}, {24, 1 << 20}}) {
        for (smxDataType_t dtype : {SMX_DTYPE_BF16, SMX_DTYPE_F32}) {
            HostTensor x = make_tensor(dtype, {rows, n});
            fill_random(x, test_rng(), 4.0);
            set_special_rows(x, 1);
            HostTensor out = make_per_row_tensor(SMX_DTYPE_F32, {rows, n}, 1);
            const CudaCall call = cuda_logsumexp(out, x, 1);
            INFO(dtype_name(dtype) << " " << rows << "x" << n << " | " << call.error << " | plan: " << call.plan);
            REQUIRE(call.status == SMX_STATUS_SUCCESS);
            CHECK(compare_to_scaled_reference(out, reference_logsumexp(x, 1)) == "");
            HostTensor again = out;
            REQUIRE(cuda_logsumexp(again, x, 1).status == SMX_STATUS_SUCCESS);
            CHECK(std::memcmp(again.storage.data(), out.storage.data(), out.storage.size()) == 0);
        }
    }
}

// ---- log_softmax_gather -----------------------------------------------------------------------------------------

TEST_CASE("CUDA log_softmax_gather matches the reference on every stats path, dtype, index dtype and K",
          "[cuda][logprobs]") {
    for (const RowsPath& path : kStatsPaths) {
        const std::unique_ptr<ScopedLongRowsOverride> override =
            path.override ? std::make_unique<ScopedLongRowsOverride>(path.override) : nullptr;
        for (smxDataType_t dtype : kFloatTypes) {
            for (smxDataType_t index_dtype : {SMX_DTYPE_I32, SMX_DTYPE_I64}) {
                for (std::int64_t k : {std::int64_t{1}, std::int64_t{5}}) {
                    HostTensor x = make_tensor(dtype, {path.rows, path.n});
                    fill_random(x, test_rng());
                    set_special_rows(x, 1);
                    HostTensor index = make_tensor(index_dtype, {path.rows, k}, {1, path.rows});  // column-major
                    fill_indices(index, test_rng(), -2, path.n + 1);  // a few out of range, negative ones too
                    HostTensor out = make_tensor(statistics_dtype(dtype), {path.rows, k});
                    const CudaCall call = cuda_log_softmax_gather(out, x, index, 1);
                    INFO(dtype_name(dtype) << " " << dtype_name(index_dtype) << " K " << k << " " << path.rows << "x"
                                           << path.n << " | " << call.error << " | plan: " << call.plan);
                    REQUIRE(call.status == SMX_STATUS_SUCCESS);
                    CHECK(plan_has_one_of(call.plan, path.group));
                    CHECK(compare_to_scaled_reference(out, reference_log_softmax_gather(x, index, 1)) == "");
                }
            }
        }
    }
}

TEST_CASE("CUDA log_softmax_gather on other layouts, an empty axis, K = 0 and long rows", "[cuda][logprobs]") {
    // Spatial and general: the general kernel, index and out with strides of their own.
    for (const auto& [shape, strides, axis] :
         {std::tuple<std::vector<std::int64_t>, std::vector<std::int64_t>, int>{{4, 33, 5}, {}, 1},
          {{3, 10, 4}, {1, 12, 3}, 1},
          {{6, 3000}, {1, 6}, 1}}) {
        std::vector<std::int64_t> gathered = shape;
        gathered[axis] = 3;
        HostTensor x = make_tensor(SMX_DTYPE_F16, shape, strides);
        fill_random(x, test_rng());
        set_special_rows(x, axis);
        HostTensor index = make_tensor(SMX_DTYPE_I64, gathered, column_major_strides(gathered));
        fill_indices(index, test_rng(), -1, shape[axis]);
        HostTensor out = make_tensor(SMX_DTYPE_F32, gathered);
        const CudaCall call = cuda_log_softmax_gather(out, x, index, axis);
        INFO(shape.size() << "-d axis " << axis << " | " << call.error << " | plan: " << call.plan);
        REQUIRE(call.status == SMX_STATUS_SUCCESS);
        CHECK(family_of(call.plan) == "general");
        CHECK(compare_to_scaled_reference(out, reference_log_softmax_gather(x, index, axis)) == "");
    }
    // An empty axis: every index is out of range.
    HostTensor empty_x = make_tensor(SMX_DTYPE_BF16, {3, 0});
    HostTensor index = make_tensor(SMX_DTYPE_I32, {3, 2});
    fill_indices(index, test_rng(), -3, 3);
    HostTensor out = make_tensor(SMX_DTYPE_F32, {3, 2});
    REQUIRE(cuda_log_softmax_gather(out, empty_x, index, 1).status == SMX_STATUS_SUCCESS);
    for (std::int64_t offset : logical_offsets(out)) CHECK(out.get(offset) == kInf);
    // K = 0: nothing to do.
    HostTensor x = make_tensor(SMX_DTYPE_F32, {5, 7});
    fill_random(x, test_rng());
    HostTensor no_index = make_tensor(SMX_DTYPE_I64, {5, 0});
    HostTensor no_out = make_tensor(SMX_DTYPE_F32, {5, 0});
    CHECK(cuda_log_softmax_gather(no_out, x, no_index, 1).status == SMX_STATUS_SUCCESS);
    // Rows of a million and more, split over the device.
    HostTensor long_x = make_tensor(SMX_DTYPE_BF16, {2, 1300001});
    fill_random(long_x, test_rng());
    HostTensor long_index = make_tensor(SMX_DTYPE_I64, {2, 4});
    fill_indices(long_index, test_rng(), 0, 1300000);
    HostTensor long_out = make_tensor(SMX_DTYPE_F32, {2, 4});
    const CudaCall call = cuda_log_softmax_gather(long_out, long_x, long_index, 1);
    INFO(call.error << " | plan: " << call.plan);
    REQUIRE(call.status == SMX_STATUS_SUCCESS);
    CHECK(compare_to_scaled_reference(long_out, reference_log_softmax_gather(long_x, long_index, 1)) == "");
}

// ---- cross_entropy ------------------------------------------------------------------------------------------------

namespace {

// One cross-entropy case of (rows, n) contiguous logits with lse and dlogits (of dlogits_dtype), checked against the
// reference; returns the plan text.
std::string check_cross_entropy_rows(smxDataType_t dtype, smxDataType_t dlogits_dtype, std::int64_t rows,
                                     std::int64_t n, smxLossReduction_t reduction, double eps, bool in_place) {
    HostTensor logits = make_tensor(dtype, {rows, n});
    fill_random(logits, test_rng());
    set_special_rows(logits, 1);
    HostTensor target = make_per_row_tensor(eps > 0.0 ? SMX_DTYPE_I32 : SMX_DTYPE_I64, {rows, n}, 1);
    const std::int64_t ignore_index = eps > 0.0 ? 1 : -100;  // an ignored class inside [0, n) too
    fill_targets(target, n, ignore_index, true);
    const smxCrossEntropyOptions_t options = cross_entropy_options(reduction, ignore_index, eps);
    const CrossEntropyReference ref = reference_cross_entropy(logits, target, 1, options);
    HostTensor loss = reduction == SMX_REDUCTION_NONE ? make_per_row_tensor(statistics_dtype(dtype), {rows, n}, 1)
                                                      : make_tensor(statistics_dtype(dtype), {1});
    HostTensor lse = make_per_row_tensor(statistics_dtype(dtype), {rows, n}, 1, true);
    HostTensor dlogits = make_tensor(dlogits_dtype, {rows, n});
    HostTensor* gradient = in_place ? &logits : &dlogits;
    const CudaCall call = cuda_cross_entropy(loss, &lse, gradient, logits, target, 1, options);
    INFO(dtype_name(dtype) << "->" << dtype_name(dlogits_dtype) << " " << rows << "x" << n << " reduction " << reduction
                           << " eps " << eps << (in_place ? " in place" : "") << " | " << call.error
                           << " | plan: " << call.plan);
    REQUIRE(call.status == SMX_STATUS_SUCCESS);
    CHECK(compare_to_scaled_reference(loss, ref.loss) == "");
    CHECK(compare_to_scaled_reference(lse, ref.lse) == "");
    CHECK(compare_to_scaled_reference(*gradient, ref.dlogits) == "");
    return call.plan;
}

struct CePath {
    std::int64_t rows;
    std::int64_t n;
    const char* family;
    const char* override;
};
const CePath kCrossEntropyPaths[] = {
    {300, 700, "ce-regs", nullptr},       // one CTA a row
    {64, 3000, "ce-regs", nullptr},
    {10, 40000, "ce-regs", nullptr},      // a cluster a row
    {3, 151936, "ce-regs", nullptr},      // the f32 line's row length: a cluster of many CTAs a row
    {21, 9000, "ce-two-pass", "split"},   // stats split + ce-write
    {5, 30, "ce-two-pass", "split"},      // short rows: lane groups + ce-write
};

}  // namespace

TEST_CASE("CUDA cross_entropy matches the reference on every path, reduction, smoothing and dtype pair",
          "[cuda][logprobs]") {
    const smxLossReduction_t reductions[] = {SMX_REDUCTION_NONE, SMX_REDUCTION_SUM, SMX_REDUCTION_MEAN};
    for (const CePath& path : kCrossEntropyPaths) {
        const std::unique_ptr<ScopedLongRowsOverride> override =
            path.override ? std::make_unique<ScopedLongRowsOverride>(path.override) : nullptr;
        for (smxDataType_t dtype : kFloatTypes) {
            for (smxDataType_t dlogits_dtype : {dtype, SMX_DTYPE_F32}) {
                for (smxLossReduction_t reduction : reductions) {
                    for (double eps : {0.0, 0.1}) {
                        const std::string plan = check_cross_entropy_rows(dtype, dlogits_dtype, path.rows, path.n,
                                                                          reduction, eps, false);
                        INFO("plan: " << plan);
                        CHECK(family_of(plan) == path.family);
                        CHECK(plan_has(plan, "count") == (reduction == SMX_REDUCTION_MEAN));
                        CHECK(plan_has(plan, "finish") == (reduction != SMX_REDUCTION_NONE));
                    }
                }
            }
        }
    }
}

TEST_CASE("CUDA cross_entropy writes dlogits over the logits in place on every path", "[cuda][logprobs]") {
    for (const CePath& path : kCrossEntropyPaths) {
        const std::unique_ptr<ScopedLongRowsOverride> override =
            path.override ? std::make_unique<ScopedLongRowsOverride>(path.override) : nullptr;
        for (smxDataType_t dtype : kFloatTypes) {
            check_cross_entropy_rows(dtype, dtype, path.rows, path.n, SMX_REDUCTION_MEAN, 0.2, true);
        }
    }
    // The general kernel in place: a transposed (spatial) tensor.
    HostTensor logits = make_tensor(SMX_DTYPE_F32, {15, 10}, {1, -16});
    fill_random(logits, test_rng());
    set_special_rows(logits, 1);
    HostTensor target = make_per_row_tensor(SMX_DTYPE_I64, {15, 10}, 1);
    fill_targets(target, 10, -100, true);
    const smxCrossEntropyOptions_t options = cross_entropy_options(SMX_REDUCTION_SUM, -100, 0.3);
    const CrossEntropyReference ref = reference_cross_entropy(logits, target, 1, options);
    HostTensor loss = make_tensor(SMX_DTYPE_F32, {1});
    const CudaCall call = cuda_cross_entropy(loss, nullptr, &logits, logits, target, 1, options);
    INFO(call.error << " | plan: " << call.plan);
    REQUIRE(call.status == SMX_STATUS_SUCCESS);
    CHECK(family_of(call.plan) == "general");
    CHECK(compare_to_scaled_reference(loss, ref.loss) == "");
    CHECK(compare_to_scaled_reference(logits, ref.dlogits) == "");
}

namespace {

// The number after "<key>=" in a plan text, or -1 where the plan has no such key.
std::int64_t plan_number(const std::string& plan, const std::string& key) {
    const std::size_t at = plan.find(key + "=");
    return at == std::string::npos ? -1 : std::stoll(plan.substr(at + key.size() + 1));
}

// The plan of a cross-entropy with dlogits on (rows, n) contiguous logits, required to be ce-regs (a forward-only
// call plans the stats kernel, whose plan text may have no slice).
std::string ce_regs_plan(smxDataType_t dtype, smxDataType_t dlogits_dtype, std::int64_t rows, std::int64_t n) {
    HostTensor logits = make_tensor(dtype, {rows, n});
    fill_random(logits, test_rng());
    HostTensor target = make_per_row_tensor(SMX_DTYPE_I64, {rows, n}, 1);
    fill_targets(target, n, -100);
    HostTensor loss = make_per_row_tensor(statistics_dtype(dtype), {rows, n}, 1);
    HostTensor dlogits = make_tensor(dlogits_dtype, {rows, n});
    const CudaCall probe = cuda_cross_entropy(loss, nullptr, &dlogits, logits, target, 1,
                                              cross_entropy_options(SMX_REDUCTION_NONE, -100, 0.0));
    INFO(probe.error << " | plan: " << probe.plan);
    REQUIRE(probe.status == SMX_STATUS_SUCCESS);
    REQUIRE(family_of(probe.plan) == "ce-regs");
    return probe.plan;
}

// Target columns around every place a ce-regs thread's packs change: the row's first and last columns (the
// head and tail elements) and, in a cluster, both sides of every slice boundary; runs of consecutive columns,
// so the target falls in every position of a pack whatever the row's phase.
std::vector<std::int64_t> ce_regs_edge_targets(std::int64_t n, std::int64_t slice) {
    constexpr std::int64_t kReach = 17;  // more than two packs of 16-bit logits on each side
    std::vector<std::int64_t> targets;
    const auto add_run = [&](std::int64_t first, std::int64_t last) {
        for (std::int64_t c = std::max<std::int64_t>(first, 0); c <= std::min(last, n - 1); ++c) targets.push_back(c);
    };
    add_run(0, kReach);
    for (std::int64_t boundary = slice; boundary < n; boundary += slice) add_run(boundary - kReach, boundary + kReach - 1);
    add_run(n - kReach, n - 1);
    return targets;
}

}  // namespace

TEST_CASE("CUDA cross_entropy (ce-regs) subtracts the target's term at pack, slice and row edges, dlogits aligned "
          "or not, in place", "[cuda][logprobs]") {
    enum class Dlogits { Own, Misaligned, InPlace };
    const std::pair<smxDataType_t, smxDataType_t> pairs[] = {
        {SMX_DTYPE_BF16, SMX_DTYPE_BF16}, {SMX_DTYPE_BF16, SMX_DTYPE_F32}, {SMX_DTYPE_F16, SMX_DTYPE_F16},
        {SMX_DTYPE_F32, SMX_DTYPE_F32},   {SMX_DTYPE_F64, SMX_DTYPE_F64},
    };
    for (const auto& [dtype, dlogits_dtype] : pairs) {
        for (std::int64_t n : {std::int64_t{701}, std::int64_t{40001}}) {  // odd: consecutive rows change phase
            // The plan (of the shape alone, not the data) gives the slice that places the boundaries; the rows
            // must hold every target column twice (set_special_rows makes every odd row special), and their
            // count may change the plan, so the two are settled together.
            const auto plan_slice = [&](std::int64_t rows) {
                const std::int64_t slice = plan_number(ce_regs_plan(dtype, dlogits_dtype, rows, n), "slice");
                REQUIRE(slice > 0);  // the boundary walk below never ends on a slice of 0 or less
                return slice;
            };
            std::int64_t rows = 300;
            std::int64_t slice = plan_slice(rows);
            for (int settle = 0; settle < 3 && 2 * static_cast<std::int64_t>(ce_regs_edge_targets(n, slice).size()) > rows; ++settle) {
                rows = 2 * static_cast<std::int64_t>(ce_regs_edge_targets(n, slice).size());
                slice = plan_slice(rows);
            }
            const std::vector<std::int64_t> columns = ce_regs_edge_targets(n, slice);
            REQUIRE(2 * static_cast<std::int64_t>(columns.size()) <= rows);
            for (Dlogits where : {Dlogits::Own, Dlogits::Misaligned, Dlogits::InPlace}) {
                if (where == Dlogits::InPlace && dlogits_dtype != dtype) continue;
                for (double eps : {0.0, 0.1}) {
                    HostTensor logits = make_tensor(dtype, {rows, n});
                    fill_random(logits, test_rng());
                    set_special_rows(logits, 1);
                    HostTensor target = make_per_row_tensor(SMX_DTYPE_I64, {rows, n}, 1);
                    const std::vector<std::int64_t> target_offsets = logical_offsets(target);
                    // Row pairs (an ordinary row, a special one) take each column in turn.
                    for (std::int64_t r = 0; r < rows; ++r) {
                        set_index(target, target_offsets[r], columns[static_cast<std::size_t>(r / 2) % columns.size()]);
                    }
                    const std::int64_t ignore_index = eps > 0.0 ? columns[1] : -100;  // a column edge ignored
                    const smxCrossEntropyOptions_t options = cross_entropy_options(SMX_REDUCTION_MEAN, ignore_index, eps);
                    const CrossEntropyReference ref = reference_cross_entropy(logits, target, 1, options);
                    HostTensor loss = make_tensor(statistics_dtype(dtype), {1});
                    // One element past an aligned base: the packs of dlogits and of logits out of step.
                    HostTensor dlogits = where == Dlogits::Misaligned ? make_tensor(dlogits_dtype, {rows, n}, {n, 1}, 1)
                                                                      : make_tensor(dlogits_dtype, {rows, n});
                    HostTensor* gradient = where == Dlogits::InPlace ? &logits : &dlogits;
                    const CudaCall call = cuda_cross_entropy(loss, nullptr, gradient, logits, target, 1, options);
                    INFO(dtype_name(dtype) << "->" << dtype_name(dlogits_dtype) << " " << rows << "x" << n << " eps "
                                           << eps << " dlogits " << static_cast<int>(where) << " | " << call.error
                                           << " | plan: " << call.plan);
                    REQUIRE(call.status == SMX_STATUS_SUCCESS);
                    CHECK(family_of(call.plan) == "ce-regs");
                    CHECK(plan_number(call.plan, "slice") == slice);
                    CHECK(compare_to_scaled_reference(loss, ref.loss) == "");
                    CHECK(compare_to_scaled_reference(*gradient, ref.dlogits) == "");
                }
            }
        }
    }
}

namespace {

// Target columns in every pack a ce-regs thread holds: for each CTA of the cluster, each of a thread's packs p, the
// threads at both ends of a warp and of the CTA, and the first and last element of the pack. Rows of whole packs
// (no head or tail), so column = slice start + (p * threads + tid) * pack + k.
std::vector<std::int64_t> ce_regs_pack_targets(const std::string& plan, std::int64_t n, int pack) {
    const std::int64_t values = plan_number(plan, "values");
    const std::int64_t threads = plan_number(plan, "threads");
    const std::int64_t cluster = plan_number(plan, "cluster");
    const std::int64_t slice = plan_number(plan, "slice");
    REQUIRE(values % pack == 0);
    REQUIRE(slice % pack == 0);
    std::vector<std::int64_t> targets;
    for (std::int64_t rank = 0; rank < cluster; ++rank) {
        const std::int64_t slice_end = std::min(n, (rank + 1) * slice);
        for (std::int64_t p = 0; p < values / pack; ++p) {
            for (std::int64_t tid : {std::int64_t{0}, std::int64_t{31}, std::int64_t{32}, threads - 1}) {
                for (std::int64_t k : {std::int64_t{0}, std::int64_t{pack - 1}}) {
                    const std::int64_t column = rank * slice + (p * threads + tid) * pack + k;
                    if (column < slice_end) targets.push_back(column);
                }
            }
        }
    }
    return targets;
}

}  // namespace

TEST_CASE("CUDA cross_entropy (ce-regs) subtracts the target's term in every pack a thread holds, in every CTA of "
          "the cluster, in place", "[cuda][logprobs]") {
    struct Case {
        smxDataType_t dtype;
        smxDataType_t dlogits_dtype;
        std::int64_t n;  // whole 16-byte packs of the wider dtype
    };
    // The bf16 rows (the packed 64-value instance) and rows of the other instances, one CTA or a cluster.
    const Case cases[] = {
        {SMX_DTYPE_BF16, SMX_DTYPE_BF16, 32000}, {SMX_DTYPE_BF16, SMX_DTYPE_F32, 32000}, {SMX_DTYPE_F16, SMX_DTYPE_F16, 8000},
        {SMX_DTYPE_F32, SMX_DTYPE_F32, 20000},   {SMX_DTYPE_F64, SMX_DTYPE_F64, 6000},
    };
    for (const Case& c : cases) {
        const int pack = 16 / static_cast<int>(std::max(dtype_size(c.dtype), dtype_size(c.dlogits_dtype)));
        // Rows enough for each column in an ordinary and a special row: a plan's cluster sets the column count (the
        // H200 plans f32 rows of 20000 at 5 CTAs of 128 threads: 310 columns), and the row count the plan, so
        // rows grow until the plan they get has few enough columns.
        std::int64_t rows = 512;
        std::string plan = ce_regs_plan(c.dtype, c.dlogits_dtype, rows, c.n);
        std::vector<std::int64_t> columns = ce_regs_pack_targets(plan, c.n, pack);
        for (int attempt = 0; attempt < 3 && 2 * static_cast<std::int64_t>(columns.size()) > rows; ++attempt) {
            rows = (2 * static_cast<std::int64_t>(columns.size()) + 127) / 128 * 128;
            plan = ce_regs_plan(c.dtype, c.dlogits_dtype, rows, c.n);
            columns = ce_regs_pack_targets(plan, c.n, pack);
        }
        INFO(dtype_name(c.dtype) << "->" << dtype_name(c.dlogits_dtype) << " " << rows << "x" << c.n << " | plan: " << plan);
        REQUIRE(2 * static_cast<std::int64_t>(columns.size()) <= rows);
        for (bool in_place : {false, true}) {
            if (in_place && c.dlogits_dtype != c.dtype) continue;
            for (double eps : {0.0, 0.1}) {
                HostTensor logits = make_tensor(c.dtype, {rows, c.n});
                fill_random(logits, test_rng());
                set_special_rows(logits, 1);
                HostTensor target = make_per_row_tensor(SMX_DTYPE_I64, {rows, c.n}, 1);
                const std::vector<std::int64_t> target_offsets = logical_offsets(target);
                for (std::int64_t r = 0; r < rows; ++r) {
                    set_index(target, target_offsets[r], columns[static_cast<std::size_t>(r / 2) % columns.size()]);
                }
                const smxCrossEntropyOptions_t options = cross_entropy_options(SMX_REDUCTION_MEAN, -100, eps);
                const CrossEntropyReference ref = reference_cross_entropy(logits, target, 1, options);
                HostTensor loss = make_tensor(statistics_dtype(c.dtype), {1});
                HostTensor dlogits = make_tensor(c.dlogits_dtype, {rows, c.n});
                HostTensor* gradient = in_place ? &logits : &dlogits;
                const CudaCall call = cuda_cross_entropy(loss, nullptr, gradient, logits, target, 1, options);
                INFO("eps " << eps << (in_place ? " in place" : "") << " | " << call.error << " | plan: " << call.plan);
                REQUIRE(call.status == SMX_STATUS_SUCCESS);
                for (const char* key : {"values", "threads", "cluster", "slice"}) CHECK(plan_number(call.plan, key) == plan_number(plan, key));
                CHECK(compare_to_scaled_reference(loss, ref.loss) == "");
                CHECK(compare_to_scaled_reference(*gradient, ref.dlogits) == "");
            }
        }
    }
}

TEST_CASE("CUDA cross_entropy on spatial and general layouts and with any dlogits dtype (the general kernel)",
          "[cuda][logprobs]") {
    struct Case {
        std::vector<std::int64_t> shape, strides;
        int axis;
        smxDataType_t dtype, dlogits_dtype;
    };
    const Case cases[] = {
        {{4, 33, 5}, {}, 1, SMX_DTYPE_BF16, SMX_DTYPE_BF16},
        {{15, 10}, {1, -16}, 1, SMX_DTYPE_F32, SMX_DTYPE_F64},
        {{3, 10, 4}, {1, 12, 3}, 1, SMX_DTYPE_F16, SMX_DTYPE_F32},
        {{6, 2500}, {1, 6}, 1, SMX_DTYPE_F64, SMX_DTYPE_F16},     // long strided rows: a CTA per row
        {{30, 129}, {}, 1, SMX_DTYPE_BF16, SMX_DTYPE_F16},         // rows, a dlogits dtype without a fast path
        {{30, 129}, {}, 1, SMX_DTYPE_F32, SMX_DTYPE_BF16},
    };
    for (const Case& c : cases) {
        for (smxLossReduction_t reduction : {SMX_REDUCTION_NONE, SMX_REDUCTION_SUM, SMX_REDUCTION_MEAN}) {
            for (double eps : {0.0, 0.25}) {
                HostTensor logits = make_tensor(c.dtype, c.shape, c.strides);
                fill_random(logits, test_rng());
                set_special_rows(logits, c.axis);
                HostTensor target = make_per_row_tensor(SMX_DTYPE_I64, c.shape, c.axis, reduction == SMX_REDUCTION_SUM, -1);
                fill_targets(target, c.shape[c.axis], -100, true);
                const smxCrossEntropyOptions_t options = cross_entropy_options(reduction, -100, eps);
                const CrossEntropyReference ref = reference_cross_entropy(logits, target, c.axis, options);
                HostTensor loss = reduction == SMX_REDUCTION_NONE
                                      ? make_per_row_tensor(statistics_dtype(c.dtype), c.shape, c.axis, false, 2)
                                      : make_tensor(statistics_dtype(c.dtype), {1, 1});
                HostTensor lse = make_per_row_tensor(statistics_dtype(c.dtype), c.shape, c.axis, true, -1);
                HostTensor dlogits = make_tensor(c.dlogits_dtype, c.shape, column_major_strides(c.shape));
                const CudaCall call = cuda_cross_entropy(loss, &lse, &dlogits, logits, target, c.axis, options);
                INFO(dtype_name(c.dtype) << "->" << dtype_name(c.dlogits_dtype) << " " << c.shape.size() << "-d axis "
                                         << c.axis << " reduction " << reduction << " eps " << eps << " | "
                                         << call.error << " | plan: " << call.plan);
                REQUIRE(call.status == SMX_STATUS_SUCCESS);
                CHECK(family_of(call.plan) == "general");
                CHECK(compare_to_scaled_reference(loss, ref.loss) == "");
                CHECK(compare_to_scaled_reference(lse, ref.lse) == "");
                CHECK(compare_to_scaled_reference(dlogits, ref.dlogits) == "");
            }
        }
    }
}

TEST_CASE("CUDA cross_entropy forward alone (loss, lse) on every stats path", "[cuda][logprobs]") {
    for (const RowsPath& path : kStatsPaths) {
        const std::unique_ptr<ScopedLongRowsOverride> override =
            path.override ? std::make_unique<ScopedLongRowsOverride>(path.override) : nullptr;
        for (smxDataType_t dtype : {SMX_DTYPE_BF16, SMX_DTYPE_F32, SMX_DTYPE_F64}) {
            for (smxLossReduction_t reduction : {SMX_REDUCTION_NONE, SMX_REDUCTION_MEAN}) {
                HostTensor logits = make_tensor(dtype, {path.rows, path.n});
                fill_random(logits, test_rng());
                set_special_rows(logits, 1);
                HostTensor target = make_per_row_tensor(SMX_DTYPE_I64, {path.rows, path.n}, 1);
                fill_targets(target, path.n, -100, true);
                const smxCrossEntropyOptions_t options = cross_entropy_options(reduction, -100, 0.1);
                const CrossEntropyReference ref = reference_cross_entropy(logits, target, 1, options);
                HostTensor loss = reduction == SMX_REDUCTION_NONE
                                      ? make_per_row_tensor(statistics_dtype(dtype), {path.rows, path.n}, 1)
                                      : make_tensor(statistics_dtype(dtype), {1});
                HostTensor lse = make_per_row_tensor(statistics_dtype(dtype), {path.rows, path.n}, 1);
                const CudaCall call = cuda_cross_entropy(loss, &lse, nullptr, logits, target, 1, options);
                INFO(dtype_name(dtype) << " " << path.rows << "x" << path.n << " reduction " << reduction << " | "
                                       << call.error << " | plan: " << call.plan);
                REQUIRE(call.status == SMX_STATUS_SUCCESS);
                CHECK(plan_has_one_of(call.plan, path.group));
                CHECK_FALSE(plan_has(call.plan, "count"));  // the mean counts its rows in the finish
                CHECK(compare_to_scaled_reference(loss, ref.loss) == "");
                CHECK(compare_to_scaled_reference(lse, ref.lse) == "");
            }
        }
    }
}

TEST_CASE("CUDA cross_entropy's reduced loss: the CPU backend's value, the same bits on every run", "[cuda][logprobs]") {
    // Long rows on the split two-pass path and a cluster per row, and many short rows.
    for (const auto& [rows, n, override] : {std::tuple<std::int64_t, std::int64_t, const char*>{3000, 600, nullptr},
                                            {12, 40000, nullptr},
                                            {3, 1 << 20, nullptr},
                                            {40, 9000, "split"}}) {
        const std::unique_ptr<ScopedLongRowsOverride> guard =
            override ? std::make_unique<ScopedLongRowsOverride>(override) : nullptr;
        HostTensor logits = make_tensor(SMX_DTYPE_BF16, {rows, n});
        fill_random(logits, test_rng(), 6.0);
        HostTensor target = make_per_row_tensor(SMX_DTYPE_I64, {rows, n}, 1);
        fill_targets(target, n, -100);
        for (smxLossReduction_t reduction : {SMX_REDUCTION_SUM, SMX_REDUCTION_MEAN}) {
            const smxCrossEntropyOptions_t options = cross_entropy_options(reduction, -100, 0.1);
            HostTensor cpu_loss = make_tensor(SMX_DTYPE_F32, {1});
            REQUIRE(run_cpu_cross_entropy(cpu_loss, nullptr, nullptr, logits, target, 1, options) == SMX_STATUS_SUCCESS);
            HostTensor first = make_tensor(SMX_DTYPE_F32, {1});
            HostTensor second = make_tensor(SMX_DTYPE_F32, {1});
            HostTensor dlogits = make_tensor(SMX_DTYPE_BF16, {rows, n});
            const CudaCall call = cuda_cross_entropy(first, nullptr, &dlogits, logits, target, 1, options);
            INFO(rows << "x" << n << " reduction " << reduction << " | " << call.error << " | plan: " << call.plan);
            REQUIRE(call.status == SMX_STATUS_SUCCESS);
            REQUIRE(cuda_cross_entropy(second, nullptr, &dlogits, logits, target, 1, options).status == SMX_STATUS_SUCCESS);
            CHECK(std::memcmp(first.storage.data(), second.storage.data(), first.storage.size()) == 0);
            const double cpu = cpu_loss.get(0);
            CHECK(std::fabs(first.get(0) - cpu) <= 1e-5 * (std::fabs(cpu) + 1.0));
            CHECK(compare_to_scaled_reference(first, reference_cross_entropy(logits, target, 1, options).loss) == "");
        }
    }
}

TEST_CASE("CUDA cross_entropy with every row ignored, zero rows and no classes", "[cuda][logprobs]") {
    HostTensor logits = make_tensor(SMX_DTYPE_F32, {6, 11});
    fill_random(logits, test_rng());
    set_special_rows(logits, 1);  // an ignored NaN row is still 0
    HostTensor target = make_per_row_tensor(SMX_DTYPE_I32, {6, 11}, 1);
    for (std::int64_t r = 0; r < 6; ++r) set_index(target, r, -7);
    for (smxLossReduction_t reduction : {SMX_REDUCTION_NONE, SMX_REDUCTION_SUM, SMX_REDUCTION_MEAN}) {
        const smxCrossEntropyOptions_t options = cross_entropy_options(reduction, -7, 0.5);
        HostTensor loss = make_tensor(SMX_DTYPE_F32, {reduction == SMX_REDUCTION_NONE ? 6 : 1});
        HostTensor dlogits = make_tensor(SMX_DTYPE_F32, {6, 11});
        const CudaCall call = cuda_cross_entropy(loss, nullptr, &dlogits, logits, target, 1, options);
        INFO("reduction " << reduction << " | " << call.error << " | plan: " << call.plan);
        REQUIRE(call.status == SMX_STATUS_SUCCESS);
        for (std::int64_t offset : logical_offsets(dlogits)) REQUIRE(dlogits.get(offset) == 0.0);
        if (reduction == SMX_REDUCTION_MEAN) CHECK(std::isnan(loss.get(0)));
        else for (std::int64_t offset : logical_offsets(loss)) CHECK(loss.get(offset) == 0.0);
    }
    HostTensor no_rows = make_tensor(SMX_DTYPE_BF16, {0, 5});
    HostTensor no_targets = make_tensor(SMX_DTYPE_I64, {0});
    for (smxLossReduction_t reduction : {SMX_REDUCTION_SUM, SMX_REDUCTION_MEAN}) {
        HostTensor loss = make_tensor(SMX_DTYPE_F32, {1});
        const CudaCall call = cuda_cross_entropy(loss, nullptr, nullptr, no_rows, no_targets, 1, cross_entropy_options(reduction));
        INFO(call.error << " | plan: " << call.plan);
        REQUIRE(call.status == SMX_STATUS_SUCCESS);
        if (reduction == SMX_REDUCTION_SUM) CHECK(loss.get(0) == 0.0);
        else CHECK(std::isnan(loss.get(0)));
    }
    HostTensor no_classes = make_tensor(SMX_DTYPE_F32, {2, 0});
    HostTensor two_targets = make_tensor(SMX_DTYPE_I64, {2});
    set_index(two_targets, 0, 0);
    set_index(two_targets, 1, -100);
    HostTensor loss = make_tensor(SMX_DTYPE_F32, {2});
    HostTensor lse = make_tensor(SMX_DTYPE_F32, {2});
    HostTensor dlogits = make_tensor(SMX_DTYPE_F32, {2, 0});
    const CudaCall call = cuda_cross_entropy(loss, &lse, &dlogits, no_classes, two_targets, 1,
                                             cross_entropy_options(SMX_REDUCTION_NONE));
    INFO(call.error << " | plan: " << call.plan);
    REQUIRE(call.status == SMX_STATUS_SUCCESS);
    CHECK(std::isnan(loss.get(0)));
    CHECK(loss.get(1) == 0.0);
    CHECK(lse.get(0) == -kInf);
    CHECK(lse.get(1) == -kInf);
}

TEST_CASE("CUDA cross_entropy on rows too long for a cluster: two passes, a million logits and more",
          "[cuda][logprobs]") {
    for (const auto& [rows, n, dtype] : {std::tuple<std::int64_t, std::int64_t, smxDataType_t>{3, 1 << 20, SMX_DTYPE_F32},
                                         {2, 1500007, SMX_DTYPE_BF16},
                                         {40, 600000, SMX_DTYPE_F32}}) {
        for (bool in_place : {false, true}) {
            const std::string plan = check_cross_entropy_rows(dtype, dtype, rows, n, SMX_REDUCTION_MEAN, 0.1, in_place);
            INFO("plan: " << plan);
            CHECK(family_of(plan) == "ce-two-pass");
        }
    }
}

TEST_CASE("CUDA log-probability plans: the family for each shape class, and the workspace it needs",
          "[cuda][logprobs]") {
    // ce-regs takes a cluster only where one CTA cannot hold the row; a (8192, 32000) bf16 row fits one cluster.
    HostTensor logits = make_tensor(SMX_DTYPE_BF16, {8, 32000});
    HostTensor target = make_per_row_tensor(SMX_DTYPE_I64, {8, 32000}, 1);
    fill_random(logits, test_rng());
    fill_targets(target, 32000, -100);
    HostTensor loss = make_tensor(SMX_DTYPE_F32, {1});
    HostTensor dlogits = make_tensor(SMX_DTYPE_BF16, {8, 32000});
    const CudaCall regs = cuda_cross_entropy(loss, nullptr, &dlogits, logits, target, 1,
                                             cross_entropy_options(SMX_REDUCTION_MEAN));
    INFO(regs.plan);
    REQUIRE(regs.status == SMX_STATUS_SUCCESS);
    CHECK(family_of(regs.plan) == "ce-regs");
    CHECK(plan_value(regs.plan, "cluster") >= 1);
    CHECK(regs.workspace > 0);  // the count and the per-row losses
    // Without dlogits and unreduced: stats alone, no workspace.
    HostTensor per_row = make_per_row_tensor(SMX_DTYPE_F32, {8, 32000}, 1);
    const CudaCall forward = cuda_cross_entropy(per_row, nullptr, nullptr, logits, target, 1,
                                                cross_entropy_options(SMX_REDUCTION_NONE));
    INFO(forward.plan);
    REQUIRE(forward.status == SMX_STATUS_SUCCESS);
    CHECK(kernel_kind(forward.plan).rfind("stats", 0) == 0);
    CHECK(forward.workspace == 0);
    // A split logsumexp needs its partials; a cluster none.
    HostTensor x = make_tensor(SMX_DTYPE_F32, {2, 1 << 21});
    fill_random(x, test_rng());
    HostTensor out = make_per_row_tensor(SMX_DTYPE_F32, {2, 1 << 21}, 1);
    const CudaCall split = cuda_logsumexp(out, x, 1);
    INFO(split.plan);
    REQUIRE(split.status == SMX_STATUS_SUCCESS);
    CHECK(family_of(split.plan) == "stats-split");
    CHECK(split.workspace > 0);
    HostTensor few = make_tensor(SMX_DTYPE_F32, {40, 70000});
    fill_random(few, test_rng());
    HostTensor few_out = make_per_row_tensor(SMX_DTYPE_F32, {40, 70000}, 1);
    const CudaCall cluster = cuda_logsumexp(few_out, few, 1);
    INFO(cluster.plan);
    REQUIRE(cluster.status == SMX_STATUS_SUCCESS);
    CHECK(family_of(cluster.plan) == "stats-cluster");
    CHECK(cluster.workspace == 0);
}

TEST_CASE("CUDA log-probability kernels on small cases of every path (the sanitizers' set)",
          "[cuda][logprobs][sanitize]") {
    // stats: 8 lanes, a warp, a cluster, a split; general; each for logsumexp and gather.
    struct StatsCase {
        std::vector<std::int64_t> shape, strides;
        const char* override;
        const char* family;
    };
    const StatsCase stats_cases[] = {
        {{20, 100}, {}, nullptr, "stats"},
        {{10, 1500}, {}, nullptr, "stats"},
        {{6, 8500}, {}, "cluster", "stats-cluster"},
        {{6, 8500}, {}, "split", "stats-split"},
        {{4, 33, 5}, {}, nullptr, "general"},
    };
    for (const StatsCase& c : stats_cases) {
        const std::unique_ptr<ScopedLongRowsOverride> override =
            c.override ? std::make_unique<ScopedLongRowsOverride>(c.override) : nullptr;
        HostTensor x = make_tensor(SMX_DTYPE_BF16, c.shape, c.strides);
        fill_random(x, test_rng());
        set_special_rows(x, 1);
        HostTensor out = make_per_row_tensor(SMX_DTYPE_F32, c.shape, 1);
        const CudaCall lse = cuda_logsumexp(out, x, 1);
        INFO(lse.error << " | plan: " << lse.plan);
        REQUIRE(lse.status == SMX_STATUS_SUCCESS);
        CHECK(family_of(lse.plan) == c.family);
        CHECK(compare_to_scaled_reference(out, reference_logsumexp(x, 1)) == "");
        std::vector<std::int64_t> gathered = c.shape;
        gathered[1] = 3;
        HostTensor index = make_tensor(SMX_DTYPE_I32, gathered);
        fill_indices(index, test_rng(), -1, c.shape[1]);
        HostTensor picked = make_tensor(SMX_DTYPE_F32, gathered);
        const CudaCall gather = cuda_log_softmax_gather(picked, x, index, 1);
        INFO(gather.error << " | plan: " << gather.plan);
        REQUIRE(gather.status == SMX_STATUS_SUCCESS);
        CHECK(compare_to_scaled_reference(picked, reference_log_softmax_gather(x, index, 1)) == "");
    }
    // cross-entropy: ce-regs (one CTA, a cluster), two passes, general; MEAN with dlogits (count, finish), in
    // place on the first.
    struct CeCase {
        std::vector<std::int64_t> shape, strides;
        const char* override;
        const char* family;
        smxDataType_t dlogits_dtype;
    };
    const CeCase ce_cases[] = {
        {{20, 700}, {}, nullptr, "ce-regs", SMX_DTYPE_F32},
        {{3, 40000}, {}, nullptr, "ce-regs", SMX_DTYPE_F32},
        {{6, 8500}, {}, "split", "ce-two-pass", SMX_DTYPE_F32},
        {{15, 10}, {1, -16}, nullptr, "general", SMX_DTYPE_F16},
    };
    bool in_place = true;
    for (const CeCase& c : ce_cases) {
        const std::unique_ptr<ScopedLongRowsOverride> override =
            c.override ? std::make_unique<ScopedLongRowsOverride>(c.override) : nullptr;
        HostTensor logits = make_tensor(SMX_DTYPE_F32, c.shape, c.strides);
        fill_random(logits, test_rng());
        set_special_rows(logits, 1);
        HostTensor target = make_per_row_tensor(SMX_DTYPE_I64, c.shape, 1);
        fill_targets(target, c.shape[1], -100, true);
        const smxCrossEntropyOptions_t options = cross_entropy_options(SMX_REDUCTION_MEAN, -100, 0.1);
        const CrossEntropyReference ref = reference_cross_entropy(logits, target, 1, options);
        HostTensor loss = make_tensor(SMX_DTYPE_F32, {1});
        HostTensor lse = make_per_row_tensor(SMX_DTYPE_F32, c.shape, 1);
        HostTensor dlogits = make_tensor(c.dlogits_dtype, c.shape);
        HostTensor* gradient = in_place ? &logits : &dlogits;
        const CudaCall call = cuda_cross_entropy(loss, &lse, gradient, logits, target, 1, options);
        INFO(call.error << " | plan: " << call.plan);
        REQUIRE(call.status == SMX_STATUS_SUCCESS);
        CHECK(family_of(call.plan) == c.family);
        CHECK(compare_to_scaled_reference(loss, ref.loss) == "");
        CHECK(compare_to_scaled_reference(lse, ref.lse) == "");
        CHECK(compare_to_scaled_reference(*gradient, ref.dlogits) == "");
        in_place = false;
    }
}

TEST_CASE("CUDA log-probability plans captured in a CUDA graph replay on new data", "[cuda][logprobs][sanitize]") {
    // cross-entropy MEAN with dlogits (count, ce-regs, finish: three launches) and a split logsumexp (stats,
    // combine): each call captured once, replayed on fresh logits.
    CudaHandle handle;
    DeviceStream stream;
    const std::int64_t rows = 12, n = 3000;
    HostTensor logits = make_tensor(SMX_DTYPE_BF16, {rows, n});
    HostTensor target = make_per_row_tensor(SMX_DTYPE_I64, {rows, n}, 1);
    fill_targets(target, n, -100);
    HostTensor loss = make_tensor(SMX_DTYPE_F32, {1});
    HostTensor dlogits = make_tensor(SMX_DTYPE_BF16, {rows, n});
    const smxCrossEntropyOptions_t options = cross_entropy_options(SMX_REDUCTION_MEAN, -100, 0.1);
    TensorDesc logits_desc(logits), target_desc(target), loss_desc(loss), dlogits_desc(dlogits);
    Owned<smxCrossEntropyDescriptor_t, smxDestroyCrossEntropyDescriptor> ce;
    SMX_REQUIRE_OK(smxCreateCrossEntropyDescriptor(handle.get(), &ce.desc, 1, &options, loss_desc.desc, nullptr,
                                                   dlogits_desc.desc, logits_desc.desc, target_desc.desc));
    std::size_t ce_workspace_bytes = 0;
    SMX_REQUIRE_OK(smxGetCrossEntropyWorkspaceSize(ce.desc, &ce_workspace_bytes));

    const ScopedLongRowsOverride split("split");
    const std::int64_t long_n = 20000;
    HostTensor x = make_tensor(SMX_DTYPE_F32, {2, long_n});
    HostTensor out = make_per_row_tensor(SMX_DTYPE_F32, {2, long_n}, 1);
    TensorDesc x_desc(x), out_desc(out);
    Owned<smxLogsumexpDescriptor_t, smxDestroyLogsumexpDescriptor> lse;
    SMX_REQUIRE_OK(smxCreateLogsumexpDescriptor(handle.get(), &lse.desc, 1, out_desc.desc, x_desc.desc));
    std::size_t lse_workspace_bytes = 0;
    SMX_REQUIRE_OK(smxGetLogsumexpWorkspaceSize(lse.desc, &lse_workspace_bytes));
    CHECK(lse_workspace_bytes > 0);

    DeviceTensor logits_device(logits), target_device(target), loss_device(loss), dlogits_device(dlogits);
    DeviceTensor x_device(x), out_device(out);
    DeviceBuffer ce_workspace = poisoned_workspace(ce_workspace_bytes);
    DeviceBuffer lse_workspace = poisoned_workspace(lse_workspace_bytes);
    target_device.upload(target);
    cudaGraph_t graph = nullptr;
    SMX_REQUIRE_CUDA(cudaStreamBeginCapture(stream.get(), cudaStreamCaptureModeGlobal));
    const smxStatus_t ce_status =
        smxCrossEntropy(ce.desc, ce_workspace.get(), ce_workspace_bytes, loss_device.data(), nullptr,
                        dlogits_device.data(), logits_device.data(), target_device.data(), stream.get());
    const smxStatus_t lse_status = smxLogsumexp(lse.desc, lse_workspace.get(), lse_workspace_bytes,
                                                out_device.data(), x_device.data(), stream.get());
    const std::string error = ce_status == SMX_STATUS_SUCCESS && lse_status == SMX_STATUS_SUCCESS ? "" : smxGetLastErrorMessage();
    const cudaError_t end = cudaStreamEndCapture(stream.get(), &graph);
    INFO(error);
    REQUIRE(ce_status == SMX_STATUS_SUCCESS);
    REQUIRE(lse_status == SMX_STATUS_SUCCESS);
    SMX_REQUIRE_CUDA(end);
    cudaGraphExec_t instance = nullptr;
    const cudaError_t instantiated = cudaGraphInstantiate(&instance, graph, 0);
    cudaGraphDestroy(graph);
    SMX_REQUIRE_CUDA(instantiated);
    for (int replay = 0; replay < 2; ++replay) {
        fill_random(logits, test_rng());
        fill_random(x, test_rng());
        logits_device.upload(logits);
        x_device.upload(x);
        loss_device.poison();
        dlogits_device.poison();
        out_device.poison();
        const cudaError_t launched = cudaGraphLaunch(instance, stream.get());
        const cudaError_t synced = launched == cudaSuccess ? cudaStreamSynchronize(stream.get()) : launched;
        if (synced != cudaSuccess) cudaGraphExecDestroy(instance);
        SMX_REQUIRE_CUDA(synced);
        loss_device.download(loss);
        dlogits_device.download(dlogits);
        out_device.download(out);
        INFO("replay " << replay);
        const CrossEntropyReference ref = reference_cross_entropy(logits, target, 1, options);
        CHECK(compare_to_scaled_reference(loss, ref.loss) == "");
        CHECK(compare_to_scaled_reference(dlogits, ref.dlogits) == "");
        CHECK(compare_to_scaled_reference(out, reference_logsumexp(x, 1)) == "");
    }
    cudaGraphExecDestroy(instance);
}

#endif  // SMX_TEST_WITH_CUDA
