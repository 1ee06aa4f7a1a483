"""The panes of a window without an aggregator, held as lists between write-backs.

Such a window keeps each pane's messages as one list, one entry of its store. Read,
appended to and written back per message, that entry costs a deserialization and a
serialization of the whole list each time: a pane of n messages cost O(n^2), and a pane of
10,000 messages took seconds (Samza appends each message to a time-series store instead).
``HeldValues`` holds the lists appended to since the last write-back, as objects: a message
is one ``append``, and each list is serialized once per write-back. They are written back
before each commit's flush of the stores (``before_commit``), before anything reads the store
(a pane firing, a trigger) and after ``WRITE_BACK_EVERY`` messages, so that at most that many
entries are held beside the store (each a pane's whole list, or a key's sessions: as much as
firing them would hold), and the store and its changelog hold exactly what a checkpoint
covers, as before.

A message is still checked by the window's value serde when it is taken (as a list of one:
what the serde sees, one message of a pane), so a message the serde refuses fails as it is
processed, where ``task.drop.process.errors`` can drop it, not at a later write-back; and
what is held is what the serde gives back (``from_bytes``), not the message object, which
an operator beside the window may change in place after (as it could not change the bytes).
The serde may still refuse a whole list (one too large): at the write-back every
``WRITE_BACK_EVERY`` messages (or as the message makes an early trigger fire) that fails the
message it came with, which is taken back out of its list (``put``), so what is held and what
is stored are as before it; unless the serde refuses the list without it too
(``trim_refused``): messages held before it made the list too large, which is settled as a
refusal outside a message's call (below), and the message is taken again.

A list refused outside its message's call (at a commit, as panes fire at a tick, a watermark
or end-of-stream, or another pane's at that write-back) goes to ``refused``
(``refusals.Refusals``: under ``task.drop.process.errors`` the list loses its last messages,
as few as the serde then accepts, ``longest_accepted``; else the task fails).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from samzapy.api.envelope import KV

#: Written back at the latest after this many messages, so at most this many entries are held
#: (a pane of n messages is then serialized n / WRITE_BACK_EVERY times).
WRITE_BACK_EVERY = 4096

_NONE = object()

#: ``Refused(skey, value, error)``: the bytes to store for a held ``value`` its serde refused
#: with ``error`` (None: none, the entry deleted), or raises.
Refused = Callable[[bytes, Any, Exception], "bytes | None"]


def as_held(serde: Any, message: Any) -> Any:
    """``message`` as a held list keeps it: checked by the window's value ``serde`` as one
    message of a pane (a list of one), so a message it refuses fails now, and read back, so
    an operator beside the window that changes the object after (a fan-out) changes nothing
    held. A ``KV`` must come back a ``KV`` (``json`` gives a list), as a join's sides must."""
    held = serde.from_bytes(serde.to_bytes([message]))[0]
    if type(message) is KV and type(held) is not KV:
        raise TypeError(
            f"the window's messages are KVs, and its value serde gives them back as "
            f"{type(held).__name__}s: leave value_serde out (pickle keeps KVs), or give the "
            "window an aggregator and a serde of its value"
        )
    return held


