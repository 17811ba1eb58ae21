"""torch.ops.smx on CUDA tensors: torch.compile with inductor, CUDA graph capture and replay, workspace from
torch's caching allocator, torch's current stream of the tensor's device, a second GPU, autograd.

Skipped, with the reason, where PyTorch has no CUDA device or libsmx was built without its CUDA backend."""

import re

import pytest

import smx
from test_cuda import _UNAVAILABLE, assert_matches_torch, generator, poisoned, random_tensor  # noqa: F401
from test_torch import assert_compiled_matches_eager
from test_torch_backward import assert_gradients_match_torch_s

torch = pytest.importorskip("torch", reason="the operators need PyTorch")
import smx.torch as smx_torch  # noqa: E402,F401  (defines torch.ops.smx)

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(_UNAVAILABLE is not None, reason=str(_UNAVAILABLE))]

MODES = [pytest.param(False, id="softmax"), pytest.param(True, id="log_softmax")]
NEEDS_TWO_GPUS = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2,
                                    reason="needs two GPUs")


def test_torch_compile_fullgraph_with_inductor_matches_eager_forward_and_backward(generator):
    x = random_tensor(generator, (64, 1000), "float32")
    weights = random_tensor(generator, (64, 1000), "float32")

    def loss(x):
        probabilities = smx.softmax(x * 0.5, -1)
        logs = smx.log_softmax(x, 0, dtype=torch.bfloat16)
        return (probabilities * weights).sum() + logs.float().mean()

    # The bf16 log-softmax's gradient (~1e-3 an element) is rounded to bf16 at places inductor fuses differently
    # from eager: up to 2.3e-6 apart on the H200, so atol is bf16's epsilon on that scale.
    assert_compiled_matches_eager(loss, x, loss_tolerance=(1e-5, 1e-4), grad_tolerance=(1e-4, 1e-5))


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_opcheck_passes_on_cuda_tensors(generator, name):
    packet = getattr(torch.ops.smx, name)
    x = random_tensor(generator, (33, 257), "float32")
    for args in [(x, 1, None), (x.t(), 0, torch.float16), (x.detach().requires_grad_(), -1, None)]:
        torch.library.opcheck(packet.default, args)
    torch.library.opcheck(packet.out, (x, 1), {"y": torch.empty(33, 257, device="cuda", dtype=torch.bfloat16)})


