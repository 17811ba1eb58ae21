// The part of a slice or chunk of a row that lies inside the row's causal window (cuda/common/options.hpp:
// window_count), checked on the host against counting the elements one by one: split-row's chunks and grid-regs'
// slices read that many elements of x and write the excluded value past them. Windows ending before a row's first
// element, inside a range, at each edge of one and past the row; ranges of every length up to a few elements and
// the chunk lengths split-row takes. Plain C++, so it runs in every build; the kernels run the same function.
#include <catch2/catch.hpp>

#include <cstdint>

#include "cuda/common/options.hpp"

namespace {

// Elements j of [begin, begin + count) with j < read_len, counted one by one.
std::int64_t counted_inside(std::int64_t read_len, std::int64_t begin, std::int64_t count) {
    std::int64_t inside = 0;
    for (std::int64_t j = begin; j < begin + count; ++j) inside += j < read_len ? 1 : 0;
    return inside;
}

}  // namespace

TEST_CASE("window count: a range's elements inside a causal window, one by one", "[cpu][options]") {
    for (std::int64_t begin = 0; begin <= 12; ++begin) {
        for (std::int64_t count = 0; count <= 9; ++count) {
            for (std::int64_t read_len = 0; read_len <= 24; ++read_len) {
                INFO("range [" << begin << ", " << begin + count << ") window of " << read_len);
                CHECK(smx::cuda::window_count(read_len, begin, count) == counted_inside(read_len, begin, count));
            }
        }
    }
}

TEST_CASE("window count: a row's chunks together read exactly its window", "[cpu][options]") {
    // A row of 40003 elements in chunks of 8192 (split-row's smallest, the last one short), and 4194304 in chunks
    // of 16384; windows before the first element, at and around each chunk edge, inside a chunk and past the row.
    struct Row {
        std::int64_t length, chunk;
    };
    for (const Row row : {Row{40003, 8192}, Row{4194304, 16384}}) {
        const std::int64_t windows[] = {0, 1, row.chunk - 1, row.chunk, row.chunk + 1, 2 * row.chunk + row.chunk / 2,
                                  row.length - 1, row.length, row.length + 7};
        for (const std::int64_t read_len : windows) {
            std::int64_t total = 0;
            for (std::int64_t begin = 0; begin < row.length; begin += row.chunk) {
                const std::int64_t count = begin + row.chunk <= row.length ? row.chunk : row.length - begin;
                const std::int64_t inside = smx::cuda::window_count(read_len, begin, count);
                INFO("row " << row.length << " window " << read_len << " chunk at " << begin);
                CHECK(inside == counted_inside(read_len, begin, count));
                total += inside;
            }
            INFO("row " << row.length << " window " << read_len);
            CHECK(total == (read_len < row.length ? read_len : row.length));
        }
    }
}
