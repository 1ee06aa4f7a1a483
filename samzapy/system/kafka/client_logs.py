"""What aiokafka's own log messages mean to an operator: which are transient connection errors.

aiokafka logs every failed attempt of its reconnecting at error level ("Unable connect to node
with id 1", "Failed fetch messages from 1", ...): about a hundred lines a second during a
broker outage, for a condition it retries by itself and that samzapy reports once as
``broker_unreachable``. The logging set-up (``samzapy.cli.logging``) logs the messages listed
here at warning, and counts them as one kind of error when it rate-limits them.

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

__all__ = ["CLIENT_LOGGER", "TRANSIENT_MESSAGES"]
