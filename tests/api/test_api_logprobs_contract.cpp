// The C API contract of logsumexp, log-softmax gather and cross-entropy: every refusal has its status and a
// last-error message naming the offending value, and nothing is written; what is allowed (zero rows with NULL
// pointers, optional outputs, in place dlogits, options of a newer caller with zero tail) works. Also: the
// integer dtypes are tensor dtypes, and softmax keeps refusing them.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "api/api_checks.hpp"
#include "support/logprobs_reference.hpp"

using Catch::Matchers::Contains;
using namespace smx_test;

namespace {

struct CpuHandle : Handle {
    CpuHandle() : Handle(SMX_DEVICE_CPU, 0) { REQUIRE(status == SMX_STATUS_SUCCESS); }
};

std::string not_live(const std::string& argument, const std::string& kind) {
    return argument + " is not a live " + kind + " (destroyed, or another kind of object)";
}

// Descriptors that destroy themselves, holding a creation's status.
struct Logsumexp {
    smxLogsumexpDescriptor_t desc = nullptr;
    smxStatus_t status;
    Logsumexp(smxHandle_t handle, int axis, smxTensorDescriptor_t out, smxTensorDescriptor_t x)
        : status(smxCreateLogsumexpDescriptor(handle, &desc, axis, out, x)) {}
    ~Logsumexp() { smxDestroyLogsumexpDescriptor(desc); }
};

struct Gather {
    smxLogSoftmaxGatherDescriptor_t desc = nullptr;
    smxStatus_t status;
    Gather(smxHandle_t handle, int axis, smxTensorDescriptor_t out, smxTensorDescriptor_t x, smxTensorDescriptor_t index)
        : status(smxCreateLogSoftmaxGatherDescriptor(handle, &desc, axis, out, x, index)) {}
    ~Gather() { smxDestroyLogSoftmaxGatherDescriptor(desc); }
};

struct CrossEntropy {
    smxCrossEntropyDescriptor_t desc = nullptr;
    smxStatus_t status;
    CrossEntropy(smxHandle_t handle, int axis, const smxCrossEntropyOptions_t* options, smxTensorDescriptor_t loss,
                 smxTensorDescriptor_t lse, smxTensorDescriptor_t dlogits, smxTensorDescriptor_t logits,
                 smxTensorDescriptor_t target)
        : status(smxCreateCrossEntropyDescriptor(handle, &desc, axis, options, loss, lse, dlogits, logits, target)) {}
    ~CrossEntropy() { smxDestroyCrossEntropyDescriptor(desc); }
};

// A (4, 6) f32 problem with one of each operand, row-major, for the checks below.
struct Operands {
    TensorDesc x{SMX_DTYPE_F32, {4, 6}, {}};
    TensorDesc rows_f32{SMX_DTYPE_F32, {4}, {}};
    TensorDesc rows_i64{SMX_DTYPE_I64, {4}, {}};
    TensorDesc gathered_f32{SMX_DTYPE_F32, {4, 2}, {}};
    TensorDesc gathered_i64{SMX_DTYPE_I64, {4, 2}, {}};
    TensorDesc one_f32{SMX_DTYPE_F32, {1}, {}};
};

}  // namespace

// ---- dtypes ---------------------------------------------------------------------------------------------

TEST_CASE("I32 and I64 are tensor dtypes of 4 and 8 bytes, and softmax refuses them by name", "[api]") {
    CpuHandle handle;
    for (smxDataType_t dtype : {SMX_DTYPE_I32, SMX_DTYPE_I64}) {
        TensorDesc integer(dtype, {3, 5}, {});
        REQUIRE(integer.desc != nullptr);
        smxDataType_t read_back = SMX_DTYPE_F16;
        REQUIRE(smxGetTensorDescriptor(integer.desc, &read_back, nullptr, nullptr, nullptr) == SMX_STATUS_SUCCESS);
        CHECK(read_back == dtype);
        TensorDesc floats(SMX_DTYPE_F32, {3, 5}, {});
        smxSoftmaxDescriptor_t desc = nullptr;
        CHECK(smxCreateSoftmaxDescriptor(handle.handle, &desc, SMX_SOFTMAX, 1, floats.desc, integer.desc) ==
              SMX_STATUS_NOT_SUPPORTED_DTYPE_PAIR);
        CHECK_THAT(last_error(), Contains(dtype == SMX_DTYPE_I32 ? "i32" : "i64"));
        CHECK(smxCreateSoftmaxDescriptor(handle.handle, &desc, SMX_SOFTMAX, 1, integer.desc, floats.desc) ==
              SMX_STATUS_NOT_SUPPORTED_DTYPE_PAIR);
        CHECK(desc == nullptr);
    }
    // An element size of 8 bounds an I64 tensor's bytes as F64's.
    const std::int64_t huge[1] = {INT64_MAX / 8 + 1};
    smxTensorDescriptor_t desc = nullptr;
    CHECK(smxCreateTensorDescriptor(&desc, SMX_DTYPE_I64, 1, huge, nullptr) == SMX_STATUS_BAD_PARAM_SHAPE);
}

