#!/usr/bin/env python3
"""Compare the plans smx makes now (`smx-bench --plans` output) with the plans recorded in benchmark JSON.

    ./build/bench/smx-bench --plans > plans.tsv
    python3 bench/compare_plans.py plans.tsv docs/benchmarks/smx-bench-h200.json

Prints every case whose plan differs or that one side lacks, then a summary line; exits 1 if any plan differs.
A refactoring of the planners must leave every recorded plan identical (the records carry the plan each
case ran)."""
import argparse
import csv
import json
import sys


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("plans", help="smx-bench --plans output (tab-separated)")
    parser.add_argument("records", help="benchmark JSON with a 'records' list (smx-bench --json, compare_torch.py)")
    args = parser.parse_args()

    with open(args.plans, newline="") as handle:
        now = {(row["op"], row["x_dtype"], row["y_dtype"], row["label"]): row["plan"]
               for row in csv.DictReader(handle, delimiter="\t")}
    with open(args.records) as handle:
        recorded = {(r["op"], r["x_dtype"], r["y_dtype"], r["label"]): r["plan"]
                    for r in json.load(handle)["records"] if r.get("plan")}

    same = different = 0
    for key in sorted(set(now) & set(recorded)):
        if now[key] == recorded[key]:
            same += 1
        else:
            different += 1
            print(f"DIFFERENT {' '.join(key)}\n  recorded: {recorded[key]}\n  now:      {now[key]}")
    for key in sorted(set(recorded) - set(now)):
        print(f"NOT PLANNED NOW {' '.join(key)}")
    for key in sorted(set(now) - set(recorded)):
        print(f"NOT RECORDED {' '.join(key)}")
    print(f"{same} plans identical, {different} different, {len(set(recorded) - set(now))} recorded but not planned "
          f"now, {len(set(now) - set(recorded))} planned but not recorded ({args.records})")
    return 1 if different else 0


if __name__ == "__main__":
    sys.exit(main())
