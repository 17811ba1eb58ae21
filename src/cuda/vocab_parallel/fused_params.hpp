// fused_params.hpp - the one-read vocabulary-parallel softmax kernel's face towards its host code (peers.cpp):
// the mailbox layout, the parameters and the instance getters. Plain C++: no CUDA types.
// The kernel (fused.cu): a CTA takes the next row (a per-rank counter), holds it in registers, publishes its
// (max, sum) into every rank's mailbox, waits for every rank's, combines them in rank order and writes y.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/vocab_parallel/params.hpp"
#include "smx/smx.h"

namespace smx::cuda {

// One rank's statistics of one row in a receiver's mailbox. Each value travels with the call's epoch in one
// naturally aligned 8-byte word (value bits low, epoch high), which a store writes and a load reads whole, so a
// reader that sees the epoch in both words has both values: no release or acquire ordering is needed.
struct MailboxSlot {
    unsigned long long stamped_max;
    unsigned long long stamped_sum;
};
static_assert(sizeof(MailboxSlot) == 16, "one 16-byte slot");

// A rank's own state beside its mailbox, in the same allocation (no peer writes it).
struct FusedControl {
    std::uint32_t epoch;           // calls made so far; the begin kernel counts it up
    std::uint32_t next_row;        // the row counter; the begin kernel resets it
    std::uint32_t broken;          // set once a wait ran out: later waits end at once
    std::uint32_t unused;
    unsigned long long timed_out_rows;
};

// Bytes from the allocation's start to the slots (cudaMalloc's alignment kept).
constexpr std::size_t kMailboxSlotsOffset = 256;
static_assert(sizeof(FusedControl) <= kMailboxSlotsOffset, "the control block fits before the slots");

// Slots of a mailbox: two sets (a call uses set epoch % 2, so a rank one call ahead never overwrites what a
// slower rank is still reading), each of max_rows rows of ranks slots (row r's rank w at r * ranks + w).
inline std::size_t mailbox_bytes(std::int64_t max_rows, int ranks) {
    return kMailboxSlotsOffset + 2 * static_cast<std::size_t>(max_rows) * static_cast<std::size_t>(ranks) *
                                     sizeof(MailboxSlot);
}

// How long a row waits for a peer before it gives up (the row becomes NaN and the group broken).
constexpr unsigned long long kPeerWaitLimitNs = 10ull * 1000 * 1000 * 1000;

struct FusedParams {
    const void* x = nullptr;
    void* y = nullptr;
    RowSpace space;
    OperandStrides x_strides;
    OperandStrides y_strides;
    std::int64_t row_len = 0;
    // Every rank's slots as this process addresses them (its own included), rank order.
    MailboxSlot* mailboxes[SMX_SHARD_PEERS_MAX_RANKS] = {};
    FusedControl* control = nullptr;
    std::int64_t max_rows = 0;
    int ranks = 1;
    int rank = 0;
    int log = 0;  // 1: log-softmax
};

constexpr int kFusedThreads = 512;
// Packs of 16 bytes a thread may hold: kFusedThreads * 16 * 16 bytes = 128 KiB of a row (65536 bf16 values).
constexpr int kFusedMaxPacksPerThread = 16;

// The instance holding `packs` 16-byte packs per thread (1, 2, 4, 8 or 16) for x and y of `dtype` (F16, BF16,
// F32); nullptr for others. vector: 16-byte loads and stores (contiguous rows of whole packs, 16-byte aligned),
// else element by element along the axis strides.
const void* fused_softmax_kernel(smxDataType_t dtype, int packs, bool vector);
// The one-thread kernel that opens a call: the epoch counted up, the row counter reset.
const void* fused_begin_kernel();

}  // namespace smx::cuda
