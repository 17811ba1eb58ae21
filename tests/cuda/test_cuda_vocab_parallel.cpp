// [cuda] the vocabulary-parallel operators on a CUDA handle, as W ranks run them in one process
// (support/vocab_parallel_runner.hpp, with every tensor in device memory), against the float64 references of the
// whole rows: both kernels of each step (16-byte packs on Rows, strided elsewhere), rows whose shards start
// unaligned, padded rows whose y is not aligned like x, rows over several CTAs, shards on both sides of the
// statistics kernel's CTA-size threshold, more rows than one grid.y holds,
// every dtype, special rows, every reduction and label smoothing, in place, and every rank's loss the same bits.
#include <catch2/catch.hpp>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cuda_helpers.hpp"
#include "support/logprobs_reference.hpp"
#include "support/vocab_parallel_runner.hpp"

#if SMX_TEST_WITH_CUDA

using namespace smx_test;

namespace {

const smxDataType_t kFloatTypes[] = {SMX_DTYPE_F16, SMX_DTYPE_BF16, SMX_DTYPE_F32, SMX_DTYPE_F64};

// Device workspaces, every byte 0xFF: the plans may assume nothing of their contents.
class DeviceWorkspaceSource final : public WorkspaceSource {
public:
    void* get(std::size_t bytes) override {
        if (bytes == 0) return nullptr;
        blocks_.emplace_back(bytes);
        SMX_REQUIRE_CUDA(cudaMemset(blocks_.back().get(), 0xFF, bytes));
        return blocks_.back().get();
    }

private:
    std::vector<DeviceBuffer> blocks_;
};

// Every tensor a check places gets a device copy of its whole storage; fetch waits for the device first.
class DeviceBackend final : public ShardBackend {
public:
    smxHandle_t handle() override { return handle_.get(); }
    WorkspaceSource& workspace() override { return workspace_; }
    void* place(HostTensor& t) override {
        auto copy = std::make_unique<DeviceTensor>(t);
        copy->upload(t);
        void* data = copy->data();
        copies_[&t] = std::move(copy);
        return data;
    }
    void fetch(HostTensor& t) override {
        SMX_REQUIRE_CUDA(cudaDeviceSynchronize());
        SMX_REQUIRE_CUDA(cudaGetLastError());
        copies_.at(&t)->download(t);
    }

private:
    CudaHandle handle_;
    DeviceWorkspaceSource workspace_;
    std::map<const HostTensor*, std::unique_ptr<DeviceTensor>> copies_;
};

struct Problem {
    std::vector<std::int64_t> shape;
    std::vector<std::int64_t> strides;
    int axis;
    const char* what;
};

// Rows (the packed kernels: shards starting anywhere), padded rows (x's rows aligned differently from a row-major
// y's, so some rows go element by element), rows longer than one CTA's chunk, spatial and general layouts (the
// strided kernels), a 1-d tensor.
const Problem kProblems[] = {
    {{16, 129}, {}, 1, "rows"},     {{8, 1000}, {1003, 1}, 1, "padded rows"}, {{3, 30001}, {}, 1, "long rows"},
    {{4, 33, 5}, {}, 1, "spatial"}, {{3, 10, 4}, {1, 12, 3}, 1, "general"},   {{19}, {}, 0, "1-d"},
};

std::vector<Sharding> shardings(std::int64_t n, int axis) {
    return {split_axis(n, axis, 1), split_axis(n, axis, 3, 1), split_axis(n, axis, 4)};
}

HostTensor random_x(smxDataType_t dtype, const Problem& problem, bool special) {
    HostTensor x = make_tensor(dtype, problem.shape, problem.strides);
    fill_random(x, test_rng());
    if (special) set_special_rows(x, problem.axis);
    return x;
}

// The plan texts of a shard's statistics and softmax on a CUDA handle.
std::string plans_of(const Problem& problem, smxDataType_t dtype) {
    CudaHandle handle;
    const HostTensor x = make_tensor(dtype, problem.shape, problem.strides);
    const HostTensor stats = make_gathered_statistics(dtype == SMX_DTYPE_F64 ? dtype : SMX_DTYPE_F32, problem.shape,
                                                      problem.axis, 1, SMX_SHARD_SOFTMAX_STATISTICS);
    const TensorDesc x_desc(x), stats_desc(stats);
    smxShardStatisticsDescriptor_t statistics = nullptr;
    smxShardSoftmaxDescriptor_t softmax = nullptr;
    SMX_REQUIRE_OK(smxCreateShardStatisticsDescriptor(handle.get(), &statistics, problem.axis, 0, stats_desc.desc,
                                                      x_desc.desc, nullptr));
    SMX_REQUIRE_OK(smxCreateShardSoftmaxDescriptor(handle.get(), &softmax, SMX_SOFTMAX, problem.axis, x_desc.desc,
                                                   x_desc.desc, stats_desc.desc));
    const char* statistics_plan = nullptr;
    const char* softmax_plan = nullptr;
    SMX_REQUIRE_OK(smxGetShardStatisticsPlan(statistics, &statistics_plan));
    SMX_REQUIRE_OK(smxGetShardSoftmaxPlan(softmax, &softmax_plan));
    const std::string text = std::string(statistics_plan) + " | " + softmax_plan;
    smxDestroyShardStatisticsDescriptor(statistics);
    smxDestroyShardSoftmaxDescriptor(softmax);
    return text;
}

}  // namespace

