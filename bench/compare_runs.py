#!/usr/bin/env python3
"""Compare the times of two smx-bench runs case by case (smx-bench --json, or compare_torch.py's JSON).

    python3 bench/compare_runs.py docs/benchmarks/smx-bench-h200.json new.json [--spread 0.02]

For every case both runs hold: new time / recorded time (smx_us, the median per call) and the same for graph
replays where both have them. Prints the cases slower than 1 + spread, the median and extreme ratios per
group, and exits 1 when any case is slower than 1 + spread or the median ratio is above 1.01."""
import argparse
import json
import statistics
import sys


def load(path):
    with open(path) as handle:
        document = json.load(handle)
    return {(r["op"], r["x_dtype"], r["y_dtype"], r["label"]): r for r in document["records"]}, document


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("recorded")
    parser.add_argument("new")
    parser.add_argument("--spread", type=float, default=0.02, help="run-to-run spread allowed (default 0.02)")
    args = parser.parse_args()
    recorded, old_document = load(args.recorded)
    new, new_document = load(args.new)
    print(f"recorded: {args.recorded} (copy {old_document.get('copy_tbps')} TB/s)  new: {args.new} "
          f"(copy {new_document.get('copy_tbps')} TB/s, commit {new_document.get('commit')})")
    ratios = {}
    graph_ratios = {}
    slower = []
    for key in sorted(set(recorded) & set(new)):
        old_us, new_us = recorded[key].get("smx_us"), new[key].get("smx_us")
        if not old_us or not new_us:
            continue
        ratio = new_us / old_us
        ratios[key] = ratio
        old_graph, new_graph = recorded[key].get("graph_us"), new[key].get("graph_us")
        if old_graph and new_graph:
            graph_ratios[key] = new_graph / old_graph
        if ratio > 1 + args.spread:
            slower.append((ratio, key, old_us, new_us, graph_ratios.get(key)))
    for ratio, key, old_us, new_us, graph in sorted(slower, reverse=True):
        graph_text = f", graph {graph:.3f}x" if graph else ""
        print(f"SLOWER {ratio:.3f}x {' '.join(key)}: {old_us:.2f} -> {new_us:.2f} us{graph_text}")
    groups = sorted({recorded[key]["group"] for key in ratios})
    for group in groups + ["all"]:
        values = [r for key, r in ratios.items() if group == "all" or recorded[key]["group"] == group]
        graphs = [r for key, r in graph_ratios.items() if group == "all" or recorded[key]["group"] == group]
        if not values:
            continue
        graph_text = f"; graph replay median {statistics.median(graphs):.4f}" if graphs else ""
        print(f"{group}: {len(values)} cases, time ratio median {statistics.median(values):.4f}, "
              f"min {min(values):.3f}, max {max(values):.3f}{graph_text}")
    median = statistics.median(ratios.values()) if ratios else float("nan")
    print(f"{len(slower)} of {len(ratios)} cases slower than {1 + args.spread:.2f}x; median ratio {median:.4f}")
    return 1 if slower or median > 1.01 else 0


if __name__ == "__main__":
    sys.exit(main())
