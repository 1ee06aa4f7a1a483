"""What a window does with its state when its serdes refuse it outside the call of a message
(``Refusals``): a held list its value serde cannot write back (at a commit, as panes fire at a
tick, a watermark or end-of-stream: ``held_values.py``; or in a message's call, when the list
without that message is refused too: grown too large by earlier messages, ``trim_refused``),
a pane whose value or key it cannot read as the pane fires (or whose key, as a restart reads
its trigger state: that state is let go, its pane dropped as it fires), and a pane's stored
value it cannot read as a later message of its key comes (``unreadable_stored``: failing that
message failed each later one of its key on the same entry, so it is let go once, and the
message starts a fresh pane). A stream-stream join's stored message that its side's serde
cannot read as a message of its key comes from the other side is the same (``JoinRefusals``):
let go once, the message joining as if the other side held nothing for its key.

Such a refusal belongs to no call the container could drop: failing the task there failed it
again after each restart, on the same input, a crash loop holding the partition. Under
``task.drop.process.errors`` the window drops what the serde refuses instead: a held list loses
its last messages, as few as the serde then accepts (``held_values.longest_accepted``, through
the window's ``trim_held``), a pane it cannot read is not sent. Either is logged as
``message_dropped`` (operator, how many messages or which pane; no partition nor offset, and no
dead letter: no one input record is to blame) and counted in the ``container`` metric
``process-errors``, and the commit or firing goes on, its checkpoint past them. As the
container's drops are, each kind of line is logged at most once per ``DROP_LOG_INTERVAL_S``
per window or join (its task's: there is no partition to name), with ``not_logged``, how many were
not since the last; the metric counts every one. Without the
key the task fails as before, with the serde's own error (a note on it names the window, its
serde, the key it could not read, and the drop key that would drop what it refused).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog

from samzapy.api.descriptors import KVSerde
from samzapy.config.schema import lookup
from samzapy.metrics.log_limit import LogLimit

log = structlog.get_logger("samzapy.operators")
#: The key that drops what the serde refuses (as it drops the messages a task fails on).
_DROP = "task.drop.process.errors"


class Drops:
    """What ``task.drop.process.errors`` does with state of an operator (``op_id``, a
    ``kind``: window, join) its serdes refuse outside a message it could drop: the key read
    from its task's ``context``, the count, the rate-limited log lines."""

    __slots__ = ("count", "drop", "limit", "op_id", "task", "where")

    def __init__(self, op_id: str, kind: str, context: Any) -> None:
        self.op_id = op_id
        self.where = f"{kind} {op_id!r}"
        (key,) = lookup(_DROP)
        self.drop: bool = key.coerce(context.config.get(_DROP, key.default))
        self.task = str(getattr(context, "task_name", ""))
        metrics = getattr(context, "metrics", None) if self.drop else None
        self.count = None if metrics is None else metrics.counter("container", "process-errors")
        #: Each kind of line at most once per interval, as the container's drops.
        self.limit: LogLimit[str] = LogLimit()

    def _unless_dropping(self, error: Exception, what: str, instead: str) -> None:
        """Raise ``error`` (``what`` the serde did), noting what the drop key would do
        (``instead``), unless that key is on; a MemoryError always (the process, not the
        state, as for a message)."""
        if isinstance(error, MemoryError):
            raise error
        if not self.drop:
            error.add_note(f"{what}, in {self.where}; {_DROP}: true would {instead}")
            raise error

    def _dropped(
        self, count: int, error: Exception, what: str, event: str = "message_dropped", **fields: Any
    ) -> None:
        """``count`` messages dropped, the serde having done ``what``: counted and logged."""
        if self.count is not None:
            self.count.inc(count)
        self._log(
            event,
            task=self.task,
            operator=self.op_id,
            **fields,
            error=repr(error),
            reason=f"{what}, and {_DROP} is true",
        )

    def _log(self, event: str, **fields: Any) -> None:
        """A warning ``event``, unless one was logged less than ``DROP_LOG_INTERVAL_S`` ago
        (then counted for the next one's ``not_logged``)."""
        if (not_logged := self.limit.due(event)) is not None:
            log.warning(event, **fields, not_logged=not_logged)


