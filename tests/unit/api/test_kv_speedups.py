"""KV's optional C constructor (samzapy/_speedups.c) makes exactly what the NamedTuple makes.

Each behaviour is checked on two classes of the same shape, one left as the NamedTuple and one
accelerated, in every Python the project claims (scripts/pythons.sh builds the extension in
each). ``samzapy.api.envelope.KV`` itself is accelerated wherever the extension was built.
"""

from __future__ import annotations

import copy
import gc
import os
import pickle
import shutil
import subprocess
import sys
import sysconfig
import weakref
from pathlib import Path
from typing import Any, NamedTuple
from unittest import mock

import pytest

from samzapy.api.envelope import KV, KV_ACCELERATED, _accelerate

try:
    from samzapy import _speedups
except ImportError:  # built without a C compiler: test_extension_is_built says whether one is
    _speedups = None  # type: ignore[assignment]

needs_extension = pytest.mark.skipif(_speedups is None, reason="samzapy._speedups is not built")


class PurePair(NamedTuple):
    key: Any
    value: Any


class FastPair(NamedTuple):
    key: Any
    value: Any


if _speedups is not None:
    _speedups.accelerate_pair(FastPair)

PAIRS = [PurePair, FastPair] if _speedups is not None else [PurePair]


def outcome(call: Any) -> tuple[str, Any]:
    """What ``call()`` gives, as something the two classes' results compare by: the result's
    repr and fields, or the exception's type and message."""
    try:
        result = call()
    except Exception as exc:
        return "raised", (type(exc).__name__, str(exc).replace("FastPair", "PurePair"))
    return "returned", repr(result).replace("FastPair", "PurePair")


CALLS = [
    lambda cls: cls(1, "a"),
    lambda cls: cls(key=1, value="a"),
    lambda cls: cls(1, value="a"),
    lambda cls: cls(value="a", key=1),
    lambda cls: cls(1),
    lambda cls: cls(),
    lambda cls: cls(1, 2, 3),
    lambda cls: cls(1, key=2),
    lambda cls: cls(1, "a", extra=3),
    lambda cls: cls(*[1, "a"]),
    lambda cls: cls(**{"key": 1, "value": "a"}),
    lambda cls: cls._make([1, "a"]),
    lambda cls: cls._make([1]),
    lambda cls: cls(1, "a")._replace(value="b"),
    lambda cls: cls(1, "a")._asdict(),
    lambda cls: (cls(1, "a").key, cls(1, "a").value, cls(1, "a")[0], cls(1, "a")[-1]),
    lambda cls: (
        cls(1, "a") == (1, "a"),
        cls(1, "a") != (1, "b"),
        hash(cls(1, "a")) == hash((1, "a")),
    ),
    lambda cls: (isinstance(cls(1, "a"), tuple), len(cls(1, "a")), list(cls(None, None))),
    lambda cls: cls(1, "a") + (3,),  # noqa: RUF005 (tuple's own concatenation)
    lambda cls: cls(1, "a").count(1),
    lambda cls: hasattr(cls(1, "a"), "__dict__"),
    lambda cls: cls(1, "a").__getnewargs__(),
    lambda cls: (cls._fields, cls.__match_args__, cls._field_defaults),
]


@pytest.mark.parametrize("index", range(len(CALLS)))
def test_the_accelerated_pair_behaves_as_the_namedtuple(index: int) -> None:
    call = CALLS[index]
    expected = outcome(lambda: call(PurePair))
    for cls in PAIRS:
        assert outcome(lambda cls=cls: call(cls)) == expected


@pytest.mark.parametrize("cls", PAIRS, ids=lambda c: c.__name__)
def test_a_pair_round_trips_through_pickle_and_copy(cls: type) -> None:
    pair = cls({"k": [1]}, b"v")
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        back = pickle.loads(pickle.dumps(pair, protocol))
        assert back == pair and type(back) is cls
    assert copy.copy(pair) == pair and type(copy.deepcopy(pair)) is cls


@pytest.mark.parametrize("cls", PAIRS, ids=lambda c: c.__name__)
def test_a_pair_matches_its_class_pattern_and_unpacks(cls: type) -> None:
    key, value = cls("k", 2)
    assert (key, value) == ("k", 2)
    match cls("k", 2):
        case cls(key=k, value=v):  # type: ignore[misc]
            assert (k, v) == ("k", 2)
        case _:
            pytest.fail("the pair did not match its own class pattern")


@needs_extension
def test_the_accelerated_pair_holds_its_items_and_frees_them() -> None:
    key, value = object(), object()
    before = (sys.getrefcount(key), sys.getrefcount(value))
    pairs = [FastPair(key, value) for _ in range(1000)]
    assert sys.getrefcount(key) == before[0] + 1000
    assert all(type(p) is FastPair and p.key is key and p.value is value for p in pairs)
    assert gc.is_tracked(pairs[0])  # a cycle through a pair is collected, as through a tuple
    del pairs
    assert (sys.getrefcount(key), sys.getrefcount(value)) == before


@needs_extension
def test_a_cycle_through_an_accelerated_pair_is_collected() -> None:
    holder: list[Any] = [_Probe()]
    holder.append(FastPair("k", holder))
    probe = weakref.ref(holder[0])
    del holder
    gc.collect()
    assert probe() is None


