// peers.hpp - the backend's face of the one-read vocabulary-parallel softmax (smx.h, "Vocabulary-parallel in one
// read"): a rank's mailbox with the other ranks' mapped (PeerMailbox), and the fused kernel's plan on it. Only
// the CUDA backend makes them; the C entry points (peers_api.cpp) validate and forward.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "ops/vocab_parallel/info.hpp"
#include "smx/smx.h"

namespace smx {

class PeerMailbox {
public:
    virtual ~PeerMailbox() = default;
    virtual int ranks() const = 0;
    virtual int rank() const = 0;
    virtual std::int64_t max_rows() const = 0;
    virtual bool connected() const = 0;
    // This rank's mailbox as SMX_SHARD_PEERS_HANDLE_BYTES bytes.
    virtual smxStatus_t export_handle(void* handle) const = 0;
    // Maps every other rank's mailbox from the ranks' handles, rank order.
    virtual smxStatus_t connect(const unsigned char* handles) = 0;
    // Rows whose wait ran out so far (synchronizes the device).
    virtual smxStatus_t timed_out_rows(std::int64_t* rows) const = 0;
};

// The longest shard row the fused kernel holds on chip for x of `dtype`; 0 for a dtype it does not take.
std::int64_t fused_shard_softmax_max_row_length(smxDataType_t dtype);

class FusedShardSoftmaxPlan {
public:
    virtual ~FusedShardSoftmaxPlan() = default;
    virtual const std::string& description() const = 0;
    // y = softmax (log-softmax) of the whole rows, the ranks' statistics exchanged through the mailboxes.
    virtual smxStatus_t run(void* y, const void* x, void* stream) const = 0;
};

}  // namespace smx