class Refusals(Drops):
    """A window's state its value serde refuses outside its messages' calls (module
    docstring). ``window``: the operator, whose ``trim_held(skey, value)`` takes the last
    messages out of such a value (store key ``skey``'s) until the serde accepts it, and
    returns its bytes (None: nothing left) and how many it lost; ``context``: its task's,
    for the drop key and the count."""

    __slots__ = ("kserde", "serde", "trim")

    def __init__(self, window: Any, context: Any) -> None:
        super().__init__(window.op_id, "window", context)
        self.trim: Callable[[bytes, Any], tuple[bytes | None, int]] = window.trim_held
        self.serde = _named(window.window.value_serde)
        self.kserde = _named(window.window.key_serde)

    def __call__(self, skey: bytes, value: Any, error: Exception) -> bytes | None:
        serde = f"the value serde {self.serde}"
        self._unless_dropping(
            error, f"{serde} refused a pane it holds", "drop the pane's last messages instead"
        )
        data, lost = self.trim(skey, value)
        what = "refused the pane they were the last messages of, held since its last write-back"
        self._dropped(lost, error, f"{serde} {what}", messages=lost)
        return data

    def unreadable(self, error: Exception, key: Any, pane: int) -> None:
        """The serde cannot read (``error``) the value of ``key``'s pane ``pane`` as it
        fires: dropped (logged, counted), or the task fails."""
        serde = f"the value serde {self.serde}"
        self._unless_dropping(
            error,
            f"{serde} cannot read the pane {pane} of key {key!r} as it fires",
            "drop the pane instead",
        )
        what = f"{serde} cannot read the pane they are the messages of"
        self._dropped(1, error, what, pane_id=pane, key=repr(key))

    def unreadable_stored(self, error: Exception, key: Any, pane: int) -> None:
        """The serde cannot read (``error``) the value stored for ``key``'s pane ``pane`` as
        a message of that key comes: let go once (logged, counted), the message starting a
        fresh pane, or the task fails naming the store, the key and the serde."""
        serde = f"the value serde {self.serde}"
        self._unless_dropping(
            error,
            f"{serde} cannot read the value of key {key!r} in the pane {pane} stored in "
            f"store {self.op_id!r}",
            "let that value go instead, the message starting a fresh pane",
        )
        what = f"{serde} cannot read the pane's stored value, let go as a message of its key came"
        self._dropped(1, error, what, pane_id=pane, key=repr(key), event="stored_pane_dropped")

    def unreadable_key(self, error: Exception, kbytes: bytes, pane: int) -> None:
        """The key serde cannot read (``error``) the key ``kbytes`` of the pane ``pane`` as
        it fires: dropped (logged, counted), or the task fails."""
        serde, shown = f"the key serde {self.kserde}", _shown(kbytes)
        self._unless_dropping(
            error,
            f"{serde} cannot read the key {shown} of the pane {pane}",
            "drop the pane instead",
        )
        what = f"{serde} cannot read the key of the pane they are the messages of"
        self._dropped(1, error, what, pane_id=pane, key_bytes=shown)

    def unreadable_trigger_key(self, error: Exception, kbytes: bytes, pane: int) -> None:
        """The key serde cannot read (``error``) the key ``kbytes`` of a trigger's state as a
        restart reads it: let go (logged; its pane, whose messages are held apart, is dropped
        and counted as it fires), or the task fails."""
        serde, shown = f"the key serde {self.kserde}", _shown(kbytes)
        self._unless_dropping(
            error,
            f"{serde} cannot read the key {shown} of a trigger's state of the pane {pane}",
            "let the state go instead",
        )
        self._log(
            "trigger_state_dropped",
            task=self.task,
            operator=self.op_id,
            pane_id=pane,
            key_bytes=shown,
            error=repr(error),
            reason=f"{serde} cannot read its key, and {_DROP} is true",
        )


class JoinRefusals(Drops):
    """A stream-stream join's stored message its side's serde cannot read as a message of its
    key comes from the other side (module docstring). ``join``: the operator, whose
    ``serdes`` name its sides' serdes."""

    __slots__ = ("serdes",)

    def __init__(self, join: Any, context: Any) -> None:
        super().__init__(join.op_id, "join", context)
        self.serdes = (_named(join.serdes[1]), _named(join.serdes[2]))

    def unreadable_stored(self, error: Exception, key: Any, side: int) -> None:
        """The serde of ``side`` (0: the first stream's) cannot read (``error``) the message
        it keeps for ``key``: let go once (logged, counted), the incoming message joining
        nothing, or the task fails naming the store, the key and the serde."""
        store = f"{self.op_id}-{'LR'[side]}"
        serde = f"the message serde {self.serdes[side]} of the {('first', 'second')[side]} stream"
        self._unless_dropping(
            error,
            f"{serde} cannot read the message of key {key!r} stored in store {store!r}",
            "let that message go instead, the incoming message joining nothing",
        )
        what = f"{serde} cannot read the message stored for its key, let go as the other's came"
        self._dropped(1, error, what, store=store, key=repr(key), event="stored_message_dropped")


def _named(serde: Any) -> str:
    """A serde as a note names it: a name (or a ``KVSerde`` of names) as given, an object by
    its class."""
    if serde is None:
        return "StateSerde"
    return repr(serde) if isinstance(serde, str | KVSerde) else type(serde).__name__


def _shown(kbytes: bytes) -> str:
    """A key's bytes as a log line shows them: at most 64."""
    return repr(kbytes[:64]) + ("..." if len(kbytes) > 64 else "")


__all__ = ["Drops", "JoinRefusals", "Refusals"]
