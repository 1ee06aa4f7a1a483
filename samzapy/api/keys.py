"""KeyIdentity: what makes two keys the same key for a cache, a remote table and the writes in
flight of ``send_to(table)``, which keep keys in Python dicts where a store compares bytes.
It is part of the API because users get a ``KeyedValues`` back from ``get_all``, a table's
or a store's (``SerializedKeyValueStore``, whose keys are told apart by rule 2).

A dict alone would get keys wrong: ``1``, ``True`` and ``1.0`` are one dict key, and a list
or a dict (a JSON composite key) is no dict key at all. So each key gets an identity, a
hashable value that those dicts hold instead:

1. A key of one of the table's ``fast`` types (exact ``str``, ``bytes``, ``int``, as the
   table allows) is its own identity: no work on the common path.
2. A local table's or a store's key (``for_serde``): the identity of its serialized bytes,
   as the store compares them; when those bytes read back as a key of rule 1 that writes the
   same bytes, that key (a ``StrEnum`` member under ``json`` is its str, ``True`` under
   ``integer`` is 1, ``(a, b)`` and ``[a, b]`` under ``json`` are one key). A key its serde
   cannot write falls back to rule 3 (the store refuses it when it gets there).
3. A remote table's key (``structural``; no serde: its functions get the key itself): the
   key's type with its value, recursively for lists, tuples, sets and dicts (a dict's items
   in their order, as ``json`` writes them). ``1``, ``True`` and ``1.0`` are three keys; a
   list and a tuple of the same items are two. A key that has no identity (unhashable, of
   no type above) is refused with a TableError naming the table and the type.

``found_map`` builds what ``get_all`` returns: a plain dict, unless its keys cannot all be
dict keys of their own (a list key; 1 and True both found): then a ``KeyedValues``, a
read-only mapping that looks keys up by identity and keeps the keys as they were asked for.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from typing import Any

from samzapy.api.errors import TableError

#: The types a key of which is its own identity in a table without a serde (rule 1).
OWN_IDENTITY: frozenset[type] = frozenset((str, bytes, int))


class _Serialized:
    """The tag of an identity made of a key's serialized bytes (rule 2)."""


class KeyIdentity:
    """The identities of table ``table_id``'s keys (module docstring). Hot paths inline rule 1:
    ``key if type(key) in identity.fast else identity.slow(key)``."""

    __slots__ = ("fast", "slow", "table_id")

    def __init__(
        self, table_id: str, fast: frozenset[type], slow: Callable[[Any], Hashable]
    ) -> None:
        self.table_id = table_id
        #: The exact types whose keys are their own identity.
        self.fast = fast
        #: The identity of a key of any other type.
        self.slow = slow

    def __call__(self, key: Any) -> Hashable:
        return key if type(key) in self.fast else self.slow(key)

    @classmethod
    def of_table(cls, table_id: str, key_serde: Any) -> KeyIdentity:
        """Rule 2 for a table whose store has ``key_serde``, rule 3 for one without (None)."""
        if key_serde is None:
            return cls.structural(table_id)
        return cls.for_serde(table_id, key_serde)

    @classmethod
    def structural(cls, table_id: str) -> KeyIdentity:
        """Rule 3: keys told apart by type and value."""
        return cls(table_id, OWN_IDENTITY, lambda key: _structural(table_id, key))

    @classmethod
    def for_serde(cls, table_id: str, serde: Any) -> KeyIdentity:
        """Rule 2: keys told apart by what ``serde`` writes of them. ``serde.identity_types``
        (the built-in serdes have it) lists the types whose distinct keys it writes as
        distinct bytes that read back as the same key; without it, every key is written."""
        fast = frozenset(getattr(serde, "identity_types", ()))
        to_bytes, from_bytes = serde.to_bytes, serde.from_bytes

        def slow(key: Any) -> Hashable:
            try:
                raw = to_bytes(key)
            except Exception:
                return _structural(table_id, key)  # the store refuses it, with its error
            if type(raw) is not bytes:  # the "none" serde: objects as they are
                return _structural(table_id, key)
            try:
                back = from_bytes(raw)
                if type(back) in fast and to_bytes(back) == raw:
                    return back  # type: ignore[no-any-return]
            except Exception:
                pass
            return (_Serialized, raw)

        return cls(table_id, fast, slow)


