// logging.cpp - spdlog behind smx's log: a logger whose one sink goes to the user's callback or stderr.
//
// The level lives in an atomic so a disabled log costs one load. It starts "unset": the first query
// reads SMX_LOG_LEVEL; without it the library stays silent.
#include "core/logging.hpp"

#include <spdlog/details/null_mutex.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>

#include "core/enum_value.hpp"
#include "core/error.hpp"

namespace smx {
namespace {

constexpr int kLevelUnset = -1;
std::atomic<int> g_level{kLevelUnset};
std::atomic<bool> g_level_chosen{false};  // by the user or the environment, not by default

// The installed callback, and how many deliveries are running each of the last two callbacks installed
// (by the parity of g_callback_generation when they started): smxSetLogCallback waits until none runs
// the callback it replaced, so a caller may free what that callback uses as soon as it returns.
std::mutex g_callback_mutex;
std::condition_variable g_callback_done;
smxLogCallback_t g_callback = nullptr;
void* g_callback_user_data = nullptr;
unsigned g_callback_generation = 0;
int g_callback_deliveries[2] = {0, 0};
std::mutex g_callback_setter_mutex;  // one replacement (and its wait) at a time

// Whether this thread is inside the callback. Messages raised meanwhile on this thread (by smx calls the
// callback makes) are dropped: delivering them would re-enter the callback without end.
thread_local bool t_in_callback = false;

smxLogLevel_t from_spdlog(spdlog::level::level_enum level) {
    switch (level) {
        case spdlog::level::trace: return SMX_LOG_TRACE;
        case spdlog::level::debug: return SMX_LOG_DEBUG;
        case spdlog::level::info: return SMX_LOG_INFO;
        case spdlog::level::warn: return SMX_LOG_WARN;
        default: return SMX_LOG_ERROR;
    }
}

spdlog::level::level_enum to_spdlog(smxLogLevel_t level) {
    switch (level) {
        case SMX_LOG_TRACE: return spdlog::level::trace;
        case SMX_LOG_DEBUG: return spdlog::level::debug;
        case SMX_LOG_INFO: return spdlog::level::info;
        case SMX_LOG_WARN: return spdlog::level::warn;
        case SMX_LOG_ERROR: return spdlog::level::err;
        case SMX_LOG_OFF: return spdlog::level::off;
    }
    return spdlog::level::off;
}

// The one sink: the installed callback if any, else standard error. No lock of spdlog's around it
// (null_mutex): the callback must be thread-safe anyway, and a lock held while it runs would deadlock a
// callback that calls smx.
class RoutingSink final : public spdlog::sinks::base_sink<spdlog::details::null_mutex> {
protected:
    void sink_it_(const spdlog::details::log_msg& msg) override {
        const std::string text(msg.payload.data(), msg.payload.size());
        smxLogCallback_t callback;
        void* user_data;
        unsigned slot;
        {
            std::lock_guard<std::mutex> lock(g_callback_mutex);
            callback = g_callback;
            user_data = g_callback_user_data;
            slot = g_callback_generation % 2;
            if (callback != nullptr) ++g_callback_deliveries[slot];
        }
        if (callback == nullptr) {
            std::fprintf(stderr, "[smx %s] %s\n", spdlog::level::to_string_view(msg.level).data(), text.c_str());
            return;
        }
        // Ends the delivery on every path: the flag is cleared, the caller's last error restored (smx calls
        // made by the callback must not change the one its caller is about to read) and the delivery
        // counted out.
        struct Delivery {
            unsigned slot;
            std::string last_error = smxGetLastErrorMessage();
            explicit Delivery(unsigned s) : slot(s) { t_in_callback = true; }
            ~Delivery() {
                t_in_callback = false;
                set_last_error(std::move(last_error));
                std::lock_guard<std::mutex> lock(g_callback_mutex);
                if (--g_callback_deliveries[slot] == 0) g_callback_done.notify_all();
            }
            Delivery(const Delivery&) = delete;
            Delivery& operator=(const Delivery&) = delete;
        } delivery(slot);
        try {
            callback(from_spdlog(msg.level), text.c_str(), user_data);
        } catch (...) {
            // A callback must not throw (smx.h); one that does loses its message and changes nothing else.
        }
    }
    void flush_() override {}
};

spdlog::logger& logger() {
    // Not registered in spdlog's global registry: an application's own spdlog use stays untouched.
    static spdlog::logger instance = [] {
        spdlog::logger created("smx", std::make_shared<RoutingSink>());
        // spdlog's default handler prints its own failures (e.g. no memory to format) to standard error.
        created.set_error_handler([](const std::string&) {});
        return created;
    }();
    return instance;
}

int parse_level(const char* text) {
    if (text == nullptr || *text == '\0') return kLevelUnset;
    static const struct { const char* name; smxLogLevel_t level; } kNames[] = {
        {"trace", SMX_LOG_TRACE}, {"debug", SMX_LOG_DEBUG}, {"info", SMX_LOG_INFO},
        {"warn", SMX_LOG_WARN},   {"warning", SMX_LOG_WARN}, {"error", SMX_LOG_ERROR},
        {"off", SMX_LOG_OFF},     {"0", SMX_LOG_TRACE},     {"1", SMX_LOG_DEBUG},
        {"2", SMX_LOG_INFO},      {"3", SMX_LOG_WARN},      {"4", SMX_LOG_ERROR}, {"6", SMX_LOG_OFF}};
    for (const auto& entry : kNames) {
        if (strcasecmp(text, entry.name) == 0) return entry.level;
    }
    return kLevelUnset;
}

void apply_level(int level) {
    g_level.store(level, std::memory_order_relaxed);
    logger().set_level(to_spdlog(static_cast<smxLogLevel_t>(level)));
}

int current_level() {
    int level = g_level.load(std::memory_order_relaxed);
    if (level != kLevelUnset) return level;
    static std::once_flag once;
    std::call_once(once, [] {
        const int from_env = parse_level(std::getenv("SMX_LOG_LEVEL"));
        if (from_env != kLevelUnset) g_level_chosen.store(true);
        int expected = kLevelUnset;  // an explicit smxSetLogLevel that raced us wins
        if (g_level.compare_exchange_strong(expected, from_env == kLevelUnset ? SMX_LOG_OFF : from_env)) {
            logger().set_level(to_spdlog(static_cast<smxLogLevel_t>(g_level.load())));
        }
    });
    return g_level.load(std::memory_order_relaxed);
}

bool is_level(int level) {
    return level == SMX_LOG_TRACE || level == SMX_LOG_DEBUG || level == SMX_LOG_INFO || level == SMX_LOG_WARN ||
           level == SMX_LOG_ERROR || level == SMX_LOG_OFF;
}

}  // namespace

bool log_enabled(smxLogLevel_t level) {
    const int current = current_level();
    return current != SMX_LOG_OFF && static_cast<int>(level) >= current;
}

void log_message(smxLogLevel_t level, const std::string& message) {
    if (t_in_callback) return;  // raised by an smx call the callback made (see t_in_callback)
    logger().log(to_spdlog(level), "{}", message);
}

}  // namespace smx

