// A first end-to-end check of the CPU backend: random rows against the float64 reference.
#include <catch2/catch.hpp>

#include "support/reference.hpp"

using namespace smx_test;

TEST_CASE("cpu softmax of random f32 rows matches the float64 reference", "[cpu]") {
    for (bool log_mode : {false, true}) {
        HostTensor x = make_tensor(SMX_DTYPE_F32, {7, 33});
        HostTensor y = make_tensor(SMX_DTYPE_F32, {7, 33});
        fill_random(x, test_rng());
        poison(y);
        REQUIRE(run_cpu(y, x, -1, log_mode) == SMX_STATUS_SUCCESS);
        CHECK(compare_to_reference(y, reference_softmax(x, -1, log_mode), log_mode) == "");
    }
}