class HeldValues:
    """Store keys -> the objects their entries hold, newer than the store's. ``encode``
    turns one into the entry's bytes; ``limit`` is ``WRITE_BACK_EVERY`` (1 writes each
    through, where there is no commit hook to write them back); ``refused``: what becomes of
    an entry the serde refuses outside its message's call (``Refusals``; None: it raises)."""

    __slots__ = ("encode", "held", "limit", "refused", "store", "taken")

    def __init__(
        self,
        store: Any,
        encode: Callable[[Any], bytes],
        limit: int,
        refused: Refused | None = None,
    ) -> None:
        self.store = store
        self.encode = encode
        self.limit = limit
        self.refused = refused
        self.held: dict[bytes, Any] = {}
        self.taken = 0

    def put(self, skey: bytes, value: Any) -> None:
        """Hold ``value`` as ``skey``'s entry (write them all back every ``limit`` puts).
        When that write-back fails on ``skey``'s list (the serde refuses it), ``skey`` holds
        what it did before, or nothing, and the error is raised: the caller takes back what it
        changed in place (the message it appended), so that the message that failed is in no
        pane and the store, written as one batch, is as it was. Another entry refused then
        came with no message of this call: ``refused`` settles it."""
        held = self.held
        before = held.get(skey, _NONE)
        held[skey] = value
        self.taken += 1
        if self.taken >= self.limit:
            try:
                own = self.encode(value)  # refused: this call's failure, first
                others = self._encoded((k, v) for k, v in held.items() if k != skey)
                self._store([*others, (skey, own)])
            except BaseException:
                if before is _NONE:
                    del held[skey]
                else:
                    held[skey] = before
                raise
            held.clear()
            self.taken = 0

    def settle(self, skey: bytes, own: bool = True) -> None:
        """Write ``skey``'s entry back, if it is held: the store has it, and what was held is
        no longer (a pane it is emitted in is not appended to later). ``own``: in the call of
        the message just appended to it, whose failure the serde's refusal is, and it is still
        held; else (a firing outside a message's call) ``refused`` settles the refusal."""
        held = self.held
        if skey in held:
            if own:
                self.store.put(skey, self.encode(held[skey]))
            else:
                self._store(self._encoded([(skey, held[skey])]))
            del held[skey]

    def trim_refused(self, skey: bytes) -> bool:
        """After a message's call failed on ``skey``'s held entry (the serde refusing it at
        ``put``'s write-back or as an early trigger fired) and the message was taken back
        out: whether the serde refuses the entry without it too. Then messages held before it
        made the entry too large since its last write-back, which is not that message's
        failure: ``refused`` settles the entry (its last messages dropped, into the store; or
        raises) and the caller takes its message again, into what the entry keeps."""
        value = self.held.get(skey, _NONE)
        if value is _NONE or self.refused is None:
            return False
        try:
            self.encode(value)
        except Exception as exc:
            self._store([(skey, self.refused(skey, value, exc))])
            del self.held[skey]
            return True
        return False

    def write_back(self) -> None:
        """Every held entry into the store (``refused`` settles those the serde refuses)."""
        held = self.held
        if held:
            self._store(self._encoded(held.items()))
            held.clear()
        self.taken = 0

    def _encoded(self, entries: Iterable[tuple[bytes, Any]]) -> list[tuple[bytes, bytes | None]]:
        encode, refused = self.encode, self.refused
        rows: list[tuple[bytes, bytes | None]] = []
        for skey, value in entries:
            try:
                rows.append((skey, encode(value)))
            except Exception as exc:
                if refused is None:
                    raise
                rows.append((skey, refused(skey, value, exc)))
        return rows

    def _store(self, rows: list[tuple[bytes, bytes | None]]) -> None:
        self.store.put_all([(skey, data) for skey, data in rows if data is not None])
        gone = [skey for skey, data in rows if data is None]
        if gone:
            self.store.delete_all(gone)


def longest_accepted(encode: Callable[[Any], bytes], items: list[Any]) -> tuple[int, bytes | None]:
    """How many of ``items`` (which ``encode`` refuses) are left when the last are taken away
    until ``encode`` accepts the rest, and their bytes (None: none left). By halves: a serde
    that refuses a list refuses it longer too (one that does not, a list such that it accepts
    the first n but not the first n + 1)."""
    kept, refused, data = 0, len(items), None
    while refused - kept > 1:
        middle = (kept + refused) // 2
        try:
            tried = encode(items[:middle])
        except Exception:
            refused = middle
        else:
            kept, data = middle, tried
    return kept, data


__all__ = ["WRITE_BACK_EVERY", "HeldValues", "as_held", "longest_accepted"]
