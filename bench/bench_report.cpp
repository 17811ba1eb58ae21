// bench_report.cpp - the table and the JSON output of smx-bench.
#include "bench_report.hpp"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "bench_data.hpp"
#include "bench_device.hpp"

namespace smx_bench {
namespace {

std::string json_string(const std::string& text) {
    std::string quoted = "\"";
    for (char c : text) {
        switch (c) {
            case '"': quoted += "\\\""; break;
            case '\\': quoted += "\\\\"; break;
            case '\n': quoted += "\\n"; break;
            case '\t': quoted += "\\t"; break;
            default:
                if (static_cast<unsigned char>(c) < 0x20) {
                    char escaped[8];
                    std::snprintf(escaped, sizeof escaped, "\\u%04x", c);
                    quoted += escaped;
                } else {
                    quoted += c;
                }
        }
    }
    return quoted + "\"";
}

std::string json_number(double value) {
    if (!std::isfinite(value)) return "null";
    char text[32];
    std::snprintf(text, sizeof text, "%.6g", value);
    return text;
}

std::string json_number(const std::optional<double>& value) { return value ? json_number(*value) : "null"; }

std::string json_dims(const std::vector<std::int64_t>& dims) {
    std::string text = "[";
    for (std::size_t d = 0; d < dims.size(); ++d) text += (d ? ", " : "") + std::to_string(dims[d]);
    return text + "]";
}

// One JSON object, fields in insertion order.
class JsonObject {
public:
    JsonObject& raw(const std::string& key, const std::string& rendered) {
        fields_ += (fields_.empty() ? "" : ", ") + json_string(key) + ": " + rendered;
        return *this;
    }
    JsonObject& text(const std::string& key, const std::string& value) { return raw(key, json_string(value)); }
    JsonObject& number(const std::string& key, const std::optional<double>& value) { return raw(key, json_number(value)); }
    std::string str() const { return "{" + fields_ + "}"; }

private:
    std::string fields_;
};

}  // namespace

std::string dtype_pair_text(smxDataType_t x, smxDataType_t y) {
    return std::string(dtype_name(x)) + "->" + dtype_name(y);
}

void TablePrinter::print_header() const {
    std::printf("%-20s ", "op");
    if (with_options_) std::printf("%-16s ", "option");
    std::printf("%-10s %-24s %4s %-40s %10s %8s %7s", "x->y", "shape", "dim", "plan", "us", gpu_units_ ? "TB/s" : "GB/s",
                "%copy");
    if (with_options_) std::printf(" %7s", "x plain");
    if (with_graph_) std::printf(" %10s", "graph us");
    std::printf("  %s\n", "check (max err ratio)");
    std::fflush(stdout);
}

void TablePrinter::print_row(const CaseRecord& record, const RunInfo& run) const {
    std::printf("%-20s ", record.op.c_str());
    if (with_options_) std::printf("%-16s ", record.option.c_str());
    std::printf("%-10s %-24s %4d %-40s ", dtype_pair_text(record.x_dtype, record.y_dtype).c_str(), record.label.c_str(),
                record.dim, record.plan.empty() ? "-" : record.plan.c_str());
    if (record.smx_us) {
        const double rate = record.bytes_per_s();
        // Two decimals: event medians come in 32 ns steps, and single decode rows differ by tenths of a us.
        std::printf("%10.2f %8.3f %6.1f%%", *record.smx_us, rate / (gpu_units_ ? 1e12 : 1e9),
                    100.0 * rate / run.copy_bytes_per_s);
    } else {
        std::printf("%10s %8s %7s", "-", "-", "-");
    }
    if (with_options_) {
        if (record.smx_us && record.plain_us) {
            std::printf(" %6.3fx", *record.smx_us / *record.plain_us);
        } else {
            std::printf(" %7s", "-");
        }
    }
    if (with_graph_) {
        if (record.graph_us) {
            std::printf(" %10.2f", *record.graph_us);
        } else {
            std::printf(" %10s", "-");
        }
    }
    std::printf("  %s", record.check_passed ? "ok" : "FAIL");
    if (record.max_err_ratio) {
        std::printf(" %.3g", *record.max_err_ratio);
    } else if (record.rows_checked > 0) {
        std::printf(" inf");
    }
    if (!record.error.empty()) std::printf("  %s", record.error.c_str());
    std::printf("\n");
    std::fflush(stdout);
}

void write_json(const std::string& path, const RunInfo& run, const std::vector<CaseRecord>& records) {
    const double copy_tbps = run.copy_bytes_per_s / 1e12;
    std::ostringstream out;
    out << "{\n  \"tool\": \"smx-bench\",\n  \"device_type\": " << json_string(run.device_type)
        << ",\n  \"device\": " << json_string(run.device_name) << ",\n  \"commit\": " << json_string(run.commit)
        << ",\n  \"date\": " << json_string(run.date) << ",\n  \"copy_tbps\": " << json_number(copy_tbps)
        << ",\n  \"copy_method\": " << json_string(run.copy_method)
        << ",\n  \"launch_floor_us\": " << json_number(run.launch_floor_us)
        << ",\n  \"seed\": " << run.seed
        << ",\n  \"records\": [";
    for (std::size_t i = 0; i < records.size(); ++i) {
        const CaseRecord& record = records[i];
        std::optional<double> tbps, pct_of_copy;
        if (record.smx_us) {
            tbps = record.bytes_per_s() / 1e12;
            pct_of_copy = 100.0 * record.bytes_per_s() / run.copy_bytes_per_s;
        }
        JsonObject object;
        object.text("op", record.op)
            .text("group", record.group)
            .text("label", record.label)
            .text("x_dtype", dtype_name(record.x_dtype))
            .text("y_dtype", dtype_name(record.y_dtype))
            .raw("shape", json_dims(record.shape))
            .raw("strides", json_dims(record.strides))
            .raw("dim", std::to_string(record.dim))
            .number("smx_us", record.smx_us)
            .number("smx_min_us", record.smx_min_us)
            .number("smx_p90_us", record.smx_p90_us)
            .number("graph_us", record.graph_us)
            .raw("bytes", std::to_string(record.bytes))
            .number("tbps", tbps)
            .number("copy_tbps", copy_tbps)
            .number("smx_pct_of_copy", pct_of_copy)
            .text("plan", record.plan)
            .text("check", record.check_passed ? "ok" : "FAIL")
            .number("max_err_ratio", record.max_err_ratio)
            .raw("rows_checked", std::to_string(record.rows_checked))
            .raw("check_sampled", record.check_sampled ? "true" : "false")
            .raw("calls", std::to_string(record.calls))
            .raw("buffers", std::to_string(record.buffers))
            .raw("error", record.error.empty() ? "null" : json_string(record.error))
            .text("device", run.device_name)
            .text("commit", run.commit)
            .text("date", run.date);
        if (!record.option.empty()) {
            std::optional<double> ratio_to_plain;
            if (record.smx_us && record.plain_us) ratio_to_plain = *record.smx_us / *record.plain_us;
            object.text("option", record.option)
                .text("option_detail", record.option_detail)
                .number("plain_us", record.plain_us)
                .number("ratio_to_plain", ratio_to_plain);
        }
        out << (i ? ",\n    " : "\n    ") << object.str();
    }
    out << "\n  ]\n}\n";
    std::ofstream file(path);
    file << out.str();
    if (!file) throw BenchError("could not write " + path);
}

}  // namespace smx_bench