TEST_CASE("CUDA vocab-parallel plans take the packed kernels on Rows and the strided ones elsewhere",
          "[cuda][vocab_parallel]") {
    for (const Problem& problem : kProblems) {
        const std::string plans = plans_of(problem, SMX_DTYPE_BF16);
        INFO(problem.what << ": " << plans);
        const bool rows = std::string(problem.what) != "spatial" && std::string(problem.what) != "general";
        CHECK(plans.find(rows ? "statistics vector=1" : "statistics vector=0") != std::string::npos);
        CHECK(plans.find(rows ? "normalize vector=1" : "normalize vector=0") != std::string::npos);
    }
}

TEST_CASE("CUDA sharded softmax and log-softmax equal the reference on every kernel path, dtype pair and rank count",
          "[cuda][vocab_parallel]") {
    DeviceBackend backend;
    for (smxDataType_t x_dtype : kFloatTypes) {
        for (const Problem& problem : kProblems) {
            for (const Sharding& sharding : shardings(problem.shape[problem.axis], problem.axis)) {
                for (bool log_mode : {false, true}) {
                    const smxDataType_t y_dtype = kFloatTypes[(x_dtype + sharding.ranks() + log_mode) % 4];
                    INFO(dtype_name(x_dtype) << "->" << dtype_name(y_dtype) << " " << problem.what << " "
                                             << sharding.ranks() << " ranks, log " << log_mode);
                    CHECK(check_sharded_softmax(backend, random_x(x_dtype, problem, true), sharding, log_mode,
                                                y_dtype) == "");
                }
            }
        }
    }
}

TEST_CASE("CUDA sharded logsumexp equals the reference", "[cuda][vocab_parallel]") {
    DeviceBackend backend;
    for (smxDataType_t x_dtype : kFloatTypes) {
        for (const Problem& problem : kProblems) {
            for (const Sharding& sharding : shardings(problem.shape[problem.axis], problem.axis)) {
                INFO(dtype_name(x_dtype) << " " << problem.what << " " << sharding.ranks() << " ranks");
                CHECK(check_sharded_logsumexp(backend, random_x(x_dtype, problem, true), sharding,
                                              sharding.ranks() == 3) == "");
            }
        }
    }
}

TEST_CASE(
    "CUDA sharded cross-entropy equals the reference for every reduction, smoothing and dtype; every rank's "
    "loss the same bits; in place",
    "[cuda][vocab_parallel]") {
    DeviceBackend backend;
    const smxLossReduction_t reductions[] = {SMX_REDUCTION_NONE, SMX_REDUCTION_SUM, SMX_REDUCTION_MEAN};
    for (smxDataType_t dtype : kFloatTypes) {
        for (const Problem& problem : kProblems) {
            const std::int64_t n = problem.shape[problem.axis];
            for (const Sharding& sharding : shardings(n, problem.axis)) {
                for (smxLossReduction_t reduction : reductions) {
                    for (double eps : {0.0, 0.1}) {
                        const bool in_place = reduction == SMX_REDUCTION_SUM;
                        const smxDataType_t dlogits_dtype = in_place ? dtype : kFloatTypes[(dtype + reduction) % 4];
                        INFO(dtype_name(dtype)
                             << " " << problem.what << " " << sharding.ranks() << " ranks, reduction " << reduction
                             << " eps " << eps << " dlogits " << (in_place ? "in place" : dtype_name(dlogits_dtype)));
                        // Per-row losses with special rows (NaN would swallow a sum); f64's 1e308 rows included: their
                        // smoothing sum overflows to +inf, as the reference's does.
                        const bool special = reduction == SMX_REDUCTION_NONE;
                        HostTensor target = make_per_row_tensor(SMX_DTYPE_I64, problem.shape, problem.axis);
                        fill_shard_targets(target, sharding, n, eps > 0.0 ? 1 : -100);
                        CHECK(check_sharded_cross_entropy(backend, random_x(dtype, problem, special), target, sharding,
                                                          cross_entropy_options(reduction, eps > 0.0 ? 1 : -100, eps),
                                                          dlogits_dtype, in_place) == "");
                    }
                }
            }
        }
    }
}

