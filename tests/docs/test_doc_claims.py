"""Statements in the prose of docs/architecture.md, docs/deploy.md and docs/tables.md that the
code can check: what the document says against the module that does it."""

from __future__ import annotations

import re
from pathlib import Path

import samzapy.container.container as container_module

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
