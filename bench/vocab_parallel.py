#!/usr/bin/env python3
"""vocab_parallel.py - smx.distributed against the ways PyTorch users split a softmax over the vocabulary, one
process per GPU (issue 56's speed targets):

    torchrun --nproc-per-node 4 bench/vocab_parallel.py --out docs/benchmarks/vocab-parallel-h200-x4.json
    torchrun --nproc-per-node 2 bench/vocab_parallel.py --out docs/benchmarks/vocab-parallel-h200-x2.json

For bf16 logits of 8192 x 128256 and 16384 x 151936 split evenly along the vocabulary, every rank times, with
CUDA events after a warm-up (median of --repeats calls, all ranks lined up by a barrier before each call):
  smx            smx.distributed.softmax of its shard (statistics, one all-gather of them, normalize)
  allgather      all_gather_into_tensor of the shards, then torch.softmax of the whole rows
  megatron       the Megatron pattern in PyTorch: local max, all_reduce MAX, exp-sum, all_reduce SUM, divide
  local          smx.softmax of its shard alone (no communication)
  stats_reduce   one all_reduce of the rows' statistics alone (rows x 2 float32)
  stats_gather   the all_gather of the statistics smx.distributed makes (rows x 2 float32 per rank)
and reports the targets' ratios: allgather / smx (>= 3), megatron / smx (>= 2), smx / (local + stats_reduce)
(<= 1.15), each rank's and the slowest rank's. Before timing, every rank's smx result is checked against
torch.softmax of the whole rows. The JSON (rank 0 writes it) holds the command, the environment and every
rank's medians.

smx is imported from this checkout's python/ folder unless installed; libsmx is found the binding's way
(SMX_LIBRARY names the file).
"""

import argparse
import datetime
import json
import os
import socket
import statistics
import sys

import torch
import torch.distributed as dist

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHAPES = [(8192, 128256), (16384, 151936)]


def import_smx():
    try:
        import smx  # noqa: F401
    except ImportError:
        sys.path.insert(0, os.path.join(REPO_ROOT, "python"))
    import smx
    import smx.distributed
    import smx.torch  # noqa: F401  (torch.ops.smx: the local softmax at torch's host cost)
    return smx


def timed(fn, warmup, repeats, group):
    """Median milliseconds of fn() by CUDA events, each call started with every rank lined up."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        dist.barrier(group=group)
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def megatron_softmax(x, group):
    """The Megatron pattern written in PyTorch: two all-reduces of per-row values."""
    logits = x.float()
    row_max = logits.max(dim=-1, keepdim=True).values
    dist.all_reduce(row_max, op=dist.ReduceOp.MAX, group=group)
    exps = torch.exp(logits - row_max)
    row_sum = exps.sum(dim=-1, keepdim=True)
    dist.all_reduce(row_sum, op=dist.ReduceOp.SUM, group=group)
    return (exps / row_sum).to(x.dtype)


def allgather_softmax(x, group, world):
    """Every rank gathers the whole logits, then torch.softmax of the whole rows."""
    gathered = torch.empty((world,) + tuple(x.shape), dtype=x.dtype, device=x.device)
    dist.all_gather_into_tensor(gathered, x.contiguous(), group=group)
    whole = gathered.permute(1, 0, 2).reshape(x.shape[0], world * x.shape[1])
    return torch.softmax(whole, dim=-1)


def check(smx, x, group, world, rank):
    """This rank's smx.distributed shard against torch.softmax of the gathered rows (float32): the max error."""
    y = smx.distributed.softmax(x, -1, group)
    whole = allgather_softmax(x.float(), group, world)
    expected = whole[:, rank * x.shape[1]:(rank + 1) * x.shape[1]]
    error = (y.float() - expected).abs().max().item()
    assert error <= 8e-3 * expected.abs().max().item() + 1e-6, f"rank {rank}: smx.distributed differs by {error}"
    return error


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="JSON file rank 0 writes (default: standard output)")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--shapes", default=",".join(f"{r}x{v}" for r, v in SHAPES),
                        help="comma-separated ROWSxVOCAB (default: issue 56's two)")
    args = parser.parse_args()

    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    rank, world = dist.get_rank(), dist.get_world_size()
    group = dist.group.WORLD
    smx = import_smx()
    device = torch.device("cuda", local_rank)

    results = []
    for text in args.shapes.split(","):
        rows, vocab = (int(v) for v in text.split("x"))
        if vocab % world:
            raise SystemExit(f"vocabulary {vocab} does not split evenly over {world} ranks")
        shard = vocab // world
        generator = torch.Generator(device=device).manual_seed(1000 + rank)
        x = (torch.randn((rows, shard), generator=generator, device=device) * 3).to(torch.bfloat16)
        error = check(smx, x, group, world, rank)
        stats = torch.randn((rows, 2), device=device)
        gathered_stats = torch.empty((world * 2, rows), device=device)
        local_stats = torch.randn((2, rows), device=device)
        y_local = torch.empty_like(x)
        times = {
            "smx": timed(lambda: smx.distributed.softmax(x, -1, group), args.warmup, args.repeats, group),
            "allgather": timed(lambda: allgather_softmax(x, group, world), args.warmup, args.repeats, group),
            "megatron": timed(lambda: megatron_softmax(x, group), args.warmup, args.repeats, group),
            "local": timed(lambda: smx.softmax(x, -1, out=y_local), args.warmup, args.repeats, group),
            "stats_reduce": timed(lambda: dist.all_reduce(stats, group=group), args.warmup, args.repeats, group),
            "stats_gather": timed(lambda: dist.all_gather_into_tensor(gathered_stats, local_stats, group=group),
                                  args.warmup, args.repeats, group),
        }
        ratios = {"allgather_over_smx": times["allgather"] / times["smx"],
                  "megatron_over_smx": times["megatron"] / times["smx"],
                  "smx_over_local_plus_stats_reduce": times["smx"] / (times["local"] + times["stats_reduce"])}
        results.append({"rows": rows, "vocab": vocab, "shard": shard, "dtype": "bf16", "max_error": error,
                        "ms": times, "ratios": ratios})

    every_rank = [None] * world
    dist.all_gather_object(every_rank, {"rank": rank, "host": socket.gethostname(), "cases": results})
    if rank == 0:
        summary = []
        for k, case in enumerate(results):
            slowest = {name: max(r["cases"][k]["ms"][name] for r in every_rank) for name in case["ms"]}
            summary.append({
                "rows": case["rows"], "vocab": case["vocab"], "slowest_rank_ms": slowest,
                "allgather_over_smx": slowest["allgather"] / slowest["smx"],
                "megatron_over_smx": slowest["megatron"] / slowest["smx"],
                "smx_over_local_plus_stats_reduce_worst_rank": max(
                    r["cases"][k]["ratios"]["smx_over_local_plus_stats_reduce"] for r in every_rank),
                "targets": {"allgather_over_smx": ">= 3", "megatron_over_smx": ">= 2",
                            "smx_over_local_plus_stats_reduce": "<= 1.15"},
            })
        report = {
            "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
            "world_size": world,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "device": torch.cuda.get_device_name(device),
            "torch": torch.__version__,
            "nccl": ".".join(str(v) for v in torch.cuda.nccl.version()),
            "smx_library": smx.library_path(),
            "smx_torch_backend": smx.torch.backend(),
            "warmup": args.warmup,
            "repeats": args.repeats,
            "summary": summary,
            "ranks": every_rank,
        }
        text = json.dumps(report, indent=2)
        if args.out:
            with open(args.out, "w") as out:
                out.write(text + "\n")
        print(text)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
