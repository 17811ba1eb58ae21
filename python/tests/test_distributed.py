"""smx.distributed over real process groups: gloo processes on the CPU (CUDA: NCCL, one process per GPU, 2 and 4 of
them, each skipped without that many GPUs), each rank holding a slice of the rows along `dim` (uneven slices, a rank
without classes), against single-process smx on the whole (gathered) tensors: softmax, log-softmax, logsumexp and
cross-entropy, their gradients, special rows (NaN, +inf, all -inf, some -inf, huge values, -inf but for the last
element, so the first ranks' slices are all -inf while the last one's is not), targets at the slices' edges,
ignore_index everywhere; and the statistics (logsumexp, the loss) the same bits on every rank.

A process start costs seconds (importing torch), so one test starts 4 processes once and runs every case in them
twice: in a group of ranks 0 and 1 (the `group` argument), then in all 4. On CUDA the softmaxes take the one-read
(fused) path where the GPUs have peer access, and run again with it switched off (the three steps)."""

import os
import tempfile

import pytest

torch = pytest.importorskip("torch", reason="smx.distributed needs PyTorch")
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

TOLERANCES = {torch.float32: (1e-5, 1e-6), torch.float64: (1e-7, 1e-12), torch.bfloat16: (8e-3, 1e-5)}


def _slices(n, world, empty_rank=None):
    """(start, length) of each rank's slice of n classes: as even as possible, `empty_rank` holding none."""
    holders = [w for w in range(world) if w != empty_rank]
    lengths = [0] * world
    for k, w in enumerate(holders):
        lengths[w] = n // len(holders) + (1 if k < n % len(holders) else 0)
    starts = [sum(lengths[:w]) for w in range(world)]
    return list(zip(starts, lengths))


def _logits(shape, dim, dtype, generator, special):
    """Normal logits with spread 3; with `special`, rows (along dim) 1, 3, 5, ... hold NaN, +inf, all -inf, some
    -inf, values near float32's largest, and -inf but for the last element, spread over the whole row so they fall
    in different ranks' slices."""
    x = torch.randn(shape, generator=generator, dtype=torch.float64) * 3
    if special:
        rows = x.movedim(dim, -1).reshape(-1, shape[dim])
        n = rows.shape[1]
        kinds = [lambda r: r.__setitem__(n - 1, float("nan")), lambda r: r.__setitem__(0, float("inf")),
                 lambda r: r.fill_(float("-inf")), lambda r: r[::3].fill_(float("-inf")),
                 lambda r: r.copy_(torch.linspace(-3e38, 3e38, n, dtype=torch.float64)),
                 lambda r: (r.fill_(float("-inf")), r.__setitem__(n - 1, 1.5))]
        for k, row in enumerate(range(1, rows.shape[0], 2)):
            kinds[k % len(kinds)](rows[row])
        x = rows.reshape(x.movedim(dim, -1).shape).movedim(-1, dim)
    return x.to(dtype).contiguous()


def _assert_close(got, expected, what):
    rtol, atol = TOLERANCES[expected.dtype if expected.dtype in TOLERANCES else torch.float32]
    torch.testing.assert_close(got, expected, rtol=rtol, atol=atol, equal_nan=True, msg=lambda m: f"{what}: {m}")


def _same_bits_on_every_rank(tensor, group, what):
    """Every rank's `tensor` has the same bits as rank 0's."""
    gathered = [torch.empty_like(tensor) for _ in range(dist.get_world_size(group))]
    dist.all_gather(gathered, tensor.contiguous(), group=group)
    as_int = {torch.float32: torch.int32, torch.float64: torch.int64}[tensor.dtype]
    for rank, other in enumerate(gathered):
        assert torch.equal(other.view(as_int), gathered[0].view(as_int)), f"{what}: rank {rank} differs from rank 0"


def _check_statistic(got, expected, x, full, dim, start, length, group, generator, what):
    """A whole-row result (logsumexp, a loss): equal to single-process smx's, the same bits on every rank, and x's
    gradient through it (for a random grad_output) that of the whole logits through smx's, on this rank's slice."""
    _assert_close(got, expected, what)
    _same_bits_on_every_rank(got, group, what)
    grad = torch.rand(got.shape, generator=generator, dtype=torch.float64).to(got.dtype).to(got.device)
    (got * grad).sum().backward()
    (expected * grad).sum().backward()
    _assert_close(x.grad, full.grad.narrow(dim, start, length), f"{what} gradient")


