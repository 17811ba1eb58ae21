// call.hpp - how a log-probability plan launches: a list of kernel launches, each with its own typed parameter
// block (the kernels of one plan take different structs, and the general kernel's index space leaves no room
// for a second one), bound to the call's pointers at run time and launched in order on the call's stream.
// Host code only. The counterpart of common/launch.hpp's FamilyCall, whose single block binds x and y.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "cuda/common/launch.hpp"
#include "cuda/logprobs/params.hpp"

namespace smx::cuda {

class LogprobsLaunch {
public:
    virtual ~LogprobsLaunch() = default;
    virtual smxStatus_t run(const LogprobsPointers& pointers, cudaStream_t stream) const = 0;
};

// One launch and its parameters; Params has bind(pointers).
template <class Params>
class TypedLogprobsLaunch final : public LogprobsLaunch {
public:
    TypedLogprobsLaunch(const Params& params, const Launch& launch) : launch_(launch) {
        static_cast<Params&>(params_) = params;
    }
    smxStatus_t run(const LogprobsPointers& pointers, cudaStream_t stream) const override {
        ParamBlock<Params> bound = params_;
        bound.bind(pointers);
        return launch_all(&launch_, 1, &bound, stream);
    }

private:
    ParamBlock<Params> params_;
    Launch launch_;
};

// A plan's launches in order, the workspace they need, and the text of each launch.
class LogprobsCall {
public:
    // dependent_launches: each launch after the plan's first begins while the one before it finishes
    // (Launch::after_previous; every log-probability kernel waits for its predecessor before touching memory).
    explicit LogprobsCall(bool dependent_launches = false) : dependent_launches_(dependent_launches) {}

    template <class Params>
    void add(const Params& params, Launch launch, std::string text) {
        launch.after_previous = dependent_launches_ && !launches_.empty();
        launches_.push_back(std::make_unique<TypedLogprobsLaunch<Params>>(params, launch));
        parts_.push_back(std::move(text));
    }
    // A part of the plan text that is not a launch (why nothing is launched, say).
    void note(std::string text) { parts_.push_back(std::move(text)); }
    void need_workspace(std::int64_t bytes) { workspace_ = std::max(workspace_, static_cast<std::size_t>(bytes)); }

    std::size_t workspace() const { return workspace_; }
    // The plan text users see: "cuda <family> | <launch> + <launch> ...", the family naming the main kernel.
    std::string text(const std::string& family) const {
        std::string text = "cuda " + family + " |";
        for (std::size_t i = 0; i < parts_.size(); ++i) text += (i == 0 ? " " : " + ") + parts_[i];
        return text;
    }
    smxStatus_t run(const LogprobsPointers& pointers, cudaStream_t stream) const {
        for (const auto& launch : launches_) SMX_RETURN_IF_ERROR(launch->run(pointers, stream));
        return SMX_STATUS_SUCCESS;
    }

private:
    std::vector<std::unique_ptr<LogprobsLaunch>> launches_;
    std::vector<std::string> parts_;
    std::size_t workspace_ = 0;
    bool dependent_launches_;
};

}  // namespace smx::cuda
