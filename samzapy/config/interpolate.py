"""Text to values: ``${VAR}`` environment interpolation and YAML scalar typing of loose text.

Interpolation rules, applied to every string value a job file holds (list items included):

1. ``${VAR}`` is replaced by the environment variable ``VAR``; unset is an error naming the
   key and the variable.
2. ``${VAR:-default}`` uses ``default`` when ``VAR`` is unset or empty, as the shell does;
   ``default`` is text (``${A:-${B}}`` is an error).
3. ``$${`` stands for a literal ``${``.
4. When the whole value is exactly one ``${...}``, the substituted text is typed as a YAML plain
   scalar would be (``9092`` -> int, ``true`` -> bool, ``null`` -> None); inside a longer string
   it stays text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import yaml

from samzapy.api.errors import ConfigError

_TOKEN = re.compile(r"\$\$\{|\$\{(?P<body>[^}]*)\}|\$\{")
_NESTED = re.compile(r"(?<!\$)\$\{")
_BODY = re.compile(r"(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>.*))?", re.DOTALL)

# The implicit tags a plain YAML scalar may resolve to and that we turn into Python values;
# timestamps and the rest stay text.
_TYPED_TAGS = frozenset(
    {
        "tag:yaml.org,2002:int",
        "tag:yaml.org,2002:float",
        "tag:yaml.org,2002:bool",
        "tag:yaml.org,2002:null",
    }
)
_RESOLVER = yaml.resolver.Resolver()


class WrittenInt(int):
    """An int read from a plain YAML scalar, with the scalar's ``text``: a key that takes a
    string keeps what was written (``010`` is not 8, ``1:30`` not 90, as YAML 1.1 has them)."""

    text: str


class WrittenFloat(float):
    """``WrittenInt``'s float."""

    text: str


def written(value: Any, text: str) -> Any:
    """``value`` (a number YAML made of the plain scalar ``text``) holding ``text``; any
    other value as it is."""
    kind = type(value)
    if kind is int:
        number: WrittenInt | WrittenFloat = WrittenInt(value)
    elif kind is float:
        number = WrittenFloat(value)
    else:
        return value
    number.text = text
    return number


def parse_scalar(text: str) -> Any:
    """``text`` typed as an unquoted YAML scalar: an int, float, bool or None, else ``text``.

    Only a full match of YAML's implicit int/float/bool/null forms is converted, so text such
    as ``#fff`` or ``a # b`` is kept as written and the empty string stays empty. A number
    holds its text (``written``).
    """
    if not text.strip():
        return text
    tag = _RESOLVER.resolve(yaml.nodes.ScalarNode, text, (True, False))  # type: ignore[no-untyped-call]
    if tag in _TYPED_TAGS:
        return written(yaml.safe_load(text), text.strip())
    return text


def parse_value(text: str, loader: type[yaml.SafeLoader] = yaml.SafeLoader) -> Any:
    """``text`` as given on a command line: a flow list/mapping or a quoted string, read by
    ``loader`` (the job file's, so that both read values alike), or a scalar."""
    stripped = text.strip()
    if stripped[:1] in ("[", "{", "'", '"'):
        return yaml.load(stripped, Loader=loader)  # a SafeLoader (subclass): safe
    return parse_scalar(text)


def interpolate(key: str, value: Any, env: Mapping[str, str]) -> Any:
    """``value`` with ``${...}`` references replaced; raises ConfigError naming ``key``."""
    if isinstance(value, str):
        return _interpolate_text(key, value, env)
    if isinstance(value, list):
        return [interpolate(key, item, env) for item in value]
    if isinstance(value, dict):
        return {k: interpolate(key, v, env) for k, v in value.items()}
    return value


def _interpolate_text(key: str, text: str, env: Mapping[str, str]) -> Any:
    if "$" not in text:
        return text
    parts: list[str] = []
    pos = 0
    for match in _TOKEN.finditer(text):
        parts.append(text[pos : match.start()])
        pos = match.end()
        token = match.group(0)
        if token == "$${":
            parts.append("${")
            continue
        body = match.group("body")
        if body is None:
            raise ConfigError(
                f"{key} has an unterminated '${{' in {text!r}; write $${{ for a literal '${{'",
                key=key,
            )
        if _NESTED.search(body):  # the shell's ${A:-${B}}: the first } would end it
            raise ConfigError(
                f"{key} has a reference inside a default in {text!r}, which is not "
                "supported: give the default as text",
                key=key,
            )
        parts.append(_lookup(key, body, env))
    parts.append(text[pos:])
    result = "".join(parts)
    whole = _TOKEN.fullmatch(text)
    if whole is not None and whole.group("body") is not None:
        return parse_scalar(result)
    return result


def _lookup(key: str, body: str, env: Mapping[str, str]) -> str:
    match = _BODY.fullmatch(body)
    if match is None:
        raise ConfigError(
            f"{key} has a malformed reference '${{{body}}}'; "
            "expected ${VAR} or ${VAR:-default} with VAR a letter or _ then letters, digits, _",
            key=key,
        )
    name = match.group("name")
    default = match.group("default")
    found = env.get(name)
    if default is not None:
        return found if found else default
    if found is None:
        raise ConfigError(
            f"{key} refers to ${{{name}}}, but environment variable {name} is not set "
            f"(set it, or give a default: ${{{name}:-default}})",
            key=key,
        )
    return found


__all__ = ["WrittenFloat", "WrittenInt", "interpolate", "parse_scalar", "parse_value", "written"]
