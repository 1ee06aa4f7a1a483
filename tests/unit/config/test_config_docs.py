"""docs/configuration.md against the schema: every known key documented, every default exact.

The key tables of the page have the columns ``key | type | default | meaning``. A default cell
is ``required``, ``unset`` (the key has no default) or one backticked YAML literal, which must
load to the schema's default.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from samzapy.config.schema import KNOWN_KEYS, NAMESPACES, ConfigKey, Kind

DOC = Path(__file__).resolve().parents[3] / "docs" / "configuration.md"
KEYS = {spec.pattern: spec for spec in KNOWN_KEYS}


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _key_rows(text: str) -> dict[str, list[str]]:
    """The rows of the key tables: backticked key of a samzapy namespace -> its cells."""
    rows: dict[str, list[str]] = {}
    for line in text.splitlines():
        if not line.startswith("| `"):
            continue
        cells = _cells(line)
        key = cells[0].strip("`")
        if key.split(".", 1)[0] not in {*NAMESPACES, "app"}:
            continue  # another table (serdes, types)
        assert len(cells) == 4, f"row of {key} must have 4 cells, has {len(cells)}: {line}"
        assert key not in rows, f"{key} has two rows in {DOC.name}"
        rows[key] = cells
    return rows


TEXT = DOC.read_text(encoding="utf-8")
ROWS = _key_rows(TEXT)


def _expected_default(spec: ConfigKey) -> Any:
    default = spec.default
    return list(default) if isinstance(default, tuple) else default


def _parse_default(cell: str) -> tuple[bool, Any]:
    """(True, value) for a backticked YAML literal; (False, cell) for plain text."""
    if "`" not in cell:
        return False, cell
    assert cell.startswith("`") and cell.endswith("`") and cell.count("`") == 2, (
        f"a default must be one backticked literal, got {cell!r}"
    )
    return True, yaml.safe_load(cell[1:-1])


@pytest.mark.parametrize("pattern", sorted(KEYS))
def test_every_known_key_has_a_table_row(pattern: str) -> None:
    assert f"`{pattern}`" in TEXT
    assert pattern in ROWS, f"{pattern} has no row in a key table of {DOC.name}"


def test_every_table_row_is_a_known_key() -> None:
    unknown = sorted(set(ROWS) - set(KEYS))
    assert unknown == []


@pytest.mark.parametrize(
    "pattern", sorted(p for p in KEYS if p.split(".", 1)[0] in ("job", "task"))
)
def test_job_and_task_defaults_match_the_schema(pattern: str) -> None:
    _check_default(KEYS[pattern], ROWS[pattern][2])


@pytest.mark.parametrize(
    "pattern", sorted(p for p in KEYS if p.split(".", 1)[0] not in ("job", "task"))
)
def test_other_defaults_match_the_schema(pattern: str) -> None:
    _check_default(KEYS[pattern], ROWS[pattern][2])


def _check_default(spec: ConfigKey, cell: str) -> None:
    is_literal, value = _parse_default(cell)
    expected = _expected_default(spec)
    if expected is None:
        assert not is_literal, f"{spec.pattern} has no default, the doc shows {cell!r}"
        wanted = ("required",) if spec.required else ("required", "unset")
        assert value in wanted, f"{spec.pattern}: default cell {cell!r}, expected {wanted}"
        return
    assert is_literal, f"{spec.pattern}: default {expected!r} expected, the doc shows {cell!r}"
    assert (type(value), value) == (type(expected), expected), spec.pattern


@pytest.mark.parametrize("pattern", sorted(KEYS))
def test_types_match_the_schema(pattern: str) -> None:
    spec = KEYS[pattern]
    cell = ROWS[pattern][1]
    assert cell.split(":")[0].split(" ")[0] == spec.kind.value, pattern
    if spec.maximum is not None:
        assert cell == f"{spec.kind.value} {spec.minimum} to {spec.maximum}", pattern
    elif spec.minimum is not None:
        assert cell == f"{spec.kind.value} >= {spec.minimum}", pattern
    if spec.kind is Kind.ENUM:
        assert cell == "enum: " + ", ".join(f"`{c}`" for c in spec.choices or ()), pattern


def test_reserved_keys_are_marked() -> None:
    # samzapy acts on every key it accepts, so no row may still call its key reserved.
    marked = [key for key, cells in ROWS.items() if "reserved" in cells[3].lower()]
    assert marked == []


@pytest.mark.parametrize("pattern", sorted(p for p, s in KEYS.items() if s.kind is Kind.INT))
def test_zero_is_refused_where_the_schema_refuses_it(pattern: str) -> None:
    # A replication factor takes -1 or a count >= 1: the row says "`0` is refused" exactly
    # when the schema's check refuses 0 in the first round, with every other key problem.
    says = "`0` is refused" in ROWS[pattern][3]
    assert says == KEYS[pattern].replicas, pattern
