#!/usr/bin/env python3
"""vocab_parallel.py - smx.distributed against the ways PyTorch users split softmax-family operators over the
vocabulary, one process per GPU, every case of issue 56's speed section in one run per world size:

    torchrun --nproc-per-node 4 bench/vocab_parallel.py --out docs/benchmarks/vocab-parallel-h200-x4.json
    torchrun --nproc-per-node 2 bench/vocab_parallel.py --out docs/benchmarks/vocab-parallel-h200-x2.json

For bf16 logits of 8192 x 128256 and 16384 x 151936 split evenly along the vocabulary, and for each operator
(softmax, log_softmax, logsumexp, cross_entropy forward, and cross_entropy forward + backward), every rank times
five ways, with CUDA events after a warm-up (median of --repeats calls, every rank lined up by a barrier before
each call and between cases, and on the device by a one-value all-reduce after the spin kernel that holds the
stream while the host enqueues each call, so the figures are device time, as compare_torch.py's):
  smx           smx.distributed.<op> of its shard (statistics, one all-gather of them, step 3; softmax and
                log_softmax take the one-read fused path where the GPUs have peer access and smx expects it faster,
                everywhere it can with SMX_DISTRIBUTED_FUSED=1, the three steps with SMX_DISTRIBUTED_FUSED=0)
  allgather     all_gather_into_tensor of the shards, then torch's operator on the whole rows
  megatron      the Megatron pattern in PyTorch, in float32: local max, all_reduce MAX, exp-sum, all_reduce SUM,
                then divide (softmax), subtract the log (log_softmax, logsumexp) or, for cross-entropy,
                Megatron's vocab-parallel loss (a third all_reduce for the target's logit; its backward local)
  local         smx's operator on its shard alone, no communication (cross_entropy: targets inside the shard)
  stats_reduce  one all_reduce of the rows' statistics alone: rows x 2 float32 (rows x 5 for cross_entropy)
Every input is rotated over copies that together exceed twice the L2 cache, so no call reads what the previous
one left in L2. The targets: allgather / smx >= 3 and megatron / smx >= 2 (the slowest rank's medians), and
smx / (local + stats_reduce) <= 1.15 (each rank's own, the worst reported). Before timing, each rank's smx result
(and cross-entropy gradient) is checked against torch on the gathered rows. Rank 0 prints a table and writes the
JSON: the command, the environment, every rank's medians, the ratios.

smx is imported from this checkout's python/ folder unless installed; libsmx is found the binding's way
(SMX_LIBRARY names the file).
"""

import argparse
import datetime
import json
import math
import os
import socket
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHAPES = [(8192, 128256), (16384, 151936)]
OPERATORS = ["softmax", "log_softmax", "logsumexp", "cross_entropy", "cross_entropy_fwd_bwd"]
WAYS = ["smx", "allgather", "megatron", "local", "stats_reduce"]
TARGETS = {"allgather_over_smx": (">=", 3.0), "megatron_over_smx": (">=", 2.0),
           "smx_over_local_plus_stats_reduce": ("<=", 1.15)}


def import_smx():
    try:
        import smx  # noqa: F401
    except ImportError:
        sys.path.insert(0, os.path.join(REPO_ROOT, "python"))
    import smx
    import smx.distributed
    import smx.torch  # noqa: F401  (torch.ops.smx: the local operators at torch's host cost)
    return smx


class Rotation:
    """Copies of a tensor made by make(), together at least twice the L2 cache (two at least), handed out in
    turn: each call reads memory the previous calls evicted from L2."""

    def __init__(self, make, l2_bytes):
        first = make()
        copies = max(2, math.ceil(2 * l2_bytes / (first.numel() * first.element_size())))
        self.tensors = [first] + [make() for _ in range(copies - 1)]
        self.turn = 0

    def next(self):
        self.turn = (self.turn + 1) % len(self.tensors)
        return self.tensors[self.turn]


_sleep_cycles_per_us = None


def sleep_cycles_per_us():
    """The spin kernel's clock: torch.cuda._sleep cycles per microsecond, timed once."""
    global _sleep_cycles_per_us
    if _sleep_cycles_per_us is None:
        torch.cuda._sleep(1000)  # the first launch loads the kernel's module: not part of the calibration
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        cycles = 20_000_000
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        end.synchronize()
        _sleep_cycles_per_us = cycles / (start.elapsed_time(end) * 1000.0)
    return _sleep_cycles_per_us