TEST_CASE("CUDA vocab-parallel statistics take 512-thread CTAs from kStatisticsWideRowLen elements a row on",
          "[cuda][vocab_parallel]") {
    for (smxDataType_t dtype : {SMX_DTYPE_BF16, SMX_DTYPE_F32}) {
        const std::string below = plans_of({{2, 65535}, {}, 1, "just below"}, dtype);
        const std::string at = plans_of({{2, 65536}, {}, 1, "at"}, dtype);
        INFO(below << "\n" << at);
        CHECK(below.find("threads=256") != std::string::npos);
        CHECK(at.find("threads=512") != std::string::npos);
    }
}

// Shards on both sides of the statistics kernel's CTA-size threshold in one row: 65535 elements from an aligned
// start (256 threads), 65536 from an odd one (512 threads, an unaligned head), and 2 (no whole pack on most
// dtypes). 14 rows: every kind of special row (set_special_rows) once.
TEST_CASE("CUDA sharded operators on shards at the statistics kernel's CTA-size threshold", "[cuda][vocab_parallel]") {
    DeviceBackend backend;
    const Problem problem{{14, 131073}, {}, 1, "threshold shards"};
    const Sharding sharding{1, {0, 65535, 131071}, {65535, 65536, 2}};
    for (smxDataType_t dtype : kFloatTypes) {
        for (bool log_mode : {false, true}) {
            const smxDataType_t y_dtype = kFloatTypes[(dtype + log_mode) % 4];
            INFO(dtype_name(dtype) << "->" << dtype_name(y_dtype) << " log " << log_mode);
            CHECK(check_sharded_softmax(backend, random_x(dtype, problem, true), sharding, log_mode, y_dtype) == "");
        }
        INFO(dtype_name(dtype));
        CHECK(check_sharded_logsumexp(backend, random_x(dtype, problem, true), sharding, false) == "");
        for (smxLossReduction_t reduction : {SMX_REDUCTION_NONE, SMX_REDUCTION_SUM}) {
            const bool in_place = reduction == SMX_REDUCTION_SUM;
            const double eps = in_place ? 0.1 : 0.0;
            INFO("cross-entropy reduction " << reduction << (in_place ? " in place" : ""));
            HostTensor target = make_per_row_tensor(SMX_DTYPE_I64, problem.shape, 1);
            fill_shard_targets(target, sharding, problem.shape[1], -100);
            CHECK(check_sharded_cross_entropy(backend, random_x(dtype, problem, !in_place), target, sharding,
                                              cross_entropy_options(reduction, -100, eps), dtype, in_place) == "");
        }
    }
}

TEST_CASE("CUDA sharded operators over more rows than one grid holds", "[cuda][vocab_parallel]") {
    DeviceBackend backend;
    const Problem problem{{70000, 6}, {}, 1, "70000 rows"};
    const Sharding sharding = split_axis(6, 1, 2);
    CHECK(check_sharded_softmax(backend, random_x(SMX_DTYPE_F32, problem, true), sharding, false, SMX_DTYPE_F32) == "");
    HostTensor target = make_per_row_tensor(SMX_DTYPE_I32, problem.shape, 1);
    fill_shard_targets(target, sharding, 6, -100);
    CHECK(check_sharded_cross_entropy(backend, random_x(SMX_DTYPE_BF16, problem, false), target, sharding,
                                      cross_entropy_options(SMX_REDUCTION_MEAN, -100, 0.1), SMX_DTYPE_BF16,
                                      false) == "");
}

#endif  // SMX_TEST_WITH_CUDA
