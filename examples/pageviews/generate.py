"""Generate the quick-start's page views: seeded, partitioned by member id like Kafka would.

    python -m examples.pageviews.generate [--rows N] [--partitions P] [--out DIR]

Writes DIR/page-views/<p>.jsonl; each line {"member_id", "page", "ts"} (ts in ms). A member's
views all land in partition murmur2(member_id) % P, the partition Kafka's default
partitioner would choose. Two rows are deliberately malformed (no member id) so the
quick-start shows its dead-letter stream.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from samzapy.system.partitioner import partition_for

PAGES = ["/home", "/jobs", "/feed", "/profile", "/messages", "/search", "/learning", "/groups"]


def generate(rows: int, partitions: int, out: Path, seed: int = 20161122) -> None:
    rng = random.Random(seed)
    members = [f"member-{i:04d}" for i in range(200)]
    weights = [1.0 / (i + 1) for i in range(len(members))]
    files = [[] for _ in range(partitions)]  # type: list[list[str]]
    ts = 1_700_000_000_000
    for i in range(rows):
        member = rng.choices(members, weights)[0]
        ts += rng.randint(1, 2000)
        view = {"member_id": member, "page": rng.choice(PAGES), "ts": ts}
        if i in (rows // 3, 2 * rows // 3):
            view = {"page": rng.choice(PAGES), "ts": ts}  # malformed: no member id
            files[i % partitions].append(json.dumps(view, separators=(",", ":")))
            continue
        files[partition_for(member.encode(), partitions)].append(
            json.dumps(view, separators=(",", ":"))
        )
    target = out / "page-views"
    target.mkdir(parents=True, exist_ok=True)
    for p, lines in enumerate(files):
        (target / f"{p}.jsonl").write_text("".join(line + "\n" for line in lines))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="generate the quick-start page views")
    parser.add_argument("--rows", type=int, default=6000)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "data")
    a = parser.parse_args()
    generate(a.rows, a.partitions, a.out)
