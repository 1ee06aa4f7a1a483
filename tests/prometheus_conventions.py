"""Prometheus' naming conventions, as a check over a scrape of ``/metrics``.

Shared by tests/unit/metrics/test_prometheus_conventions.py (the exporter, on a registry the test
fills) and tests/integration/test_metrics_conventions.py (a real container across a rebalance).
The rules (prometheus.io, "Metric and label naming" and "Metric types"):

1. names are ``[a-z_:][a-z0-9_:]*``, snake case, with the application's prefix ``samzapy_``;
2. a counter's samples end in ``_total``; nothing else does;
3. a histogram has cumulative ``_bucket`` samples ending at ``le="+Inf"`` (equal to
   ``_count``), ``_count`` and ``_sum``; durations are in seconds and say so (``_seconds``);
4. HELP says what the metric means and names its unit, in parentheses at the end;
5. a name the catalogue knows as a count is a counter, as a level a gauge, as a duration a
   histogram.
"""

from __future__ import annotations

import re
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from samzapy.metrics.catalogue import DESCRIPTIONS
from samzapy.metrics.prometheus import sanitize

NAME = re.compile(r"^samzapy_[a-z0-9_:]*[a-z0-9]$")
HELP_WITH_UNIT = re.compile(r"^[A-Z].* \([a-z]+\)\.$")
KIND_TYPES = {"counter": "counter", "gauge": "gauge", "timer": "histogram"}


def families(text: str) -> dict[str, Any]:
    return {family.name: family for family in text_string_to_metric_families(text)}


def problems(text: str) -> list[str]:
    """Every breach of the rules above in the exposition ``text``; [] when it follows them."""
    found: list[str] = []
    kinds = {sanitize(name).lower(): d for name, d in DESCRIPTIONS.items() if d.kind}
    for name, family in families(text).items():
        if not NAME.match(name):
            found.append(f"{name}: not a snake-case samzapy_ name")
        if not HELP_WITH_UNIT.match(family.documentation):
            found.append(f"{name}: HELP {family.documentation!r} does not end with its (unit)")
        samples = [s.name for s in family.samples]
        if family.type == "counter":
            if any(not s.endswith("_total") for s in samples):
                found.append(f"{name}: a counter sample without _total: {samples}")
        elif any(s.endswith("_total") for s in samples):
            found.append(f"{name}: a {family.type} sample ends in _total: {samples}")
        if family.type == "histogram":
            found += _histogram_problems(name, family)
        known = next(
            (d for suffix, d in kinds.items() if name.endswith(f"_{suffix}")
             or name.endswith(f"_{suffix}_seconds")),
            None,
        )  # fmt: skip
        if known is not None and known.kind is not None:
            expected = KIND_TYPES[known.kind]
            if family.type != expected:
                found.append(f"{name}: a {family.type}, but it is a {known.kind} ({known.help})")
        if (family.type == "histogram" or (known and known.unit == "seconds")) and not (
            name.endswith("_seconds")
        ):
            found.append(f"{name}: a duration whose name does not end in _seconds")
    return found


def _histogram_problems(name: str, family: Any) -> list[str]:
    found = []
    series: dict[tuple[tuple[str, str], ...], dict[str, Any]] = {}
    for sample in family.samples:
        labels = tuple(sorted((k, v) for k, v in sample.labels.items() if k != "le"))
        entry = series.setdefault(labels, {"buckets": [], "count": None, "sum": None})
        if sample.name.endswith("_bucket"):
            entry["buckets"].append((float(sample.labels["le"]), sample.value))
        elif sample.name.endswith("_count"):
            entry["count"] = sample.value
        elif sample.name.endswith("_sum"):
            entry["sum"] = sample.value
    for labels, entry in series.items():
        buckets = sorted(entry["buckets"])
        counts = [value for _, value in buckets]
        if not buckets or buckets[-1][0] != float("inf"):
            found.append(f"{name}{dict(labels)}: no +Inf bucket")
        elif counts != sorted(counts) or counts[-1] != entry["count"]:
            found.append(f"{name}{dict(labels)}: buckets not cumulative up to _count")
        if entry["sum"] is None or len(buckets) < 3:
            found.append(f"{name}{dict(labels)}: _sum missing or too few buckets")
    return found