class _Probe:
    pass


@needs_extension
def test_a_subclass_keeps_its_own_constructor() -> None:
    class Labelled(FastPair):
        def __new__(cls, key: Any, value: Any) -> Labelled:
            return super().__new__(cls, key, f"<{value}>")

    assert Labelled(1, "a") == (1, "<a>") and type(Labelled(1, "a")) is Labelled
    assert not _speedups.is_accelerated(Labelled)
    assert _speedups.is_accelerated(FastPair) and not _speedups.is_accelerated(PurePair)


@needs_extension
def test_accelerate_pair_refuses_what_is_not_a_plain_tuple() -> None:
    class WithDict(tuple):  # type: ignore[type-arg]
        pass

    for cls in (int, WithDict, tuple):
        with pytest.raises(TypeError):
            _speedups.accelerate_pair(cls)
    with pytest.raises(TypeError):
        _speedups.accelerate_pair(3)  # type: ignore[arg-type]

    class Three(NamedTuple):
        a: int
        b: int
        c: int

    with pytest.raises(TypeError, match="not a NamedTuple of two fields"):
        _accelerate(Three)


def test_kv_is_accelerated_wherever_the_extension_is_built() -> None:
    wanted = _speedups is not None and not os.environ.get("SAMZAPY_NO_SPEEDUPS")
    assert wanted is KV_ACCELERATED
    if KV_ACCELERATED:
        assert _speedups.is_accelerated(KV)


def test_the_extension_is_built_where_a_c_compiler_is() -> None:
    """An install with a compiler and Python's headers at hand must not fall back silently
    (the build is optional)."""
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        pytest.skip(f"no C compiler ({compiler}): KV is the plain NamedTuple here")
    headers = Path(sysconfig.get_paths()["include"]) / "Python.h"
    if not headers.exists():
        pytest.skip(f"no {headers} (python3-dev): KV is the plain NamedTuple here")
    assert _speedups is not None, (
        "samzapy._speedups was not built although a C compiler is installed: reinstall "
        "(pip install -e .) and read the build's warning"
    )


def test_samzapy_no_speedups_leaves_kv_the_namedtuple() -> None:
    code = (
        "from samzapy.api.envelope import KV, KV_ACCELERATED; "
        "print(KV_ACCELERATED, KV(1, 2), type(KV(1, 2)).__new__ is KV.__new__)"
    )
    env = {**os.environ, "SAMZAPY_NO_SPEEDUPS": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split(" ", 1)[0] == "False"
    assert "KV(key=1, value=2)" in out.stdout


def _fresh_pair() -> type:
    """A pair class of its own, accelerated when the extension is built: for tests that change
    the class."""

    class Pair(NamedTuple):
        key: Any
        value: Any

    if _speedups is not None:
        _speedups.accelerate_pair(Pair)
    return Pair


def test_a_patched_constructor_is_called_and_the_fast_path_returns_after() -> None:
    """unittest.mock.patch of ``__new__`` or ``__init__`` works as on the NamedTuple (CPython
    keeps a class's vectorcall whatever is assigned to it: the extension checks)."""
    pair = _fresh_pair()
    with mock.patch.object(pair, "__new__", lambda cls, key, value: ("patched", key)):
        assert pair(1, 2) == ("patched", 1)
        assert _speedups is None or not _speedups.is_accelerated(pair)
    assert pair(1, 2) == (1, 2) and type(pair(1, 2)) is pair
    calls: list[tuple[Any, ...]] = []
    with mock.patch.object(pair, "__init__", lambda self, *args: calls.append(args), create=True):
        pair(1, 2)
    assert calls == [(1, 2)]
    assert pair(3, 4) == (3, 4) and calls == [(1, 2)]
    assert _speedups is None or _speedups.is_accelerated(pair)


def test_a_pair_without_its_new_fails_as_the_namedtuple_does() -> None:
    expected = outcome(lambda: _without_new("Pair")(1, 2))
    assert expected[0] == "raised"
    assert outcome(lambda: _without_new("Pair", accelerate=True)(1, 2)) == expected


def _without_new(name: str, accelerate: bool = False) -> type:
    pair = _fresh_pair() if accelerate else NamedTuple(name, [("key", Any), ("value", Any)])
    del pair.__new__  # type: ignore[misc]
    return pair


@needs_extension
def test_pickling_keeps_the_fast_path() -> None:
    """Pickling caches ``__slotnames__`` on the class, which changes its version tag."""
    pair = FastPair(1, 2)
    pickle.loads(pickle.dumps(pair))
    copy.deepcopy(pair)
    assert _speedups.is_accelerated(FastPair)


@needs_extension
def test_a_subclass_with_a_new_of_its_own_is_refused() -> None:
    class Checked(PurePair):
        __slots__ = ()

        def __new__(cls, key: Any, value: Any) -> Checked:
            if key is None:
                raise ValueError("key required")
            return super().__new__(cls, key, value)

    with pytest.raises(TypeError):
        _speedups.accelerate_pair(Checked)
    with pytest.raises(TypeError, match="not a NamedTuple of two fields"):
        _accelerate(Checked)
    with pytest.raises(ValueError, match="key required"):
        Checked(None, 1)
