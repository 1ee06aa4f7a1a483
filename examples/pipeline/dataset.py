"""The pipeline's dataset: page views (member id, page, timestamp), seeded, as CSV.

    python -m examples.pipeline.dataset --rows 200000 --out data/page-views.csv

Members follow a Zipf-like popularity, pages a fixed mix, timestamps advance a few hundred
milliseconds per view from 2026-11-22T00:00Z. The same seed always gives the same file.
"""

from __future__ import annotations

import argparse
import csv
import random
from pathlib import Path

PAGES = ["/home", "/jobs", "/feed", "/profile", "/messages", "/search", "/learning", "/groups"]
START_MS = 1_795_305_600_000  # 2026-11-22T00:00:00Z
MEMBERS = 500


def generate(rows: int, out: Path, seed: int = 20171122) -> Path:
    """Write ``rows`` page views to ``out`` (CSV with a header) and return its path."""
    rng = random.Random(seed)
    members = [f"member-{i:04d}" for i in range(MEMBERS)]
    weights = [1.0 / (i + 1) ** 0.8 for i in range(MEMBERS)]
    out.parent.mkdir(parents=True, exist_ok=True)
    ts = START_MS
    with out.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["member_id", "page", "ts"])
        chosen = rng.choices(members, weights, k=rows)
        for member in chosen:
            ts += rng.randint(1, 400)
            writer.writerow([member, rng.choice(PAGES), ts])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description="generate the pipeline's page views (CSV)")
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--out", type=Path, default=Path("data/pipeline/page-views.csv"))
    parser.add_argument("--seed", type=int, default=20171122)
    args = parser.parse_args()
    print(generate(args.rows, args.out, args.seed))


if __name__ == "__main__":
    main()
