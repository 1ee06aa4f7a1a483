"""Before and after in one run: bench_container's figures for this checkout and an earlier
commit, in interleaved rounds, with the median ratio of each figure.

A shared machine's rate moves by a third between runs, so a figure measured yesterday says
little. This script checks the earlier commit out into a temporary git worktree, then runs
``bench/bench_container.py --json`` (this checkout's script) in a fresh process per round,
importing samzapy from either tree in turn (who goes first alternates), and prints per
figure: the median rate and CPU time per message of each side and the median of the
per-round ratios (after / before), with their range. The CPU ratio is the steadier of the
two. The same code on both sides (``--against HEAD``) read medians of 0.88 to 1.10 here over
3 rounds, single rounds 0.75 to 1.35: a ratio inside that range says nothing.

Usage: python bench/ab.py --against COMMIT [--rounds 5] [-- bench_container arguments...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench" / "bench_container.py"


def figures(tree: Path, extra: list[str]) -> dict[str, dict[str, float]]:
    """One bench run importing samzapy from ``tree``."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(
        [sys.executable, str(BENCH), "--json", "--rounds", "1", *extra],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"the bench failed on {tree}:\n{done.stdout}{done.stderr}")
    result: dict[str, dict[str, float]] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", required=True, help="the earlier commit")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("bench_args", nargs="*", help="passed to bench_container.py")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "bench"))
    from bench_kafka import tree_of  # the earlier tree with its C extension built

    with tree_of(args.against) as before_tree:
        assert before_tree is not None
        runs: dict[str, list[dict[str, dict[str, float]]]] = {"before": [], "after": []}
        for i in range(args.rounds):
            order = [("before", before_tree), ("after", ROOT)]
            for side, tree in order if i % 2 == 0 else reversed(order):
                runs[side].append(figures(tree, args.bench_args))
            print(f"round {i + 1} of {args.rounds} done", file=sys.stderr)
    print(f"{args.rounds} interleaved rounds, before = {args.against}, after = this checkout")
    print(
        f"{'figure':<42} {'before msg/s':>13} {'after msg/s':>12} {'ratio':>6} {'range':>11}   "
        f"{'before us/msg':>13} {'after us/msg':>12} {'ratio':>6} {'range':>11}"
    )
    for name in runs["after"][0]:
        before = [r[name] for r in runs["before"]]
        after = [r[name] for r in runs["after"]]
        rates = [a["rate"] / b["rate"] for a, b in zip(after, before, strict=True)]
        cpus = [a["cpu_us"] / b["cpu_us"] for a, b in zip(after, before, strict=True)]
        print(
            f"{name:<42} {statistics.median(b['rate'] for b in before):>13,.0f} "
            f"{statistics.median(a['rate'] for a in after):>12,.0f} "
            f"{statistics.median(rates):>6.2f} {_range(rates):>11}   "
            f"{statistics.median(b['cpu_us'] for b in before):>13.2f} "
            f"{statistics.median(a['cpu_us'] for a in after):>12.2f} "
            f"{statistics.median(cpus):>6.2f} {_range(cpus):>11}"
        )


def _range(ratios: list[float]) -> str:
    return f"{min(ratios):.2f}-{max(ratios):.2f}"


if __name__ == "__main__":
    main()
