"""What ``task.processing.guarantee: exactly-once`` asks of a job's configuration.

Exactly-once commits a task's outputs, its changelog writes and its checkpoint in one Kafka
transaction, and a transaction spans one Kafka cluster. So:

1. checkpoints are in a stream (``task.checkpoint.factory`` kafka or stream) on a kafka
   system: *the* transactional system of the job;
2. every store changelog is on that system;
3. every stream the job declares, other than its inputs, and its dead-letter stream are on
   that system (a send to any other system fails at run time too);
4. ``task.commit.ms`` is positive (a transaction commits at each commit) and shorter than
   the transaction timeout, ``task.transaction.timeout.ms`` or the one derived from
   ``task.commit.ms`` (the broker aborts longer transactions);
5. failed sends are not dropped (``task.drop.producer.errors``): their transaction cannot
   commit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from samzapy.config.checkpoints import STREAM_FACTORIES

EXACTLY_ONCE = "exactly-once"
KEY = "task.processing.guarantee"
#: The longest derived transaction timeout: the broker's default transaction.max.timeout.ms.
MAX_DERIVED = 900_000


def transaction_timeout_ms(configured: int, commit_ms: int) -> int:
    """The transaction timeout in ms: ``configured`` when positive, else three commit
    intervals and at least a minute, at most 15 minutes (``MAX_DERIVED``)."""
    if configured > 0:
        return configured
    return min(max(60_000, 3 * commit_ms), MAX_DERIVED)


def exactly_once_problems(
    values: Mapping[str, Any],
    factories: Mapping[str, str | None],
    streams: tuple[str, ...],
    problem: Callable[[str, str], None],
) -> None:
    """Report, through ``problem(key, message)``, what keeps ``values`` (typed keys) from
    running exactly-once; nothing when the guarantee is at-least-once."""
    if values.get(KEY) != EXACTLY_ONCE:
        return
    why = f"{KEY} is {EXACTLY_ONCE}"
    commit_ms = values.get("task.commit.ms", 60000)
    if not isinstance(commit_ms, int) or commit_ms <= 0:
        problem("task.commit.ms", f"task.commit.ms must be > 0 when {why}, got {commit_ms!r}")
    timeout = values.get("task.transaction.timeout.ms")
    if isinstance(timeout, int) and isinstance(commit_ms, int) and 0 < timeout <= commit_ms:
        problem(
            "task.transaction.timeout.ms",
            f"task.transaction.timeout.ms must be longer than task.commit.ms ({commit_ms}), "
            f"got {timeout}: the broker aborts a transaction open longer than it",
        )
    elif timeout in (None, -1, 0) and isinstance(commit_ms, int) and commit_ms >= MAX_DERIVED:
        problem(
            "task.commit.ms",
            f"task.commit.ms must be < {MAX_DERIVED} when {why} and task.transaction.timeout.ms "
            f"is unset, got {commit_ms}: the derived transaction timeout is at most {MAX_DERIVED} "
            "and the broker aborts a transaction open longer than it (or set "
            "task.transaction.timeout.ms longer than task.commit.ms)",
        )
    if values.get("task.drop.producer.errors") is True:
        problem(
            "task.drop.producer.errors",
            f"task.drop.producer.errors must be false when {why}: a transaction with a failed "
            "send cannot commit",
        )
    system = _checkpoint_system(values, factories, why, problem)
    if system is None:
        return
    where = f"the checkpoints' kafka system '{system}'"
    for key, value in sorted(values.items()):
        if key.startswith("stores.") and key.endswith(".changelog") and isinstance(value, str):
            ss = parse_system_stream(value)
            if ss is not None and ss[0] != system:
                problem(key, f"{key} must be on {where} when {why}, got {value!r}")
    dead_letter = values.get("task.dead.letter.stream")
    if isinstance(dead_letter, str) and dead_letter.partition(".")[0] != system:
        problem(
            "task.dead.letter.stream",
            f"task.dead.letter.stream must be on {where} when {why}, got {dead_letter!r}",
        )
    inputs = {parse_system_stream(i) for i in values.get("task.inputs") or ()}
    for stream in streams:
        prefix = f"streams.{stream}.samza."
        declared = values.get(prefix + "system")
        if not isinstance(declared, str) or declared == system:
            continue
        physical = values.get(f"streams.{stream}.samza.physical.name") or stream
        is_input = any(i is not None and i == (declared, physical) for i in inputs)
        if not is_input or values.get(prefix + "intermediate") is True:
            problem(
                prefix + "system",
                f"{prefix}system must be {where} when {why} (it is written by the job), "
                f"got {declared!r}",
            )


def parse_system_stream(text: str) -> tuple[str, str] | None:
    system, dot, stream = text.partition(".")
    return (system, stream) if dot and system and stream else None


def _checkpoint_system(
    values: Mapping[str, Any],
    factories: Mapping[str, str | None],
    why: str,
    problem: Callable[[str, str], None],
) -> str | None:
    factory = values.get("task.checkpoint.factory")
    if factory not in STREAM_FACTORIES:
        problem(
            "task.checkpoint.factory",
            f"task.checkpoint.factory must be kafka when {why} (checkpoints commit with the "
            f"outputs in a Kafka transaction), got {factory!r}",
        )
        return None
    system = values.get("task.checkpoint.system")
    if system is None:
        kafka = [name for name, f in factories.items() if f == "kafka"]
        system = kafka[0] if len(kafka) == 1 else None
    if not isinstance(system, str) or factories.get(system) != "kafka":
        problem(
            "task.checkpoint.system",
            f"task.checkpoint.system must name a kafka system when {why}, got {system!r}",
        )
        return None
    return system


__all__ = ["EXACTLY_ONCE", "KEY", "exactly_once_problems", "transaction_timeout_ms"]
