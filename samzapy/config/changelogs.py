"""Checks of the stores' changelogs: each store has a changelog of its own, which the job does
not read as an input.

A restore replays a changelog partition into one store and truncates it to the offset the
store's checkpoint names: a second store writing to the same stream would have its entries
loaded into the first, and its records past the first's checkpoint rewritten as the first's
(Samza refuses this too: "Two stores cannot have the same changelog system-stream"). A
changelog that is an input feeds the store's writes back to the task as messages.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from samzapy.config.guarantee import parse_system_stream


def changelog_problems(
    values: Mapping[str, Any],
    stores: Iterable[str],
    inputs: Iterable[tuple[str, str]],
    problem: Callable[[str | None, str], None],
) -> None:
    """Report a changelog (``stores.<name>.changelog``) that another store has too, or that is
    an input of the job (``inputs``: ``(system, physical stream)`` pairs)."""
    read = {(system, stream) for system, stream in inputs}
    owners: dict[tuple[str, str], str] = {}
    for store in sorted(stores):
        key = f"stores.{store}.changelog"
        changelog = values.get(key)
        ss = parse_system_stream(changelog) if isinstance(changelog, str) else None
        if ss is None:
            continue  # not set, or not 'system.stream' (reported with the references)
        if ss in owners:
            problem(
                key,
                f"{key} is {changelog}, the changelog of store '{owners[ss]}' too: each store "
                "needs a changelog of its own (a restore would load one store's entries into "
                "the other); give one of them another stream",
            )
        else:
            owners[ss] = store
        if ss in read:
            problem(
                key,
                f"{key} is {changelog}, an input of the job: the store's writes would come "
                "back to its task as messages; give the changelog a stream of its own",
            )


__all__ = ["changelog_problems"]