def timed(fn, warmup, repeats, group):
    """Median milliseconds of fn()'s device time by CUDA events, each call started with every rank lined up.
    As compare_torch.py does, a spin kernel holds the stream while the host enqueues the call, so the events
    time the GPU's work (kernels and collectives), not the host's gaps between launches; a call whose
    enqueueing outlasts the hold is timed again with a hold four times as long. After the hold, a one-value
    all-reduce lines the ranks up on the device, as the C timing (smx_nccl_test --time) does."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    hold_us = 2000.0
    line_up = torch.zeros(1, device="cuda")
    times = []
    while len(times) < repeats:
        dist.barrier(group=group)
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(int(hold_us * sleep_cycles_per_us()))
        # The holds end apart (each rank's clock calibration and host start differ): an all-reduce of one value
        # lines the streams up on the device, so no call is timed waiting in a collective for a later rank.
        dist.all_reduce(line_up, group=group)
        start.record()
        enqueue_start = time.perf_counter()
        fn()
        enqueue_us = (time.perf_counter() - enqueue_start) * 1e6
        end.record()
        end.synchronize()
        # Every rank must agree on re-timing, or their collectives would pair with the wrong calls.
        held = torch.tensor([1.0 if enqueue_us < 0.8 * hold_us else 0.0], device="cuda")
        dist.all_reduce(held, op=dist.ReduceOp.MIN, group=group)
        if held.item() == 0.0:
            hold_us *= 4
            continue
        times.append(start.elapsed_time(end))
    dist.barrier(group=group)
    return statistics.median(times)


# ---- the ways PyTorch users compute it ---------------------------------------------------------------------

def gather_rows(x, group, world):
    """The whole rows on every rank: all_gather_into_tensor of the shards, laid out rank after rank per row."""
    rows, shard = x.shape
    gathered = torch.empty((world * rows, shard), dtype=x.dtype, device=x.device)
    dist.all_gather_into_tensor(gathered, x.contiguous(), group=group)
    return gathered.view(world, rows, shard).permute(1, 0, 2).reshape(rows, world * shard)


def megatron_statistics(x, group):
    """float32 x, its shifted values x - M and sum(exp(x - M)) over the whole rows: two all-reduces."""
    logits = x.float()
    row_max = logits.max(dim=-1, keepdim=True).values
    dist.all_reduce(row_max, op=dist.ReduceOp.MAX, group=group)
    shifted = logits - row_max
    exps = torch.exp(shifted)
    row_sum = exps.sum(dim=-1, keepdim=True)
    dist.all_reduce(row_sum, op=dist.ReduceOp.SUM, group=group)
    return row_max, shifted, exps, row_sum


def megatron_softmax(x, group):
    _, _, exps, row_sum = megatron_statistics(x, group)
    return (exps / row_sum).to(x.dtype)


def megatron_log_softmax(x, group):
    _, shifted, _, row_sum = megatron_statistics(x, group)
    return (shifted - torch.log(row_sum)).to(x.dtype)


def megatron_logsumexp(x, group):
    row_max, _, _, row_sum = megatron_statistics(x, group)
    return (row_max + torch.log(row_sum)).squeeze(-1)


class MegatronCrossEntropy(torch.autograd.Function):
    """Megatron-LM's vocab-parallel cross-entropy written in PyTorch (float32): the global max, the target's
    shifted logit and the sum of exponentials, each by an all-reduce; the backward is local (softmax minus the
    one-hot target, times the upstream gradient). Per-row losses."""

    @staticmethod
    def forward(ctx, x, target, vocab_start, group):
        logits = x.float()
        row_max = logits.max(dim=-1).values
        dist.all_reduce(row_max, op=dist.ReduceOp.MAX, group=group)
        shifted = logits - row_max.unsqueeze(-1)
        here = (target >= vocab_start) & (target < vocab_start + x.shape[-1])
        local = torch.where(here, target - vocab_start, torch.zeros_like(target))
        rows = torch.arange(x.shape[0], device=x.device)
        target_logit = torch.where(here, shifted[rows, local], torch.zeros_like(row_max))
        dist.all_reduce(target_logit, op=dist.ReduceOp.SUM, group=group)
        exps = torch.exp(shifted)
        row_sum = exps.sum(dim=-1)
        dist.all_reduce(row_sum, op=dist.ReduceOp.SUM, group=group)
        ctx.save_for_backward(exps, row_sum, here, local)
        ctx.x_dtype = x.dtype
        return torch.log(row_sum) - target_logit

    @staticmethod
    def backward(ctx, grad_loss):
        exps, row_sum, here, local = ctx.saved_tensors
        grad = exps.div_(row_sum.unsqueeze(-1))
        rows = torch.arange(grad.shape[0], device=grad.device)
        grad[rows, local] -= here.float()
        grad.mul_(grad_loss.unsqueeze(-1))
        return grad.to(ctx.x_dtype), None, None, None


# ---- the cases --------------------------------------------------------------------------------------------

class Case:
    """What one operator's five ways run on this rank, each a function of no arguments."""

    def __init__(self, smx, op, group, world, rank, rows, shard, l2_bytes, device):
        vocab_start = rank * shard
        generator = torch.Generator(device=device).manual_seed(1000 + rank)
        target_generator = torch.Generator(device=device).manual_seed(7)  # the same targets on every rank
        backward = op == "cross_entropy_fwd_bwd"

        def make_x():
            x = (torch.randn((rows, shard), generator=generator, device=device) * 3).to(torch.bfloat16)
            return x.requires_grad_(backward)

        self.x = Rotation(make_x, l2_bytes)
        width = 5 if op.startswith("cross_entropy") else 2
        self.stats = Rotation(lambda: torch.randn((rows, width), device=device), l2_bytes)
        self.target = torch.randint(0, shard * world, (rows,), generator=target_generator, device=device)
        self.local_target = torch.randint(0, shard, (rows,), generator=target_generator, device=device)
        sd = smx.distributed
        torch_op = {"softmax": lambda t: torch.softmax(t, -1), "log_softmax": lambda t: torch.log_softmax(t, -1),
                    "logsumexp": lambda t: torch.logsumexp(t, -1)}
        if op in torch_op:
            ours = {"softmax": sd.softmax, "log_softmax": sd.log_softmax, "logsumexp": sd.logsumexp}[op]
            local = {"softmax": smx.softmax, "log_softmax": smx.log_softmax, "logsumexp": smx.logsumexp}[op]
            megatron = {"softmax": megatron_softmax, "log_softmax": megatron_log_softmax,
                        "logsumexp": megatron_logsumexp}[op]
            self.ways = {
                "smx": lambda: ours(self.x.next(), -1, group),
                "allgather": lambda: torch_op[op](gather_rows(self.x.next(), group, world)),
                "megatron": lambda: megatron(self.x.next(), group),
                "local": lambda: local(self.x.next(), -1),
            }
        else:
            def run(loss_of):
                x = self.x.next()
                loss = loss_of(x)
                if backward:
                    x.grad = None
                    loss.backward()

            def allgather_loss(x):
                whole = gather_rows(x.detach(), group, world).requires_grad_(backward)
                return F.cross_entropy(whole, self.target)

            self.ways = {
                "smx": lambda: run(lambda x: sd.cross_entropy(x, self.target, vocab_start, group)),
                "allgather": lambda: run(allgather_loss),
                "megatron": lambda: run(
                    lambda x: MegatronCrossEntropy.apply(x, self.target, vocab_start, group).mean()),
                "local": lambda: run(lambda x: smx.cross_entropy(x, self.local_target)),
            }
        self.ways["stats_reduce"] = lambda: dist.all_reduce(self.stats.next(), group=group)
        self.op, self.group, self.world, self.rank, self.vocab_start = op, group, world, rank, vocab_start
        self.smx = smx

    def check(self):
        """The largest error of this rank's smx result (and cross-entropy gradient) against torch in float32 on
        the gathered rows, relative to the expected values' largest magnitude; raises past bf16's tolerance."""
        sd = self.smx.distributed
        x = self.x.tensors[0]
        whole = gather_rows(x.detach().float(), self.group, self.world).requires_grad_()
        shard = slice(self.vocab_start, self.vocab_start + x.shape[1])
        if self.op in ("softmax", "log_softmax"):
            got = getattr(sd, self.op)(x, -1, self.group).float()
            expected = getattr(torch, self.op)(whole, -1)[:, shard]
            pairs = [(got, expected)]
        elif self.op == "logsumexp":
            pairs = [(sd.logsumexp(x, -1, self.group), torch.logsumexp(whole, -1))]
        else:
            leaf = x.detach().requires_grad_()
            loss = sd.cross_entropy(leaf, self.target, self.vocab_start, self.group)
            expected = F.cross_entropy(whole, self.target)
            loss.backward()
            expected.backward()
            pairs = [(loss, expected), (leaf.grad.float(), whole.grad[:, shard])]
        worst = 0.0
        for got, expected in pairs:
            error = ((got - expected.detach()).abs().max() / expected.detach().abs().max().clamp_min(1e-30)).item()
            if not error <= 8e-3:
                raise AssertionError(f"rank {self.rank} {self.op}: smx.distributed differs from torch by {error:.3g}")
            worst = max(worst, error)
        return worst


