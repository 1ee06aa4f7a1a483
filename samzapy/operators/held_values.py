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
``WRITE_BACK_EVERY`` messages that fails the message it came with, which is taken back out of
its list (``put``), so what is held and what is stored are as before it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: Written back at the latest after this many messages, so at most this many entries are held
#: (a pane of n messages is then serialized n / WRITE_BACK_EVERY times).
WRITE_BACK_EVERY = 4096

_NONE = object()


def as_held(serde: Any, message: Any) -> Any:
    """``message`` as a held list keeps it: checked by the window's value ``serde`` as one
    message of a pane (a list of one), so a message it refuses fails now, and read back, so
    an operator beside the window that changes the object after (a fan-out) changes nothing
    held."""
    return serde.from_bytes(serde.to_bytes([message]))[0]


class HeldValues:
    """Store keys -> the objects their entries hold, newer than the store's. ``encode``
    turns one into the entry's bytes; ``limit`` is ``WRITE_BACK_EVERY`` (1 writes each
    through, where there is no commit hook to write them back)."""

    __slots__ = ("encode", "held", "limit", "store", "taken")

    def __init__(self, store: Any, encode: Callable[[Any], bytes], limit: int) -> None:
        self.store = store
        self.encode = encode
        self.limit = limit
        self.held: dict[bytes, Any] = {}
        self.taken = 0

    def put(self, skey: bytes, value: Any) -> None:
        """Hold ``value`` as ``skey``'s entry (write them all back every ``limit`` puts).
        When that write-back fails (the serde refuses a list), ``skey`` holds what it did
        before, or nothing, and the error is raised: the caller takes back what it changed
        in place (the message it appended), so that the message that failed is in no pane
        and the store, written as one batch, is as it was."""
        held = self.held
        before = held.get(skey, _NONE)
        held[skey] = value
        self.taken += 1
        if self.taken >= self.limit:
            try:
                self.write_back()
            except BaseException:
                if before is _NONE:
                    del held[skey]
                else:
                    held[skey] = before
                raise

    def settle(self, skey: bytes) -> None:
        """Write ``skey``'s entry back, if it is held: the store has it, and what was held is
        no longer (a pane it is emitted in is not appended to later). Still held if that
        fails (the serde refuses the list)."""
        held = self.held
        if skey in held:
            self.store.put(skey, self.encode(held[skey]))
            del held[skey]

    def write_back(self) -> None:
        """Every held entry into the store."""
        held = self.held
        if held:
            encode = self.encode
            self.store.put_all([(skey, encode(value)) for skey, value in held.items()])
            held.clear()
        self.taken = 0


__all__ = ["WRITE_BACK_EVERY", "HeldValues", "as_held"]
