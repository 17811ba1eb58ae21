// vocab_parallel_runner.hpp - the vocabulary-parallel operators run as W ranks would run them, in one process:
// x (and y, dlogits) split along the axis into W shards that are views of the whole tensors, each rank's
// statistics written straight into its slice of the gathered tensor (what an all-gather would leave there), then
// each rank's step 3 on its shard. The whole tensors then hold what the ranks together computed, to compare with
// the single-device references. Pointers may be host or device memory: the caller's handle decides.
#pragma once

#include <cstdint>
#include <vector>

#include "support/reference.hpp"

namespace smx_test {

// A tensor as a runner sees it: its layout from a HostTensor, its data from anywhere (host or device).
struct Operand {
    const HostTensor* layout;
    void* data;
};

// Where each rank's shard lies along the axis: rank w holds [starts[w], starts[w] + lengths[w]).
struct Sharding {
    int axis = 0;
    std::vector<std::int64_t> starts;
    std::vector<std::int64_t> lengths;
    int ranks() const { return static_cast<int>(starts.size()); }
};

// n split over `ranks` ranks as evenly as possible, the remainder to the first ranks; with `empty_rank` >= 0
// that rank holds nothing and the others share n.
Sharding split_axis(std::int64_t n, int axis, int ranks, int empty_rank = -1);

// The gathered statistics tensor of `ranks` ranks of `width` values per row for x's shape along `axis`: x's
// shape with the axis of size ranks * width, the statistics axis outermost (its stride the row count), so each
// rank's block is contiguous, as an all-gather leaves it.
HostTensor make_gathered_statistics(smxDataType_t dtype, const std::vector<std::int64_t>& x_shape, int axis, int ranks,
                                    std::int64_t width);

// Targets in [0, n) with every third row `ignore_index`, and the first rows at the shards' first and last classes.
void fill_shard_targets(HostTensor& target, const Sharding& sharding, std::int64_t n, std::int64_t ignore_index);

// Hands out workspace memory of the handle's kind; what it hands out lives until it is destroyed.
class WorkspaceSource {
public:
    virtual ~WorkspaceSource() = default;
    virtual void* get(std::size_t bytes) = 0;
};

// Host memory, 16-byte aligned, for CPU handles.
class HostWorkspaceSource final : public WorkspaceSource {
public:
    void* get(std::size_t bytes) override;

private:
    std::vector<std::vector<double>> blocks_;
};

// Step 1 on every rank: stats (gathered layout, width 2, or 5 with a target) from the ranks' shards of x.
smxStatus_t run_shard_statistics(smxHandle_t handle, WorkspaceSource& workspace, const Sharding& sharding,
                                 const Operand& stats, const Operand& x, const Operand* target, void* stream = nullptr);

// Step 3 of softmax on every rank: each rank writes its shard of y from its shard of x and the gathered stats.
smxStatus_t run_shard_softmax(smxHandle_t handle, WorkspaceSource& workspace, const Sharding& sharding, bool log_mode,
                              const Operand& y, const Operand& x, const Operand& stats, void* stream = nullptr);

// Step 3 of logsumexp, as any rank runs it: out per row from the gathered stats.
smxStatus_t run_shard_logsumexp(smxHandle_t handle, WorkspaceSource& workspace, int axis, const Operand& out,
                                const Operand& stats, void* stream = nullptr);

// Step 3 of cross-entropy on every rank: losses[w] (and lses[w], where lses is not empty) are rank w's own
// outputs; dlogits, where its data is not NULL, gets every rank's shard (logits itself: in place).
smxStatus_t run_shard_cross_entropy(smxHandle_t handle, WorkspaceSource& workspace, const Sharding& sharding,
                                    const smxCrossEntropyOptions_t& options, const std::vector<Operand>& losses,
                                    const std::vector<Operand>& lses, const Operand& dlogits, const Operand& logits,
                                    const Operand& target, const Operand& stats, void* stream = nullptr);

// ---- the checks every backend's tests run -----------------------------------------------------------------

// Where the runs of one check happen: a handle, its workspace, and the memory its tensors live in.
class ShardBackend {
public:
    virtual ~ShardBackend() = default;
    virtual smxHandle_t handle() = 0;
    virtual WorkspaceSource& workspace() = 0;
    // The memory a run reads and writes for `t`: t's own storage (CPU), or a device copy of it made now (CUDA).
    virtual void* place(HostTensor& t) = 0;
    // Brings what a run wrote at place(t) back into t (a download on CUDA; nothing on the CPU).
    virtual void fetch(HostTensor& t) = 0;
};

class HostBackend final : public ShardBackend {
public:
    HostBackend();
    smxHandle_t handle() override { return handle_.handle; }
    WorkspaceSource& workspace() override { return workspace_; }
    void* place(HostTensor& t) override { return t.data(); }
    void fetch(HostTensor&) override {}

private:
    Handle handle_{SMX_DEVICE_CPU, 0};
    HostWorkspaceSource workspace_;
};

// Each check runs every rank's steps (statistics into the poisoned gathered tensor, then step 3 into poisoned
// outputs) and compares the whole tensors with the float64 references of the whole rows, with the tolerance of
// the output's dtype, or of the statistics' (f32 for every x but f64) where that is larger. Returns "" when all
// is within tolerance, else what failed.
std::string check_sharded_softmax(ShardBackend& backend, const HostTensor& x, const Sharding& sharding, bool log_mode,
                                  smxDataType_t y_dtype);
std::string check_sharded_logsumexp(ShardBackend& backend, const HostTensor& x, const Sharding& sharding, bool keepdim);
// Also: every rank's loss and lse the same bits. dlogits in `dlogits_dtype` (row-major), or over the logits
// when `in_place`.
std::string check_sharded_cross_entropy(ShardBackend& backend, const HostTensor& logits, const HostTensor& target,
                                        const Sharding& sharding, const smxCrossEntropyOptions_t& options,
                                        smxDataType_t dlogits_dtype, bool in_place);

}  // namespace smx_test