def ratios_of(ms):
    return {"allgather_over_smx": ms["allgather"] / ms["smx"], "megatron_over_smx": ms["megatron"] / ms["smx"],
            "smx_over_local_plus_stats_reduce": ms["smx"] / (ms["local"] + ms["stats_reduce"])}


def meets(name, value):
    sense, bound = TARGETS[name]
    return value >= bound if sense == ">=" else value <= bound


def summarize(every_rank, world):
    """Per case: the slowest rank's medians, the ratios of the first two targets on them, and the worst rank's
    ratio of the third."""
    summary = []
    for k, case in enumerate(every_rank[0]["cases"]):
        slowest = {way: max(r["cases"][k]["ms"][way] for r in every_rank) for way in WAYS}
        ratios = ratios_of(slowest)
        ratios["smx_over_local_plus_stats_reduce"] = max(
            ratios_of(r["cases"][k]["ms"])["smx_over_local_plus_stats_reduce"] for r in every_rank)
        summary.append({"op": case["op"], "rows": case["rows"], "vocab": case["vocab"], "world": world,
                        "slowest_rank_ms": slowest, "ratios": ratios,
                        "meets": {name: meets(name, value) for name, value in ratios.items()}})
    return summary


def print_table(summary):
    header = (f"{'op':<22} {'rows x vocab':>15} {'smx':>8} {'allgath':>8} {'megatr':>8} {'local':>8} {'reduce':>8}"
              f" {'ag/smx>=3':>10} {'mg/smx>=2':>10} {'smx/(l+r)<=1.15':>16}")
    print(header)
    print("-" * len(header))
    for s in summary:
        ms, ratios, ok = s["slowest_rank_ms"], s["ratios"], s["meets"]
        cells = [f"{ratios[name]:.2f}{'' if ok[name] else '!'}" for name in TARGETS]
        print(f"{s['op']:<22} {str(s['rows']) + 'x' + str(s['vocab']):>15}"
              + "".join(f" {ms[way]:8.3f}" for way in WAYS)
              + f" {cells[0]:>10} {cells[1]:>10} {cells[2]:>16}")
    print("ms: medians, the slowest rank's; ratios marked ! miss their target "
          "(the last one per rank, the worst shown)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="JSON file rank 0 writes (default: the JSON printed before the table)")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--shapes", default=",".join(f"{r}x{v}" for r, v in SHAPES),
                        help="comma-separated ROWSxVOCAB (default: issue 56's two)")
    parser.add_argument("--ops", default=",".join(OPERATORS), help=f"comma-separated, of {','.join(OPERATORS)}")
    args = parser.parse_args()
    shapes = [tuple(int(v) for v in text.split("x")) for text in args.shapes.split(",")]
    ops = args.ops.split(",")
    unknown = sorted(set(ops) - set(OPERATORS))
    if unknown:
        raise SystemExit(f"unknown --ops {unknown}; known: {OPERATORS}")

    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local_rank)
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", device_id=device)
    try:
        rank, world = dist.get_rank(), dist.get_world_size()
        for rows, vocab in shapes:
            if vocab % world:
                raise SystemExit(f"vocabulary {vocab} does not split evenly over {world} ranks")
        group = dist.group.WORLD
        smx = import_smx()
        l2_bytes = torch.cuda.get_device_properties(device).L2_cache_size
        results = []
        for rows, vocab in shapes:
            for op in ops:
                case = Case(smx, op, group, world, rank, rows, vocab // world, l2_bytes, device)
                error = case.check()
                ms = {way: timed(fn, args.warmup, args.repeats, group) for way, fn in case.ways.items()}
                results.append({"op": op, "rows": rows, "vocab": vocab, "shard": vocab // world, "dtype": "bf16",
                                "max_relative_error": error, "input_copies": len(case.x.tensors), "ms": ms,
                                "ratios": ratios_of(ms)})
                del case
                torch.cuda.empty_cache()

        every_rank = [None] * world
        dist.all_gather_object(every_rank, {"rank": rank, "host": socket.gethostname(), "cases": results})
        if rank == 0:
            summary = summarize(every_rank, world)
            report = {
                "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
                "world_size": world,
                "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "device": torch.cuda.get_device_name(device),
                "l2_bytes": l2_bytes,
                "torch": torch.__version__,
                "nccl": ".".join(str(v) for v in torch.cuda.nccl.version()),
                "smx_library": smx.library_path(),
                "smx_torch_backend": smx.torch.backend(),
                "warmup": args.warmup,
                "repeats": args.repeats,
                "targets": {name: f"{sense} {bound}" for name, (sense, bound) in TARGETS.items()},
                "summary": summary,
                "ranks": every_rank,
            }
            text = json.dumps(report, indent=2)
            if args.out:
                with open(args.out, "w") as out:
                    out.write(text + "\n")
            else:
                print(text)
            print(f"{world} ranks of {report['device']}, bf16 logits, {args.repeats} calls per median")
            print_table(summary)
        dist.barrier(group=group)  # no rank tears its communicator down while rank 0 still reports
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