def _structural(table_id: str, key: Any) -> Hashable:
    kind = type(key)
    if kind in OWN_IDENTITY:
        return key  # type: ignore[no-any-return]
    if kind is list or kind is tuple:
        return (kind, tuple([_structural(table_id, item) for item in key]))
    if kind is dict:
        return (
            dict,
            tuple([(_structural(table_id, k), _structural(table_id, v)) for k, v in key.items()]),
        )
    if kind is set or kind is frozenset:
        return (frozenset, frozenset([_structural(table_id, item) for item in key]))
    try:
        hash(key)
    except TypeError:
        raise TableError(
            f"table {table_id!r}: a key of type {kind.__name__} cannot be told apart from "
            f"other keys (it is unhashable, and not a list, tuple, set or dict): use a str, "
            f"int, bytes, tuple or other hashable key",
            table_id=table_id,
            key=key,
        ) from None
    return (kind, key)


class KeyedValues(Mapping[Any, Any]):
    """A read-only mapping of keys that are not all dict keys of their own (module
    docstring): looked up by identity, iterated as the keys were asked for."""

    __slots__ = ("_entries", "_identity")

    def __init__(self, identity: KeyIdentity, pairs: Iterable[tuple[Any, Any]]) -> None:
        self._identity = identity
        self._entries: dict[Hashable, tuple[Any, Any]] = {}
        for key, value in pairs:
            self._entries.setdefault(identity(key), (key, value))

    def __getitem__(self, key: Any) -> Any:
        return self._entries[self._identity(key)][1]

    def __iter__(self) -> Iterator[Any]:
        return (key for key, _ in self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Mapping) or len(other) != len(self):
            return False
        try:
            return all(self[key] == value for key, value in other.items())
        except (KeyError, TableError):
            return False

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        items = ", ".join(f"{key!r}: {value!r}" for key, value in self._entries.values())
        return f"KeyedValues({{{items}}})"


def found_map(identity: KeyIdentity, pairs: list[tuple[Any, Any]]) -> Mapping[Any, Any]:
    """``get_all``'s result of ``pairs`` (keys distinct by identity): a dict when the keys
    are dict keys of their own, else a KeyedValues (module docstring)."""
    fast = identity.fast
    if all(type(key) in fast for key, _ in pairs):
        return dict(pairs)
    try:
        plain = dict(pairs)
    except TypeError:  # an unhashable key
        return KeyedValues(identity, pairs)
    return plain if len(plain) == len(pairs) else KeyedValues(identity, pairs)


def unique(identity: KeyIdentity, keys: Iterable[Any]) -> tuple[list[Any], list[Hashable]]:
    """``keys`` without repeats (the first of each identity), and their identities."""
    fast, slow = identity.fast, identity.slow
    wanted: list[Any] = []
    idents: list[Hashable] = []
    seen: set[Hashable] = set()
    for key in keys:
        ident = key if type(key) in fast else slow(key)
        if ident not in seen:
            seen.add(ident)
            wanted.append(key)
            idents.append(ident)
    return wanted, idents


def by_identity(identity: KeyIdentity, found: Any) -> dict[Hashable, Any]:
    """What a table or read function found (a mapping, or ``(key, value)`` pairs), by the
    identity of its keys; values of None are left out."""
    items = found.items() if isinstance(found, Mapping) else found
    return {identity(key): value for key, value in items if value is not None}


__all__ = ["OWN_IDENTITY", "KeyIdentity", "KeyedValues", "by_identity", "found_map", "unique"]