def test_torch_compile_reduce_overhead_replays_cuda_graphs_of_smx(generator):
    def step(x):
        return smx.log_softmax(smx.softmax(x, -1) * 4.0, 0)

    compiled = torch.compile(step, mode="reduce-overhead", fullgraph=True)
    for _ in range(4):  # recorded, then replayed
        x = random_tensor(generator, (32, 8, 128), "float16")
        got = compiled(x).clone()
        torch.testing.assert_close(got, step(x), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("log", MODES)
def test_cuda_graph_captures_and_replays_every_call_form(generator, log):
    function = smx.log_softmax if log else smx.softmax
    x = random_tensor(generator, (48, 3000), "float32")
    out = poisoned(x.shape, "float16")
    # Warm-up on a side stream, as torch.cuda.graph asks (descriptors made, kernels loaded).
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        function(x), function(x, out=out), getattr(torch.ops.smx, "log_softmax" if log else "softmax")(x, 0)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        allocated = function(x)
        function(x, out=out)
        by_op = getattr(torch.ops.smx, "log_softmax" if log else "softmax")(x, 0)
    values = random_tensor(generator, x.shape, "float32")
    x.copy_(values)
    graph.replay()
    assert_matches_torch(allocated, values, -1, log)
    assert_matches_torch(out, values, -1, log)
    assert_matches_torch(by_op, values, 0, log)


def workspace_of(plan):
    found = re.search(r"workspace=(\d+)", plan)
    return int(found.group(1)) if found else 0


def test_only_plans_with_workspace_allocate_and_only_their_workspace(generator):
    # Cumulative allocation count of torch's caching allocator: with out= given, a plan without workspace
    # allocates nothing, and one with workspace allocates exactly one block (its workspace).
    small = random_tensor(generator, (64, 1000), "float32")
    long_row = random_tensor(generator, (2, 1 << 22), "float32")
    assert workspace_of(smx.plan(small)) == 0
    assert workspace_of(smx.plan(long_row)) > 0, f"expected a plan with workspace; got {smx.plan(long_row)}"
    for x, expected_allocations in ((small, 0), (long_row, 1)):
        out = poisoned(x.shape, "float32")
        smx.softmax(x, out=out)  # descriptor made before counting
        torch.cuda.synchronize()
        before = torch.cuda.memory_stats()["allocation.all.allocated"]
        smx.softmax(x, out=out)
        assert torch.cuda.memory_stats()["allocation.all.allocated"] - before == expected_allocations
        assert_matches_torch(out, x, -1, False)
    # The workspace plan inside a captured graph: its workspace comes from the graph's private pool.
    out = poisoned(long_row.shape, "float32")
    smx.log_softmax(long_row, out=out)  # its descriptor made and kernels loaded before the capture
    torch.cuda.synchronize()
    out.fill_(float("nan"))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        smx.log_softmax(long_row, out=out)
    graph.replay()
    assert_matches_torch(out, long_row, -1, True)


@pytest.mark.parametrize("log", MODES)
def test_gradients_match_torch_s_autograd(generator, log):
    # Both halves run smx's kernels: the forward operator's gradient is the backward operator.
    assert_gradients_match_torch_s(random_tensor(generator, (16, 2048), "float32"),
                                   random_tensor(generator, (16, 2048), "float32"), log, rtol=1e-4, atol=1e-6)


# Every way a torch user calls smx, as (function of x and a poisoned out, log): smx.softmax's eager calls take
# the extension's binding where it has one, torch.ops.smx.* the dispatcher's boxed path.
CALL_FORMS = {
    "smx.softmax": (lambda x, out: smx.softmax(x), False),
    "smx.softmax out=": (lambda x, out: smx.softmax(x, out=out), False),
    "smx.log_softmax": (lambda x, out: smx.log_softmax(x, -1), True),
    "smx.log_softmax out=": (lambda x, out: smx.log_softmax(x, -1, out=out), True),
    "torch.ops.smx.softmax": (lambda x, out: torch.ops.smx.softmax(x, -1), False),
    "torch.ops.smx.log_softmax.out": (lambda x, out: torch.ops.smx.log_softmax.out(x, -1, y=out) or out, True),
}


@pytest.mark.parametrize("form", list(CALL_FORMS))
def test_eager_cuda_calls_match_the_operators_bit_for_bit(generator, form):
    call, log = CALL_FORMS[form]
    x = random_tensor(generator, (37, 3000), "bfloat16")
    x[0, 5], x[1, 7], x[2] = float("nan"), float("inf"), float("-inf")
    expected = getattr(torch.ops.smx, "log_softmax" if log else "softmax")(x, -1)
    got = call(x, poisoned(x.shape, "bfloat16"))
    torch.cuda.synchronize()
    assert torch.equal(got.nan_to_num(7.0), expected.nan_to_num(7.0)) and torch.equal(got.isnan(), expected.isnan())
    assert_matches_torch(got, x, -1, log)


@NEEDS_TWO_GPUS
@pytest.mark.parametrize("form", list(CALL_FORMS))
def test_runs_on_torch_s_current_stream_of_the_tensor_s_device_whatever_the_current_device(generator, form):
    call, log = CALL_FORMS[form]
    x = torch.empty(512, 4096, device="cuda:1")
    out = poisoned(x.shape, "float32", device="cuda:1")
    values = random_tensor(generator, x.shape, "float32", device="cuda:1")
    call(values, out)  # kernels loaded and descriptor made on device 1 before the timing-sensitive part
    torch.cuda.synchronize(1)
    out.fill_(float("nan"))
    side = torch.cuda.Stream(device="cuda:1")
    side.wait_stream(torch.cuda.current_stream("cuda:1"))
    with torch.cuda.stream(side):  # side is device 1's current stream...
        with torch.cuda.device(0):  # ...while device 0 is the current device
            with torch.cuda.stream(side):
                torch.cuda._sleep(500_000_000)  # x gets its values ~0.25 s late, on side
                x.copy_(values)
            assert torch.cuda.current_device() == 0 and torch.cuda.current_stream(1) == side
            y = call(x, out)  # must queue behind the copy on side, on device 1
            assert torch.cuda.current_device() == 0, "the call left another device current"
            assert y.device == x.device
            with torch.cuda.stream(side):
                z = y * 1.0  # queued on side after smx's kernel: reads what it wrote
    side.synchronize()
    assert_matches_torch(z, values, -1, log)


@NEEDS_TWO_GPUS
def test_stream_argument_on_a_second_gpu_orders_on_that_stream_and_leaves_the_current_ones(generator):
    x = torch.empty(512, 4096, device="cuda:1")
    values = random_tensor(generator, x.shape, "float32", device="cuda:1")
    smx.softmax(values)
    torch.cuda.synchronize(1)
    side = torch.cuda.Stream(device="cuda:1")  # not current anywhere
    side.wait_stream(torch.cuda.current_stream("cuda:1"))
    current = torch.cuda.current_stream(1)
    with torch.cuda.device(0):
        with torch.cuda.stream(side):
            torch.cuda._sleep(500_000_000)
            x.copy_(values)
        y = smx.softmax(x, stream=side)  # on side, behind the copy
        assert torch.cuda.current_device() == 0 and torch.cuda.current_stream(1) == current
        with torch.cuda.stream(side):
            z = y * 1.0
    side.synchronize()
    assert_matches_torch(z, values, -1, False)


@NEEDS_TWO_GPUS
def test_out_on_another_gpu_is_refused(generator):
    x = random_tensor(generator, (4, 30), "float32")
    with pytest.raises(ValueError, match="out is on cuda:1 but x is on cuda:0"):
        smx.softmax(x, out=torch.empty((4, 30), device="cuda:1"))
