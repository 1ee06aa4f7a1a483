"""Reading a job's configuration: YAML file, defaults and ``--set`` overrides -> one flat Config.

Loading happens in four steps; problems of every step are collected into one ConfigError:

1. parse the YAML (a syntax error names the file and line; a key written twice is an error);
2. flatten nested mappings into dotted keys (``task: {max: {concurrency: 4}}`` and
   ``task.max.concurrency: 4`` are the same key; giving it both ways is an error);
3. interpolate ``${VAR}`` references in the file's values from the environment;
4. layer the values: ``base`` defaults, then the file, then the overrides.

A value of None (``key:`` or ``key: null``) means "not set": validation treats it as absent.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

import yaml

from samzapy.api.errors import ConfigError
from samzapy.config.interpolate import WrittenFloat, WrittenInt, interpolate, parse_value, written
from samzapy.config.schema import NAMESPACES, Kind, lookup


class Config(Mapping[str, Any]):
    """An immutable flat mapping of dotted keys to values, remembering the file it came from."""

    __slots__ = ("_data", "_source")

    def __init__(self, data: Mapping[str, Any] | None = None, *, source: str | None = None):
        self._data: dict[str, Any] = dict(data) if data else {}
        self._source = source

    @property
    def source(self) -> str | None:
        """The path of the file this configuration was read from, for messages."""
        return self._source

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"Config({self._data!r}, source={self._source!r})"

    def subset(self, prefix: str, strip: bool = True) -> Config:
        """The keys under ``prefix.``, without the prefix when ``strip`` is true."""
        dotted = prefix.rstrip(".") + "."
        cut = len(dotted) if strip else 0
        return Config(
            {k[cut:]: v for k, v in self._data.items() if k.startswith(dotted)},
            source=self._source,
        )


class Problem(NamedTuple):
    """One configuration problem: the offending key (when there is one) and the message."""

    key: str | None
    message: str


def config_error(problems: Sequence[Problem], source: str | None) -> ConfigError:
    """One ConfigError listing every problem, one per line; ``key`` is the first offending key."""
    where = f"{source}: " if source else ""
    messages = tuple(p.message for p in problems)
    if len(messages) == 1:
        text = where + messages[0]
    else:
        text = f"{where}{len(messages)} configuration problems:\n" + "\n".join(
            f"  {m}" for m in messages
        )
    first_key = next((p.key for p in problems if p.key is not None), None)
    return ConfigError(text, key=first_key, problems=messages)


def collecting(problems: list[Problem]) -> Callable[[Callable[[], Any], Any], Any]:
    """``checked(step, fallback)``: ``step()``, or, when it raises a ConfigError, ``fallback``
    with each of the error's problems added to ``problems`` (so that one error can list every
    problem of several steps; ``config_error`` makes it)."""

    def checked(step: Callable[[], Any], fallback: Any) -> Any:
        try:
            return step()
        except ConfigError as exc:
            problems.extend(Problem(exc.key, message) for message in exc.problems)
            return fallback

    return checked


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that rejects a mapping key written twice instead of keeping the last one."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[str] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(
                key_node, yaml.ScalarNode
            ):
                continue
            text = str(key_node.value)
            if text in seen:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"found duplicate key {text!r}",
                    key_node.start_mark,
                )
            seen.add(text)
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_int(self, node: yaml.ScalarNode) -> Any:
        return written(super().construct_yaml_int(node), node.value)

    def construct_yaml_float(self, node: yaml.ScalarNode) -> Any:
        return written(super().construct_yaml_float(node), node.value)


_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:int", _UniqueKeyLoader.construct_yaml_int)
_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:float", _UniqueKeyLoader.construct_yaml_float)


def load_config(
    path: str | os.PathLike[str] | None = None,
    *,
    text: str | None = None,
    overrides: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    base: Mapping[str, Any] | None = None,
) -> Config:
    """Read a job's configuration from ``path`` (or ``text``) into a flat Config.

    ``overrides`` are ``key=value`` strings (the CLI's ``--set``), the value typed as YAML;
    ``env`` replaces ``os.environ`` for ``${VAR}`` references; ``base`` holds defaults that the
    file and the overrides win over. Raises ConfigError listing every problem found.
    """
    if path is not None and text is not None:
        raise TypeError("load_config takes a path or text, not both")
    source = os.fspath(path) if path is not None else None
    if path is not None:
        text = _read(source or "")
    tree = _parse(text or "", source or "<text>")
    problems: list[Problem] = []
    values: dict[str, Any] = {}
    if base:
        values.update(_flatten(base, problems))
    environ: Mapping[str, str] = os.environ if env is None else env
    for key, value in _flatten(tree, problems).items():
        if "${" in key and key.partition(".")[0] in NAMESPACES:  # the job's own keep theirs
            problems.append(Problem(key, _KEY_REFERENCE.format(key=key)))
            continue
        try:
            values[key] = interpolate(key, value, environ)
        except ConfigError as exc:
            problems.append(Problem(key, str(exc)))
    for item in overrides:
        _apply_override(item, values, problems)
    if problems:
        raise config_error(problems, source)
    return Config({key: _settled(key, value) for key, value in values.items()}, source=source)


_KEY_REFERENCE = (
    "key '{key}': ${{...}} is replaced in values only, not in keys; write the name itself "
    "(or give the whole key with --set)"
)
_TEXT_KINDS = (Kind.STR, Kind.ENUM, Kind.STR_LIST)
#: An integer as people write one: YAML 1.1 also reads ``010`` as 8, ``0x10`` as 16 and
#: ``1:30`` as 90.
_DECIMAL = re.compile(r"[-+]?(?:0|[1-9][0-9_]*)")


def _settled(key: str, value: Any) -> Any:
    """A value as the config holds it: a number written in YAML becomes the text written
    for a key of samzapy's that takes text (a password ``012345`` stays that, where YAML
    1.1 reads an octal 5349), and for one of its integer keys when it is not written in
    decimal (``task.commit.ms: 1:30`` is refused, not 90 ms; ``010`` is 10, as ``"010"`` is);
    a plain number elsewhere."""
    if isinstance(value, list):
        return [_settled(key, item) for item in value]
    if isinstance(value, dict):  # a mapping inside a list: its numbers too
        return {k: _settled(key, v) for k, v in value.items()}
    if type(value) not in (WrittenInt, WrittenFloat):
        return value
    specs = lookup(key)
    if specs and all(spec.kind in _TEXT_KINDS for spec in specs):
        return str(value.text)
    if type(value) is WrittenInt:
        if specs and all(s.kind is Kind.INT for s in specs) and not _DECIMAL.fullmatch(value.text):
            return str(value.text)
        return int(value)
    return float(value)


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path!r}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {path!r} is not UTF-8 text: {exc}") from exc


def _parse(text: str, source: str) -> Mapping[Any, Any]:
    try:
        tree = yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader subclass: safe
    except yaml.YAMLError as exc:
        raise ConfigError(_yaml_message(exc, source)) from exc
    if tree is None:
        return {}
    if not isinstance(tree, Mapping):
        raise ConfigError(
            f"{source}: the top level must be a mapping of keys to values, "
            f"got {type(tree).__name__}"
        )
    return tree


def _yaml_message(exc: yaml.YAMLError, source: str) -> str:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    detail = _yaml_detail(exc)
    if mark is None:
        return f"{source}: invalid YAML: {detail}"
    return f"{source}, line {mark.line + 1}, column {mark.column + 1}: invalid YAML: {detail}"


def _yaml_detail(exc: yaml.YAMLError) -> str:
    """What the parser found wrong, without the excerpt of the text that ``str(exc)`` adds."""
    problem = getattr(exc, "problem", None) or str(exc)
    context = getattr(exc, "context", None)
    return f"{problem} ({context})" if context else str(problem)


def _flatten(tree: Mapping[Any, Any], problems: list[Problem]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    _flatten_into(tree, "", out, problems)
    return out


def _flatten_into(
    tree: Mapping[Any, Any], prefix: str, out: dict[str, Any], problems: list[Problem]
) -> None:
    for raw_key, value in tree.items():
        if isinstance(raw_key, bool) or not isinstance(raw_key, str | int):
            where = f" under '{prefix}'" if prefix else ""
            problems.append(
                Problem(prefix or None, f"key {raw_key!r}{where} must be a string (quote it)")
            )
            continue
        key = f"{prefix}.{raw_key}" if prefix else str(raw_key)
        if isinstance(value, Mapping):
            _flatten_into(value, key, out, problems)
        elif key in out:
            problems.append(
                Problem(key, f"key '{key}' is given twice (flat and nested forms are one key)")
            )
        else:
            out[key] = value


def _apply_override(item: str, values: dict[str, Any], problems: list[Problem]) -> None:
    key, sep, text = item.partition("=")
    key = key.strip()
    if not sep or not key:
        problems.append(Problem(key or None, f"--set {item!r} must have the form key=value"))
        return
    try:
        value = parse_value(text, _UniqueKeyLoader)
    except yaml.YAMLError as exc:  # one line, as every problem is: no excerpt with a caret
        detail = _yaml_detail(exc)
        mark = getattr(exc, "problem_mark", None)
        at = f" at column {mark.column + 1}" if mark is not None else ""
        problems.append(
            Problem(key, f"--set {key}: value {text!r} is not valid YAML{at}: {detail}")
        )
        return
    if isinstance(value, Mapping):
        for sub_key, sub_value in _flatten(value, problems).items():
            values[f"{key}.{sub_key}"] = sub_value
    else:
        values[key] = value


__all__ = ["Config", "Problem", "collecting", "config_error", "load_config"]