def _shard(full, dim, start, length):
    return full.narrow(dim, start, length).detach().clone().requires_grad_(full.requires_grad)


def _check_softmax_family(group, device, smx):
    import smx.distributed as sd
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    generator = torch.Generator().manual_seed(1234)  # the same whole tensors on every rank
    for shape, dim in (((12, 37), -1), ((3, 21, 4), 1)):  # 6 odd rows: every special kind in each
        n = shape[dim]
        for dtype in (torch.float32, torch.bfloat16, torch.float64):
            for empty_rank in (None, world - 1):
                start, length = _slices(n, world, empty_rank)[rank]
                full = _logits(shape, dim, dtype, generator, special=True).to(device).requires_grad_()
                dy = torch.randn(shape, generator=generator, dtype=torch.float64).to(dtype).to(device)
                case = f"rank {rank}/{world} {dtype} shape {shape} dim {dim} slice [{start}, +{length})"
                for name, ours, theirs in (("softmax", sd.softmax, smx.softmax),
                                           ("log_softmax", sd.log_softmax, smx.log_softmax)):
                    x = _shard(full, dim, start, length)
                    y = ours(x, dim, group)
                    expected = theirs(full, dim)
                    _assert_close(y, expected.narrow(dim, start, length), f"{case} {name}")
                    (y * dy.narrow(dim, start, length)).sum().backward()
                    full.grad = None
                    (expected * dy).sum().backward()
                    _assert_close(x.grad, full.grad.narrow(dim, start, length), f"{case} {name} gradient")
                    full.grad = None
                x = _shard(full, dim, start, length)
                expected = smx.logsumexp(full, dim)
                _check_statistic(sd.logsumexp(x, dim, group), expected, x, full, dim, start, length, group, generator,
                                 f"{case} logsumexp")
                keep = sd.logsumexp(_shard(full, dim, start, length), dim, group, keepdim=True)
                _assert_close(keep, expected.unsqueeze(dim), f"{case} logsumexp keepdim")


def _targets(rows_shape, n, slices, generator, ignore_index):
    """Random classes, the first rows at each non-empty slice's first and last class, every fourth row ignored."""
    target = torch.randint(0, n, rows_shape, generator=generator)
    flat = target.view(-1)
    edges = [c for start, length in slices if length for c in (start, start + length - 1)]
    flat[:min(len(edges), flat.numel())] = torch.tensor(edges[:flat.numel()])
    flat[3::4] = ignore_index
    return target


def _check_cross_entropy(group, device, smx):
    import smx.distributed as sd
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    generator = torch.Generator().manual_seed(4321)
    for shape, dim in (((12, 37), -1), ((3, 21, 4), 1)):
        n = shape[dim]
        rows_shape = tuple(s for d, s in enumerate(shape) if d != dim % len(shape))
        for dtype in (torch.float32, torch.bfloat16):
            for empty_rank in (None, 0):
                slices = _slices(n, world, empty_rank)
                start, length = slices[rank]
                for reduction in ("mean", "sum", "none"):
                    for eps, ignore_index in ((0.0, -100), (0.1, 5)):
                        case = (f"rank {rank}/{world} {dtype} shape {shape} dim {dim} slice [{start}, +{length}) "
                                f"{reduction} eps {eps} ignore {ignore_index}")
                        # Special rows only per row: one NaN row makes a reduced loss NaN.
                        full = _logits(shape, dim, dtype, generator, special=reduction == "none")
                        full = full.to(device).requires_grad_()
                        target = _targets(rows_shape, n, slices, generator, ignore_index).to(device)
                        x = _shard(full, dim, start, length)
                        loss = sd.cross_entropy(x, target, start, group, ignore_index=ignore_index,
                                                label_smoothing=eps, reduction=reduction, dim=dim)
                        expected = smx.cross_entropy(full, target, dim=dim, ignore_index=ignore_index,
                                                     label_smoothing=eps, reduction=reduction)
                        _check_statistic(loss, expected, x, full, dim, start, length, group, generator, f"{case} loss")
    # Every row ignored: a mean of no rows is NaN, a sum 0, and no gradient flows (zeros, as torch's).
    full = _logits((5, 16), -1, torch.float32, generator, special=False).to(device).requires_grad_()
    start, length = _slices(16, world)[rank]
    target = torch.full((5,), -100, dtype=torch.int64, device=device)
    for reduction, check in (("mean", torch.isnan), ("sum", lambda t: t == 0)):
        x = _shard(full, -1, start, length)
        loss = sd.cross_entropy(x, target, start, group, reduction=reduction)
        assert bool(check(loss)), f"rank {rank}: every row ignored, {reduction} gave {loss}"
        loss.backward()
        _assert_close(x.grad, torch.zeros_like(x), f"rank {rank} every row ignored {reduction} gradient")


