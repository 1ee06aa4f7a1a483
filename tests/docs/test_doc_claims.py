"""Statements in the prose of docs/architecture.md, docs/deploy.md, docs/tables.md and
docs/api.md that the code can check: what the document says against the module that does it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import samzapy.container.container as container_module
from samzapy.metrics.catalogue import DESCRIPTIONS
from samzapy.metrics.prometheus import sanitize

ROOT = Path(__file__).resolve().parents[2]


def _section(document: str, heading: str) -> str:
    """The text of the section under ``heading`` (to the next heading of any level)."""
    text = (ROOT / "docs" / document).read_text(encoding="utf-8")
    start = text.index(heading + "\n")
    following = re.search(r"^#+ ", text[start + len(heading) :], re.M)
    end = start + len(heading) + (following.start() if following else len(text))
    return text[start:end]


def test_architecture_start_up_has_the_containers_steps() -> None:
    """The Start-up section numbers the steps of ``SamzaContainer._start`` (its comments
    ``# 1.`` to ``# N.``), which the module overview calls by count and by number."""
    source = Path(container_module.__file__).read_text(encoding="utf-8")
    body = source[source.index("    async def _start(") :]
    body = body[: body.index("\n    async def ", 1)]
    steps = re.findall(r"^\s+# (\d+)\. ", body, re.M)
    assert steps == [str(n) for n in range(1, len(steps) + 1)]
    section = _section("architecture.md", "## Start-up (`container/container.py`)")
    documented = re.findall(r"^(\d+)\. ", section, re.M)
    assert documented == steps


def _registered_names() -> dict[str, str]:
    """Every metric name samzapy's own code registers as a literal, with its kind
    (``counter``, ``gauge``, ``timer``): ``registry.counter(group, "name", ...)``."""
    names: dict[str, str] = {}
    for path in (ROOT / "samzapy").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("counter", "gauge", "timer")
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)
            ):
                names[node.args[1].value] = node.func.attr
    return names


def test_deploy_metrics_table_lists_every_metric_the_container_registers() -> None:
    """docs/deploy.md, "Metrics": one row per metric of the container, with the kind and
    unit of the catalogue (the HELP text), and series named by the exporter's rule; the
    catalogue describes every metric the code registers by a literal name, as that kind."""
    registered = _registered_names()
    assert registered, "no metric registrations found"
    for name, kind in registered.items():
        assert name in DESCRIPTIONS, f"{name} is registered but not in the catalogue"
        assert DESCRIPTIONS[name].kind == kind, f"{name} is registered as a {kind}"
    types = {"counter": "counter", "gauge": "gauge", "timer": "histogram"}
    rows = {}
    for line in _section("deploy.md", "## Metrics").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = cells
    assert sorted(rows) == sorted(DESCRIPTIONS)
    for name, (_, series, kind, unit, _) in rows.items():
        described = DESCRIPTIONS[name]
        assert described.kind is not None
        assert (kind, unit) == (types[described.kind], described.unit), name
        stem = sanitize(name)
        if described.kind == "counter":
            stem = f"{stem.removesuffix('_total')}_total"
        elif described.kind == "timer" and not stem.endswith("_seconds"):
            stem = f"{stem}_seconds"
        for exported in re.findall(r"`([^`]+)`", series):
            group = re.fullmatch(rf"samzapy_([a-z]+)_{stem}(\{{([a-z]+)\}})?", exported)
            assert group is not None, f"{name}: {exported}"
            if group[2] is not None:
                assert group[3] == group[1], f"{name}: {exported} is labelled by its group kind"


def test_api_lists_the_composite_triggers_triggers_lacks_as_not_supported() -> None:
    """docs/api.md lists each trigger ``Triggers`` makes, and names Beam's composite triggers
    it does not make (all-of, until, after-each) under "Not supported yet"."""
    from samzapy import Triggers

    made = sorted(name for name in vars(Triggers) if not name.startswith("_"))
    assert made == ["any", "count", "repeat", "time_since_first_message", "time_since_last_message"]
    section = _section("api.md", "### Triggers and accumulation modes")
    assert all(f"`Triggers.{name}(" in section for name in made)
    missing = _section("api.md", "### Not supported yet")
    for beam in ("all-of", "until", "after-each"):
        assert beam in missing
