"""What a window does with its state when its value serde refuses it outside the call of a
message (``Refusals``): a held list it cannot write back (at a commit, as panes fire at a tick,
a watermark or end-of-stream: ``held_values.py``; or in a message's call, when the list
without that message is refused too: grown too large by earlier messages, ``trim_refused``),
a pane it cannot read as the pane fires.

Such a refusal belongs to no call the container could drop: failing the task there failed it
again after each restart, on the same input, a crash loop holding the partition. Under
``task.drop.process.errors`` the window drops what the serde refuses instead: a held list loses
its last messages, as few as the serde then accepts (``held_values.longest_accepted``, through
the window's ``trim_held``), a pane it cannot read is not sent. Either is logged as
``message_dropped`` (operator, how many messages or which pane; no partition nor offset, and no
dead letter: no one input record is to blame) and counted in the ``container`` metric
``process-errors``, and the commit or firing goes on, its checkpoint past them. Without the
key the task fails as before, with the serde's own error (a note on it names the window, its
serde and the key that would drop what it refused).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog

from samzapy.config.schema import lookup

log = structlog.get_logger("samzapy.operators")
#: The key that drops what the serde refuses (as it drops the messages a task fails on).
_DROP = "task.drop.process.errors"


class Refusals:
    """A window's state its value serde refuses outside its messages' calls (module
    docstring). ``window``: the operator, whose ``trim_held(skey, value)`` takes the last
    messages out of such a value (store key ``skey``'s) until the serde accepts it, and
    returns its bytes (None: nothing left) and how many it lost; ``context``: its task's,
    for the drop key and the count."""

    __slots__ = ("count", "drop", "op_id", "serde", "task", "trim")

    def __init__(self, window: Any, context: Any) -> None:
        self.op_id: str = window.op_id
        self.trim: Callable[[bytes, Any], tuple[bytes | None, int]] = window.trim_held
        serde = window.window.value_serde
        self.serde = (
            "StateSerde"
            if serde is None
            else repr(serde)
            if isinstance(serde, str)
            else type(serde).__name__
        )
        (key,) = lookup(_DROP)
        self.drop: bool = key.coerce(context.config.get(_DROP, key.default))
        self.task = str(getattr(context, "task_name", ""))
        metrics = getattr(context, "metrics", None) if self.drop else None
        self.count = None if metrics is None else metrics.counter("container", "process-errors")

    def __call__(self, skey: bytes, value: Any, error: Exception) -> bytes | None:
        self._unless_dropping(
            error, "refused a pane it holds", "drop the pane's last messages instead"
        )
        data, lost = self.trim(skey, value)
        what = "refused the pane they were the last messages of, held since its last write-back"
        self._dropped(lost, error, what, messages=lost)
        return data

    def unreadable(self, error: Exception, key: Any, pane: int) -> None:
        """The serde cannot read (``error``) the value of ``key``'s pane ``pane`` as it
        fires: dropped (logged, counted), or the task fails."""
        self._unless_dropping(
            error,
            f"cannot read the pane {pane} of key {key!r} as it fires",
            "drop the pane instead",
        )
        self._dropped(
            1, error, "cannot read the pane they are the messages of", pane_id=pane, key=repr(key)
        )

    def _unless_dropping(self, error: Exception, what: str, instead: str) -> None:
        """Raise ``error`` (the serde ``what``), noting what the drop key would do
        (``instead``), unless that key is on; a MemoryError always (the process, not the
        pane, as for a message)."""
        if isinstance(error, MemoryError):
            raise error
        if not self.drop:
            error.add_note(
                f"the value serde {self.serde} of window {self.op_id!r} {what}; "
                f"{_DROP}: true would {instead}"
            )
            raise error

    def _dropped(self, count: int, error: Exception, what: str, **fields: Any) -> None:
        """``count`` messages dropped, the serde having ``what``: counted and logged."""
        if self.count is not None:
            self.count.inc(count)
        log.warning(
            "message_dropped",
            task=self.task,
            operator=self.op_id,
            **fields,
            error=repr(error),
            reason=f"the value serde {self.serde} {what}, and {_DROP} is true",
        )


__all__ = ["Refusals"]