def _check_both_softmax_paths(world, device, smx):
    """On GPUs with peer access the softmaxes above took the one-read path (bf16 and f32 shards; f64 takes the three
    steps); with it switched off they take the three steps, and give the same results."""
    import smx.distributed as sd
    peer_access = all(torch.cuda.can_device_access_peer(a, b) for a in range(world) for b in range(world) if a != b)
    if peer_access:
        assert sd.path_counts["fused"] > 0, f"no call took the fused path: {sd.path_counts}"
    fused_before = sd.path_counts["fused"]
    sd.use_fused = False
    try:
        _check_softmax_family(dist.group.WORLD, device, smx)
    finally:
        sd.use_fused = True
    assert sd.path_counts["fused"] == fused_before, "a call took the fused path while it was switched off"


def _worker(rank, world, init_file, device_type):
    os.environ["SMX_TORCH_EXTENSION"] = "0"  # the single-process results through the Python kernels: no build
    import smx
    if device_type == "cuda":
        torch.cuda.set_device(rank)
    dist.init_process_group("nccl" if device_type == "cuda" else "gloo", init_method=f"file://{init_file}",
                            rank=rank, world_size=world)
    try:
        device = torch.device(device_type, rank) if device_type == "cuda" else torch.device("cpu")
        pair = dist.new_group([0, 1])  # every rank creates it; ranks 0 and 1 run in it where it is not the world
        if device_type == "cuda":
            import smx.distributed as sd
            sd.use_fused = True  # every shape the fused kernel can take, not only those "auto" expects faster
        for group in (pair, dist.group.WORLD) if world > 2 else (dist.group.WORLD,):
            if group is dist.group.WORLD or rank < 2:
                _check_softmax_family(group, device, smx)
                _check_cross_entropy(group, device, smx)
        if device_type == "cuda":
            _check_both_softmax_paths(world, device, smx)
    finally:
        dist.destroy_process_group()


def _run(world, device_type):
    with tempfile.TemporaryDirectory() as folder:
        mp.spawn(_worker, args=(world, os.path.join(folder, "rendezvous"), device_type), nprocs=world, join=True)


def test_fused_auto_rule_takes_only_rows_the_two_ctas_per_sm_kernel_holds():
    import smx.distributed as sd

    def expected_faster(dtype, shape, axis=-1, transpose=False):
        x = torch.empty(shape, dtype=dtype, device="meta")
        x = x.t() if transpose else x
        return sd._fused_expected_faster(x, torch.empty_like(x), axis % x.dim())

    # 512 threads x 8 packs of 16 bytes: 32768 bf16 values, 16384 f32 ones.
    assert expected_faster(torch.bfloat16, (8, 32064))      # 128256 classes over 4 ranks
    assert expected_faster(torch.bfloat16, (8, 32768))
    assert not expected_faster(torch.bfloat16, (8, 32776))  # one pack more: one CTA per SM
    assert not expected_faster(torch.bfloat16, (8, 37984))  # 151936 over 4
    assert not expected_faster(torch.bfloat16, (8, 64128))  # 128256 over 2
    assert expected_faster(torch.float32, (8, 16384))
    assert not expected_faster(torch.float32, (8, 16388))
    assert not expected_faster(torch.bfloat16, (8, 1004))   # not whole packs: element by element
    assert not expected_faster(torch.float16, (64, 8), axis=0)
    assert not expected_faster(torch.float16, (64, 8), transpose=True)


def test_distributed_operators_on_gloo_equal_single_process_smx_in_groups_of_2_and_4():
    _run(4, "cpu")


@pytest.mark.cuda
@pytest.mark.parametrize("world", [2, 4])
def test_distributed_operators_on_nccl_equal_single_process_smx(world):
    if not torch.cuda.is_available() or torch.cuda.device_count() < world:
        pytest.skip(f"NCCL over {world} processes needs {world} CUDA devices")
    if not dist.is_nccl_available():
        pytest.skip("this torch has no NCCL backend")
    _run(world, "cuda")