extern "C" {

SMX_API smxStatus_t smxSetLogLevel(smxLogLevel_t level_argument) {
    const int level = smx::raw_enum_value(level_argument);
    if (!smx::is_level(level)) {
        return smx::fail(SMX_STATUS_BAD_PARAM, "log level {} is not an smxLogLevel_t (0..4, or 6 for off)", level);
    }
    smx::current_level();  // settle the environment default first so it cannot overwrite this choice
    smx::g_level_chosen.store(true);
    smx::apply_level(level);
    return SMX_STATUS_SUCCESS;
}

SMX_API smxStatus_t smxSetLogCallback(smxLogCallback_t callback, void* userData) {
    if (smx::t_in_callback) {  // it would wait for the delivery it is part of
        return smx::fail(SMX_STATUS_NOT_SUPPORTED, "smxSetLogCallback cannot be called from inside the log callback");
    }
    {
        std::lock_guard<std::mutex> setter(smx::g_callback_setter_mutex);
        std::unique_lock<std::mutex> lock(smx::g_callback_mutex);
        const unsigned replaced = smx::g_callback_generation % 2;
        smx::g_callback = callback;
        smx::g_callback_user_data = userData;
        ++smx::g_callback_generation;  // deliveries from now on count in the other slot
        smx::g_callback_done.wait(lock, [replaced] { return smx::g_callback_deliveries[replaced] == 0; });
    }
    smx::current_level();
    if (callback != nullptr && !smx::g_level_chosen.load()) smx::apply_level(SMX_LOG_INFO);
    return SMX_STATUS_SUCCESS;
}

}  // extern "C"
