"""What aiokafka's own log messages mean to an operator: which are transient connection errors,
and which are the normal course of a group's rebalance or first start.

aiokafka logs every failed attempt of its reconnecting at error level ("Unable connect to node
with id 1", "Failed fetch messages from 1", ...): about a hundred lines a second during a
broker outage, for a condition it retries by itself and that samzapy reports once as
``broker_unreachable``. The logging set-up (``samzapy.cli.logging``) logs the messages listed
here at warning, and counts them as one kind of error when it rate-limits them.

A group's rebalance (a container joined or left) and its first start on a broker (the
group's coordinator not elected yet) make aiokafka log at warning or error what it handles
by itself (``ROUTINE_MESSAGES``, and ``ROUTINE_ON_ERROR`` when the error they report is one
of ``ROUTINE_ERRORS``): an operator alerting on warnings was paged at every deploy. The
logging set-up logs those at info.

Plain strings, matched against a record's unformatted message (``LogRecord.msg``): this module
imports nothing, so the logging set-up can read it without loading aiokafka.
"""

from __future__ import annotations

from typing import Final

#: The logger whose records (and its children's) these templates belong to.
CLIENT_LOGGER: Final = "aiokafka"

#: aiokafka 0.11+ messages about a broker or coordinator that cannot be reached (yet).
TRANSIENT_MESSAGES: Final = frozenset(
    {
        'Unable connect to "%s:%s": %s',
        "Unable connect to node with id %s: %s",
        "Unable to update metadata from %s",
        'Unable to request metadata from "%s:%s": %s',
        "Unable to request metadata from node with id %s: %r",
        "Failed fetch messages from %s: %s",
        "Failed fetch offsets from %s: %s",
        "Group Coordinator Request failed: %s",
        "FindCoordinator Request failed: %s",
        "Error sending %s to node %s [%s] -- marking coordinator dead",
        "Heartbeat send request failed: %s. Will retry.",
        "Marking the coordinator dead (node %s)for group %s.",
        "Heartbeat failed for group %s: coordinator (node %s) is either not started or not valid",
        "Got error produce response: %s",
        "Got error produce response on topic-partition %s, retrying. Error: %s",
        "Heartbeat session expired - marking coordinator dead",
        "Cannot send %r to %s: %r",
        "Could not send %r: %r",
    }
)

#: aiokafka messages that are the normal course of a rebalance: the group's other members
#: learn of it through their heartbeats.
ROUTINE_MESSAGES: Final = frozenset({"Heartbeat failed for group %s because it is rebalancing"})

#: aiokafka messages that are routine when the error among their arguments is one of
#: ``ROUTINE_ERRORS``; with any other error they are not.
ROUTINE_ON_ERROR: Final = frozenset(
    {
        "Group Coordinator Request failed: %s",
        "OffsetCommit failed for group %s due to group error (%s), will rejoin",
    }
)

#: Class names of the errors that make a ``ROUTINE_ON_ERROR`` message routine: the group's
#: coordinator not elected or not loaded yet (a first start on a broker), a rebalance.
ROUTINE_ERRORS: Final = frozenset(
    {
        "GroupCoordinatorNotAvailableError",
        "GroupLoadInProgressError",
        "RebalanceInProgressError",
    }
)


def is_routine(logger: str, template: str, args: object) -> bool:
    """Whether a record of ``logger`` (its unformatted message ``template`` and its
    ``args``) is the normal course of a rebalance or of a group's first start."""
    if logger.split(".", 1)[0] != CLIENT_LOGGER:
        return False
    if template in ROUTINE_MESSAGES:
        return True
    return (
        template in ROUTINE_ON_ERROR
        and isinstance(args, tuple)
        and any(type(arg).__name__ in ROUTINE_ERRORS for arg in args)
    )


__all__ = [
    "CLIENT_LOGGER",
    "ROUTINE_ERRORS",
    "ROUTINE_MESSAGES",
    "ROUTINE_ON_ERROR",
    "TRANSIENT_MESSAGES",
    "is_routine",
]