TEST_CASE("the three operators refuse integer values, float indices and results of the wrong dtype", "[api]") {
    CpuHandle handle;
    Operands o;
    TensorDesc x_i32(SMX_DTYPE_I32, {4, 6}, {}), rows_f16(SMX_DTYPE_F16, {4}, {}), rows_f64(SMX_DTYPE_F64, {4}, {});
    TensorDesc gathered_f32_index(SMX_DTYPE_F32, {4, 2}, {}), rows_f32_target(SMX_DTYPE_F32, {4}, {});
    TensorDesc dlogits_i32(SMX_DTYPE_I32, {4, 6}, {}), x_f64(SMX_DTYPE_F64, {4, 6}, {});
    const auto refused = [](smxStatus_t status, const char* text) {
        CHECK(status == SMX_STATUS_NOT_SUPPORTED_DTYPE_PAIR);
        CHECK_THAT(last_error(), Contains(text));
    };
    refused(Logsumexp(handle.handle, 1, o.rows_f32.desc, x_i32.desc).status, "x dtype i32 is not supported");
    refused(Logsumexp(handle.handle, 1, rows_f16.desc, o.x.desc).status, "out dtype f16 with x f32");
    refused(Logsumexp(handle.handle, 1, rows_f64.desc, o.x.desc).status, "out must be f32");
    refused(Logsumexp(handle.handle, 1, o.rows_f32.desc, x_f64.desc).status, "out must be f64");
    refused(Gather(handle.handle, 1, o.gathered_f32.desc, o.x.desc, gathered_f32_index.desc).status,
            "index dtype f32 is not supported: index must be i32 or i64");
    refused(CrossEntropy(handle.handle, 1, nullptr, o.one_f32.desc, nullptr, nullptr, o.x.desc, rows_f32_target.desc)
                .status,
            "target dtype f32");
    refused(CrossEntropy(handle.handle, 1, nullptr, o.one_f32.desc, rows_f16.desc, nullptr, o.x.desc, o.rows_i64.desc)
                .status,
            "lse dtype f16");
    refused(CrossEntropy(handle.handle, 1, nullptr, o.one_f32.desc, nullptr, dlogits_i32.desc, o.x.desc,
                         o.rows_i64.desc)
                .status,
            "dlogits dtype i32");
}

TEST_CASE("a bool tensor is neither values, nor an index, nor a target; an integer tensor is not a mask", "[api]") {
    CpuHandle handle;
    Operands o;
    TensorDesc x_bool(SMX_DTYPE_BOOL, {4, 6}, {}), gathered_bool(SMX_DTYPE_BOOL, {4, 2}, {}), rows_bool(SMX_DTYPE_BOOL, {4}, {});
    const auto refused = [](smxStatus_t status, const char* text) {
        CHECK(status == SMX_STATUS_NOT_SUPPORTED_DTYPE_PAIR);
        CHECK_THAT(last_error(), Contains(text));
    };
    refused(Logsumexp(handle.handle, 1, o.rows_f32.desc, x_bool.desc).status, "x dtype bool is not supported");
    refused(Gather(handle.handle, 1, o.gathered_f32.desc, o.x.desc, gathered_bool.desc).status,
            "index dtype bool is not supported: index must be i32 or i64");
    refused(CrossEntropy(handle.handle, 1, nullptr, o.one_f32.desc, nullptr, nullptr, o.x.desc, rows_bool.desc).status,
            "target dtype bool");
    smxSoftmaxOptions_t options = nullptr;
    REQUIRE(smxCreateSoftmaxOptions(&options) == SMX_STATUS_SUCCESS);
    for (smxDataType_t dtype : {SMX_DTYPE_I32, SMX_DTYPE_I64}) {
        TensorDesc mask(dtype, {4, 6}, {});
        refused(smxSetSoftmaxMask(options, mask.desc), "a mask is bool (keep) or floating");
    }
    CHECK(smxDestroySoftmaxOptions(options) == SMX_STATUS_SUCCESS);
}

// ---- creation -------------------------------------------------------------------------------------------

TEST_CASE("the create calls refuse NULL pointers and name them", "[api]") {
    CpuHandle handle;
    Operands o;
    smxLogsumexpDescriptor_t lse = nullptr;
    CHECK(smxCreateLogsumexpDescriptor(handle.handle, nullptr, 1, o.rows_f32.desc, o.x.desc) ==
          SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK_THAT(last_error(), Contains("desc (the output pointer) is NULL"));
    CHECK(smxCreateLogsumexpDescriptor(nullptr, &lse, 1, o.rows_f32.desc, o.x.desc) == SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK_THAT(last_error(), Contains("handle is NULL"));
    CHECK(Logsumexp(handle.handle, 1, o.rows_f32.desc, nullptr).status == SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK_THAT(last_error(), Contains("xDesc is NULL"));
    CHECK(Logsumexp(handle.handle, 1, nullptr, o.x.desc).status == SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK_THAT(last_error(), Contains("outDesc is NULL"));
    CHECK(Gather(handle.handle, 1, o.gathered_f32.desc, o.x.desc, nullptr).status == SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK_THAT(last_error(), Contains("indexDesc is NULL"));
    CHECK(CrossEntropy(handle.handle, 1, nullptr, nullptr, nullptr, nullptr, o.x.desc, o.rows_i64.desc).status ==
          SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK_THAT(last_error(), Contains("lossDesc is NULL"));
    CHECK(CrossEntropy(handle.handle, 1, nullptr, o.one_f32.desc, nullptr, nullptr, o.x.desc, nullptr).status ==
          SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK_THAT(last_error(), Contains("targetDesc is NULL"));
    CHECK(CrossEntropy(handle.handle, 1, nullptr, o.one_f32.desc, nullptr, nullptr, nullptr, o.rows_i64.desc).status ==
          SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK_THAT(last_error(), Contains("logitsDesc is NULL"));
}

TEST_CASE("the create calls refuse objects of another kind in place of the handle or a tensor", "[api]") {
    CpuHandle handle;
    Operands o;
    const auto handle_as_tensor = reinterpret_cast<smxTensorDescriptor_t>(handle.handle);
    const auto tensor_as_handle = reinterpret_cast<smxHandle_t>(o.x.desc);
    CHECK(Logsumexp(tensor_as_handle, 1, o.rows_f32.desc, o.x.desc).status == SMX_STATUS_BAD_PARAM_OBJECT);
    CHECK(last_error() == not_live("handle", "smxHandle_t"));
    CHECK(Logsumexp(handle.handle, 1, handle_as_tensor, o.x.desc).status == SMX_STATUS_BAD_PARAM_OBJECT);
    CHECK(last_error() == not_live("outDesc", "smxTensorDescriptor_t"));
    CHECK(Gather(handle.handle, 1, o.gathered_f32.desc, o.x.desc, handle_as_tensor).status == SMX_STATUS_BAD_PARAM_OBJECT);
    CHECK(last_error() == not_live("indexDesc", "smxTensorDescriptor_t"));
    CHECK(CrossEntropy(handle.handle, 1, nullptr, o.one_f32.desc, handle_as_tensor, nullptr, o.x.desc, o.rows_i64.desc)
              .status == SMX_STATUS_BAD_PARAM_OBJECT);
    CHECK(last_error() == not_live("lseDesc", "smxTensorDescriptor_t"));
}

TEST_CASE("the create calls refuse an axis out of range and per-row or gathered shapes that do not fit x", "[api]") {
    CpuHandle handle;
    Operands o;
    for (int axis : {2, -3}) {
        CHECK(Logsumexp(handle.handle, axis, o.rows_f32.desc, o.x.desc).status == SMX_STATUS_BAD_PARAM_AXIS);
        CHECK_THAT(last_error(), Contains("axis " + std::to_string(axis) + " out of range for a 2-d tensor"));
    }
    TensorDesc rows_5(SMX_DTYPE_F32, {5}, {}), keep_2(SMX_DTYPE_F32, {4, 2}, {}), rows_6(SMX_DTYPE_F32, {6}, {});
    CHECK(Logsumexp(handle.handle, 1, rows_5.desc, o.x.desc).status == SMX_STATUS_BAD_PARAM_SHAPE);
    CHECK_THAT(last_error(), Contains("out shape [5] is not one element per row of x shape [4,6] along axis 1 "
                                      "(expected [4] or [4,1])"));
    CHECK(Logsumexp(handle.handle, 1, keep_2.desc, o.x.desc).status == SMX_STATUS_BAD_PARAM_SHAPE);
    CHECK(Logsumexp(handle.handle, 0, o.rows_f32.desc, o.x.desc).status == SMX_STATUS_BAD_PARAM_SHAPE);
    CHECK(Logsumexp(handle.handle, 0, rows_6.desc, o.x.desc).status == SMX_STATUS_SUCCESS);  // per column

    TensorDesc index_rows_5(SMX_DTYPE_I64, {5, 2}, {}), out_k3(SMX_DTYPE_F32, {4, 3}, {});
    CHECK(Gather(handle.handle, 1, o.gathered_f32.desc, o.x.desc, index_rows_5.desc).status == SMX_STATUS_BAD_PARAM_SHAPE);
    CHECK_THAT(last_error(), Contains("index shape [5,2] is not x shape [4,6] with axis 1 of any size"));
    CHECK(Gather(handle.handle, 1, out_k3.desc, o.x.desc, o.gathered_i64.desc).status == SMX_STATUS_BAD_PARAM_SHAPE);
    CHECK_THAT(last_error(), Contains("out shape [4,3] != index shape [4,2]"));

    TensorDesc two_losses(SMX_DTYPE_F32, {2}, {});
    CHECK(CrossEntropy(handle.handle, 1, nullptr, two_losses.desc, nullptr, nullptr, o.x.desc, o.rows_i64.desc).status ==
          SMX_STATUS_BAD_PARAM_SHAPE);
    CHECK_THAT(last_error(), Contains("loss shape [2] holds 2 elements; a reduced loss is one element"));
    TensorDesc dlogits_wrong(SMX_DTYPE_F32, {4, 7}, {});
    CHECK(CrossEntropy(handle.handle, 1, nullptr, o.one_f32.desc, nullptr, dlogits_wrong.desc, o.x.desc,
                       o.rows_i64.desc)
              .status == SMX_STATUS_BAD_PARAM_SHAPE);
    CHECK_THAT(last_error(), Contains("dlogits shape [4,7] != logits shape [4,6]"));
    const smxCrossEntropyOptions_t none = cross_entropy_options(SMX_REDUCTION_NONE);
    CHECK(CrossEntropy(handle.handle, 1, &none, o.one_f32.desc, nullptr, nullptr, o.x.desc, o.rows_i64.desc).status ==
          SMX_STATUS_BAD_PARAM_SHAPE);
    CHECK_THAT(last_error(), Contains("loss shape [1] is not one element per row"));
}

TEST_CASE("the create calls refuse written outputs that overlap themselves", "[api]") {
    CpuHandle handle;
    Operands o;
    TensorDesc broadcast_rows(SMX_DTYPE_F32, {4}, {0}), broadcast_dlogits(SMX_DTYPE_F32, {4, 6}, {0, 1});
    CHECK(Logsumexp(handle.handle, 1, broadcast_rows.desc, o.x.desc).status == SMX_STATUS_BAD_PARAM_OVERLAP);
    CHECK_THAT(last_error(), Contains("out overlaps itself"));
    const smxCrossEntropyOptions_t none = cross_entropy_options(SMX_REDUCTION_NONE);
    CHECK(CrossEntropy(handle.handle, 1, &none, broadcast_rows.desc, nullptr, nullptr, o.x.desc, o.rows_i64.desc)
              .status == SMX_STATUS_BAD_PARAM_OVERLAP);
    CHECK_THAT(last_error(), Contains("loss overlaps itself"));
    CHECK(CrossEntropy(handle.handle, 1, nullptr, o.one_f32.desc, nullptr, broadcast_dlogits.desc, o.x.desc,
                       o.rows_i64.desc)
              .status == SMX_STATUS_BAD_PARAM_OVERLAP);
    CHECK_THAT(last_error(), Contains("dlogits overlaps itself"));
    // Inputs may broadcast: x with a zero stride, a target shared by every row.
    TensorDesc x_broadcast(SMX_DTYPE_F32, {4, 6}, {0, 1}), target_broadcast(SMX_DTYPE_I64, {4}, {0});
    CHECK(CrossEntropy(handle.handle, 1, nullptr, o.one_f32.desc, nullptr, nullptr, x_broadcast.desc,
                       target_broadcast.desc)
              .status == SMX_STATUS_SUCCESS);
}

TEST_CASE("cross-entropy options: NULL takes the defaults; size, reduction and label smoothing are checked", "[api]") {
    CpuHandle handle;
    Operands o;
    const auto create = [&](const smxCrossEntropyOptions_t* options) {
        return CrossEntropy(handle.handle, 1, options, o.one_f32.desc, nullptr, nullptr, o.x.desc, o.rows_i64.desc).status;
    };
    CHECK(create(nullptr) == SMX_STATUS_SUCCESS);
    smxCrossEntropyOptions_t options = SMX_CROSS_ENTROPY_OPTIONS_INIT;
    CHECK(options.reduction == SMX_REDUCTION_MEAN);
    CHECK(options.ignoreIndex == -100);
    CHECK(options.labelSmoothing == 0.0);
    CHECK(create(&options) == SMX_STATUS_SUCCESS);

    for (std::size_t size : {std::size_t{0}, sizeof(smxCrossEntropyOptions_t) - 1, std::size_t{4097}}) {
        options.size = size;
        CHECK(create(&options) == SMX_STATUS_BAD_PARAM);
        CHECK_THAT(last_error(), Contains("options->size " + std::to_string(size)));
    }
    // A newer caller's struct: its unknown tail is accepted while zero, refused once set.
    struct Newer {
        smxCrossEntropyOptions_t known;
        std::uint64_t unknown;
    } newer{};
    newer.known = SMX_CROSS_ENTROPY_OPTIONS_INIT;
    newer.known.size = sizeof(Newer);
    CHECK(create(&newer.known) == SMX_STATUS_SUCCESS);
    newer.unknown = 1;
    CHECK(create(&newer.known) == SMX_STATUS_NOT_SUPPORTED);
    CHECK_THAT(last_error(), Contains("an option of a newer version"));

    options = SMX_CROSS_ENTROPY_OPTIONS_INIT;
    for (int reduction : {-1, 3}) {
        std::memcpy(&options.reduction, &reduction, sizeof reduction);
        CHECK(create(&options) == SMX_STATUS_BAD_PARAM_MODE);
        CHECK_THAT(last_error(), Contains("reduction " + std::to_string(reduction) + " is not an smxLossReduction_t"));
    }
    options = SMX_CROSS_ENTROPY_OPTIONS_INIT;
    for (double eps : {-0.01, 1.01, std::nan("")}) {
        options.labelSmoothing = eps;
        CHECK(create(&options) == SMX_STATUS_BAD_PARAM);
        CHECK_THAT(last_error(), Contains("labelSmoothing") && Contains("outside [0, 1]"));
    }
    for (double eps : {0.0, 1.0}) {
        options.labelSmoothing = eps;
        CHECK(create(&options) == SMX_STATUS_SUCCESS);
    }
}

// ---- queries and destroy --------------------------------------------------------------------------------

TEST_CASE("the workspace and plan queries answer the CPU plan and refuse NULL outputs", "[api]") {
    CpuHandle handle;
    Operands o;
    Logsumexp logsumexp(handle.handle, 1, o.rows_f32.desc, o.x.desc);
    Gather gather(handle.handle, 1, o.gathered_f32.desc, o.x.desc, o.gathered_i64.desc);
    CrossEntropy mean(handle.handle, 1, nullptr, o.one_f32.desc, nullptr, nullptr, o.x.desc, o.rows_i64.desc);
    REQUIRE(logsumexp.status == SMX_STATUS_SUCCESS);
    REQUIRE(gather.status == SMX_STATUS_SUCCESS);
    REQUIRE(mean.status == SMX_STATUS_SUCCESS);
    std::size_t bytes = 99;
    CHECK(smxGetLogsumexpWorkspaceSize(logsumexp.desc, &bytes) == SMX_STATUS_SUCCESS);
    CHECK(bytes == 0);
    CHECK(smxGetLogSoftmaxGatherWorkspaceSize(gather.desc, &bytes) == SMX_STATUS_SUCCESS);
    CHECK(bytes == 0);
    CHECK(smxGetCrossEntropyWorkspaceSize(mean.desc, &bytes) == SMX_STATUS_SUCCESS);
    CHECK(bytes == 4 * sizeof(double));  // a reduced loss keeps each row's loss
    const char* plan = nullptr;
    CHECK(smxGetLogsumexpPlan(logsumexp.desc, &plan) == SMX_STATUS_SUCCESS);
    CHECK_THAT(plan, Contains("cpu reference layout=rows threads=1"));
    CHECK(smxGetLogSoftmaxGatherPlan(gather.desc, &plan) == SMX_STATUS_SUCCESS);
    CHECK_THAT(plan, Contains("cpu reference"));
    CHECK(smxGetCrossEntropyPlan(mean.desc, &plan) == SMX_STATUS_SUCCESS);
    CHECK_THAT(plan, Contains("cpu reference"));

    CHECK(smxGetLogsumexpWorkspaceSize(logsumexp.desc, nullptr) == SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK(smxGetLogSoftmaxGatherPlan(gather.desc, nullptr) == SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK(smxGetCrossEntropyWorkspaceSize(nullptr, &bytes) == SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK(smxGetCrossEntropyPlan(nullptr, &plan) == SMX_STATUS_BAD_PARAM_NULL_POINTER);
}

TEST_CASE("each descriptor kind is refused where another is taken, and destroy of NULL is a no-op", "[api]") {
    CpuHandle handle;
    Operands o;
    Logsumexp logsumexp(handle.handle, 1, o.rows_f32.desc, o.x.desc);
    REQUIRE(logsumexp.status == SMX_STATUS_SUCCESS);
    const auto as_gather = reinterpret_cast<smxLogSoftmaxGatherDescriptor_t>(logsumexp.desc);
    const auto as_cross_entropy = reinterpret_cast<smxCrossEntropyDescriptor_t>(logsumexp.desc);
    const auto tensor_as_logsumexp = reinterpret_cast<smxLogsumexpDescriptor_t>(o.x.desc);
    HostTensor x = make_tensor(SMX_DTYPE_F32, {4, 6}), out = make_tensor(SMX_DTYPE_F32, {4, 2});
    CHECK(smxLogSoftmaxGather(as_gather, nullptr, 0, out.data(), x.data(), x.data(), nullptr) == SMX_STATUS_BAD_PARAM_OBJECT);
    CHECK(last_error() == not_live("desc", "smxLogSoftmaxGatherDescriptor_t"));
    CHECK(smxCrossEntropy(as_cross_entropy, nullptr, 0, out.data(), nullptr, nullptr, x.data(), x.data(), nullptr) ==
          SMX_STATUS_BAD_PARAM_OBJECT);
    CHECK(smxLogsumexp(tensor_as_logsumexp, nullptr, 0, out.data(), x.data(), nullptr) == SMX_STATUS_BAD_PARAM_OBJECT);
    CHECK(smxDestroyCrossEntropyDescriptor(as_cross_entropy) == SMX_STATUS_BAD_PARAM_OBJECT);
    CHECK(smxDestroyLogSoftmaxGatherDescriptor(as_gather) == SMX_STATUS_BAD_PARAM_OBJECT);
    CHECK(smxDestroyLogsumexpDescriptor(tensor_as_logsumexp) == SMX_STATUS_BAD_PARAM_OBJECT);
    CHECK(smxDestroyLogsumexpDescriptor(nullptr) == SMX_STATUS_SUCCESS);
    CHECK(smxDestroyLogSoftmaxGatherDescriptor(nullptr) == SMX_STATUS_SUCCESS);
    CHECK(smxDestroyCrossEntropyDescriptor(nullptr) == SMX_STATUS_SUCCESS);
}

TEST_CASE("a destroyed log-probability descriptor is refused by its call and its destroy", "[api][freed_memory]") {
    CpuHandle handle;
    Operands o;
    smxCrossEntropyDescriptor_t destroyed = nullptr;
    REQUIRE(smxCreateCrossEntropyDescriptor(handle.handle, &destroyed, 1, nullptr, o.one_f32.desc, nullptr, nullptr,
                                            o.x.desc, o.rows_i64.desc) == SMX_STATUS_SUCCESS);
    REQUIRE(smxDestroyCrossEntropyDescriptor(destroyed) == SMX_STATUS_SUCCESS);
    // Nothing is allocated from here to the calls, so nothing can have reused the descriptor's memory.
    const smxStatus_t call = smxCrossEntropy(destroyed, nullptr, 0, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
    const smxStatus_t again = smxDestroyCrossEntropyDescriptor(destroyed);
    CHECK(call == SMX_STATUS_BAD_PARAM_OBJECT);
    CHECK(again == SMX_STATUS_BAD_PARAM_OBJECT);
}

// ---- compute calls --------------------------------------------------------------------------------------

TEST_CASE("the compute calls refuse NULL data pointers where there are elements, and accept them where not",
          "[api]") {
    CpuHandle handle;
    Operands o;
    HostTensor x = make_tensor(SMX_DTYPE_F32, {4, 6}), rows = make_tensor(SMX_DTYPE_F32, {4});
    HostTensor index = make_tensor(SMX_DTYPE_I64, {4, 2}), target = make_tensor(SMX_DTYPE_I64, {4});
    fill_random(x, test_rng());
    Logsumexp logsumexp(handle.handle, 1, o.rows_f32.desc, o.x.desc);
    CHECK(smxLogsumexp(logsumexp.desc, nullptr, 0, rows.data(), nullptr, nullptr) == SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK_THAT(last_error(), Contains("x is NULL but the tensor has 24 elements"));
    CHECK(smxLogsumexp(logsumexp.desc, nullptr, 0, nullptr, x.data(), nullptr) == SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK_THAT(last_error(), Contains("out is NULL but the tensor has 4 elements"));
    CHECK(smxLogsumexp(nullptr, nullptr, 0, rows.data(), x.data(), nullptr) == SMX_STATUS_BAD_PARAM_NULL_POINTER);
    Gather gather(handle.handle, 1, o.gathered_f32.desc, o.x.desc, o.gathered_i64.desc);
    CHECK(smxLogSoftmaxGather(gather.desc, nullptr, 0, rows.data(), x.data(), nullptr, nullptr) ==
          SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK_THAT(last_error(), Contains("index is NULL but the tensor has 8 elements"));
    CrossEntropy with_lse(handle.handle, 1, nullptr, o.one_f32.desc, o.rows_f32.desc, nullptr, o.x.desc,
                          o.rows_i64.desc);
    std::vector<double> workspace(4);
    CHECK(smxCrossEntropy(with_lse.desc, workspace.data(), 32, rows.data(), nullptr, nullptr, x.data(), target.data(),
                          nullptr) == SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK_THAT(last_error(), Contains("lse is NULL but the tensor has 4 elements"));
    CHECK(smxCrossEntropy(with_lse.desc, workspace.data(), 32, rows.data(), rows.data(), nullptr, x.data(), nullptr,
                          nullptr) == SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK_THAT(last_error(), Contains("target is NULL"));

    // Zero rows, zero K, an empty axis: only what has elements needs a pointer.
    TensorDesc no_rows(SMX_DTYPE_F32, {0, 6}, {}), no_rows_out(SMX_DTYPE_F32, {0}, {}), no_rows_target(SMX_DTYPE_I64, {0}, {});
    Logsumexp empty(handle.handle, 1, no_rows_out.desc, no_rows.desc);
    CHECK(smxLogsumexp(empty.desc, nullptr, 0, nullptr, nullptr, nullptr) == SMX_STATUS_SUCCESS);
    TensorDesc k0_index(SMX_DTYPE_I64, {4, 0}, {}), k0_out(SMX_DTYPE_F32, {4, 0}, {});
    Gather k0(handle.handle, 1, k0_out.desc, o.x.desc, k0_index.desc);
    CHECK(smxLogSoftmaxGather(k0.desc, nullptr, 0, nullptr, nullptr, nullptr, nullptr) == SMX_STATUS_SUCCESS);
    TensorDesc empty_axis(SMX_DTYPE_F32, {4, 0}, {});
    Logsumexp over_nothing(handle.handle, 1, o.rows_f32.desc, empty_axis.desc);
    poison(rows);
    CHECK(smxLogsumexp(over_nothing.desc, nullptr, 0, rows.data(), nullptr, nullptr) == SMX_STATUS_SUCCESS);
    CHECK(rows.get(3) == -std::numeric_limits<double>::infinity());
    CrossEntropy zero_rows(handle.handle, 1, nullptr, o.one_f32.desc, nullptr, nullptr, no_rows.desc, no_rows_target.desc);
    HostTensor loss = make_tensor(SMX_DTYPE_F32, {1});
    CHECK(smxCrossEntropy(zero_rows.desc, nullptr, 0, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr) ==
          SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK_THAT(last_error(), Contains("loss is NULL but the tensor has 1 elements"));
    CHECK(smxCrossEntropy(zero_rows.desc, nullptr, 0, loss.data(), nullptr, nullptr, nullptr, nullptr, nullptr) ==
          SMX_STATUS_SUCCESS);
    CHECK(std::isnan(loss.get(0)));
}

TEST_CASE("the compute calls refuse a short, NULL or misaligned workspace and misaligned data", "[api]") {
    CpuHandle handle;
    Operands o;
    HostTensor x = make_tensor(SMX_DTYPE_F32, {4, 6}, {}, 1), loss = make_tensor(SMX_DTYPE_F32, {1});
    HostTensor target = make_tensor(SMX_DTYPE_I64, {4});
    fill_random(x, test_rng());
    fill_indices(target, test_rng(), 0, 5);
    CrossEntropy mean(handle.handle, 1, nullptr, o.one_f32.desc, nullptr, nullptr, o.x.desc, o.rows_i64.desc);
    std::vector<double> workspace(8);
    CHECK(smxCrossEntropy(mean.desc, workspace.data(), 31, loss.data(), nullptr, nullptr, x.data(), target.data(),
                          nullptr) == SMX_STATUS_BAD_PARAM_WORKSPACE);
    CHECK_THAT(last_error(), Contains("workspace of 31 bytes is smaller than the 32 bytes this plan needs"));
    CHECK(smxCrossEntropy(mean.desc, nullptr, 32, loss.data(), nullptr, nullptr, x.data(), target.data(), nullptr) ==
          SMX_STATUS_BAD_PARAM_WORKSPACE);
    auto* misaligned = reinterpret_cast<unsigned char*>(workspace.data()) + 8;
    if (reinterpret_cast<std::uintptr_t>(misaligned) % 16 == 0) misaligned += 8;
    CHECK(smxCrossEntropy(mean.desc, misaligned, 32, loss.data(), nullptr, nullptr, x.data(), target.data(), nullptr) ==
          SMX_STATUS_BAD_PARAM_ALIGNMENT);
    auto* aligned = reinterpret_cast<double*>(reinterpret_cast<std::uintptr_t>(misaligned + 8) / 16 * 16);
    CHECK(smxCrossEntropy(mean.desc, aligned, 32, loss.data(), nullptr, nullptr, x.data(), target.data(), nullptr) ==
          SMX_STATUS_SUCCESS);
    CHECK(std::isfinite(loss.get(0)));
    const auto* odd_x = static_cast<const unsigned char*>(x.data()) + 1;
    CHECK(smxCrossEntropy(mean.desc, aligned, 32, loss.data(), nullptr, nullptr, odd_x, target.data(), nullptr) ==
          SMX_STATUS_BAD_PARAM_ALIGNMENT);
    CHECK_THAT(last_error(), Contains("logits pointer") && Contains("not aligned to its element size"));
    Logsumexp logsumexp(handle.handle, 1, o.rows_f32.desc, o.x.desc);
    CHECK(smxLogsumexp(logsumexp.desc, misaligned, 0, loss.data(), x.data(), nullptr) == SMX_STATUS_BAD_PARAM_ALIGNMENT);
}

TEST_CASE("outputs may not overlap inputs or each other; dlogits may be the logits in place with their layout",
          "[api]") {
    CpuHandle handle;
    Operands o;
    HostTensor x = make_tensor(SMX_DTYPE_F32, {4, 6}), target = make_tensor(SMX_DTYPE_I64, {4});
    fill_random(x, test_rng());
    fill_indices(target, test_rng(), 0, 5);
    float* x_data = static_cast<float*>(x.data());
    Logsumexp logsumexp(handle.handle, 1, o.rows_f32.desc, o.x.desc);
    CHECK(smxLogsumexp(logsumexp.desc, nullptr, 0, x_data + 20, x_data, nullptr) == SMX_STATUS_BAD_PARAM_OVERLAP);
    CHECK_THAT(last_error(), Contains("out") && Contains("overlaps x"));
    Gather gather(handle.handle, 1, o.gathered_f32.desc, o.x.desc, o.gathered_i64.desc);
    HostTensor index = make_tensor(SMX_DTYPE_I64, {4, 2});
    CHECK(smxLogSoftmaxGather(gather.desc, nullptr, 0, index.data(), x_data, index.data(), nullptr) ==
          SMX_STATUS_BAD_PARAM_OVERLAP);
    CHECK_THAT(last_error(), Contains("overlaps index"));

    const smxCrossEntropyOptions_t none = cross_entropy_options(SMX_REDUCTION_NONE);
    CrossEntropy full(handle.handle, 1, &none, o.rows_f32.desc, o.rows_f32.desc, o.x.desc, o.x.desc, o.rows_i64.desc);
    REQUIRE(full.status == SMX_STATUS_SUCCESS);
    HostTensor loss = make_tensor(SMX_DTYPE_F32, {4}), lse = make_tensor(SMX_DTYPE_F32, {4});
    HostTensor dlogits = make_tensor(SMX_DTYPE_F32, {4, 6});
    CHECK(smxCrossEntropy(full.desc, nullptr, 0, loss.data(), loss.data(), dlogits.data(), x.data(), target.data(),
                          nullptr) == SMX_STATUS_BAD_PARAM_OVERLAP);
    CHECK_THAT(last_error(), Contains("loss") && Contains("overlaps lse"));
    CHECK(smxCrossEntropy(full.desc, nullptr, 0, loss.data(), lse.data(), dlogits.data(), x.data(), target.data(),
                          nullptr) == SMX_STATUS_SUCCESS);
    // In place: same pointer, same layout.
    const CrossEntropyReference ref = reference_cross_entropy(x, target, 1, none);
    CHECK(smxCrossEntropy(full.desc, nullptr, 0, loss.data(), lse.data(), x.data(), x.data(), target.data(), nullptr) ==
          SMX_STATUS_SUCCESS);
    CHECK(compare_to_scaled_reference(x, ref.dlogits) == "");
    // Half a row off is not in place.
    HostTensor wide = make_tensor(SMX_DTYPE_F32, {5, 6});
    float* wide_data = static_cast<float*>(wide.data());
    CHECK(smxCrossEntropy(full.desc, nullptr, 0, loss.data(), lse.data(), wide_data + 3, wide_data, target.data(),
                          nullptr) == SMX_STATUS_BAD_PARAM_OVERLAP);
    CHECK_THAT(last_error(), Contains("in-place needs dlogits == logits"));
    // Another layout over the same bytes is not in place either.
    TensorDesc transposed(SMX_DTYPE_F32, {4, 6}, {1, 4});
    CrossEntropy other_layout(handle.handle, 1, &none, o.rows_f32.desc, nullptr, transposed.desc, o.x.desc, o.rows_i64.desc);
    CHECK(smxCrossEntropy(other_layout.desc, nullptr, 0, loss.data(), nullptr, x.data(), x.data(), target.data(),
                          nullptr) == SMX_STATUS_BAD_PARAM_OVERLAP);
    // The target may not be written over either.
    CHECK(smxCrossEntropy(full.desc, nullptr, 0, target.data(), lse.data(), dlogits.data(), x.data(), target.data(),
                          nullptr) == SMX_STATUS_BAD_PARAM_OVERLAP);
    CHECK_THAT(last_error(), Contains("loss") && Contains("overlaps target"));
}

TEST_CASE("pointers of outputs a cross-entropy descriptor does not have are ignored", "[api]") {
    CpuHandle handle;
    Operands o;
    HostTensor x = make_tensor(SMX_DTYPE_F32, {4, 6}), target = make_tensor(SMX_DTYPE_I64, {4});
    fill_random(x, test_rng());
    fill_indices(target, test_rng(), 0, 5);
    const smxCrossEntropyOptions_t none = cross_entropy_options(SMX_REDUCTION_NONE);
    CrossEntropy loss_only(handle.handle, 1, &none, o.rows_f32.desc, nullptr, nullptr, o.x.desc, o.rows_i64.desc);
    HostTensor loss = make_tensor(SMX_DTYPE_F32, {4});
    const std::vector<unsigned char> before = x.storage;
    // lse and dlogits point into x: they would overlap if they were used.
    CHECK(smxCrossEntropy(loss_only.desc, nullptr, 0, loss.data(), x.data(), x.data(), x.data(), target.data(),
                          nullptr) == SMX_STATUS_SUCCESS);
    CHECK(x.storage == before);
    CHECK(compare_to_scaled_reference(loss, reference_cross_entropy(x, target, 1, none).loss) == "");
}
