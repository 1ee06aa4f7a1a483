"""The kafka system's security keys: one set-up shared by its admin, consumer and producer.

- ``security.protocol``: PLAINTEXT (default), SSL, SASL_PLAINTEXT or SASL_SSL (any case).
- ``ssl.cafile``, ``ssl.capath``, ``ssl.certfile``, ``ssl.keyfile``, ``ssl.password``: an
  SSLContext built with aiokafka's ``create_ssl_context`` (the files are read here, so a
  missing or bad one fails at configuration time, naming its key). SSL without any of them
  verifies the brokers against the system's default CAs.
- ``sasl.mechanism`` (PLAIN by default, GSSAPI (with the gssapi package), SCRAM-SHA-256,
  SCRAM-SHA-512),
  ``sasl.plain.username``, ``sasl.plain.password``, ``sasl.kerberos.service.name``,
  ``sasl.kerberos.domain.name``: SASL authentication.

TLS or SASL keys set while the protocol does not use them are an error rather than ignored:
a job that thinks it encrypts or authenticates must not silently run in the clear.
"""

from __future__ import annotations

import importlib.util
import ssl
from collections.abc import Callable, Mapping
from typing import Any

from aiokafka.helpers import create_ssl_context

from samzapy.api.errors import ConfigError
from samzapy.config.loader import Problem, collecting, config_error

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "GSSAPI", "SCRAM-SHA-256", "SCRAM-SHA-512")
#: ``ssl.<name>`` key -> create_ssl_context argument.
SSL_KEYS = ("cafile", "capath", "certfile", "keyfile", "password")
#: ``sasl.<dotted>`` key -> aiokafka keyword argument.
SASL_KEYS = {
    "sasl.mechanism": "sasl_mechanism",
    "sasl.plain.username": "sasl_plain_username",
    "sasl.plain.password": "sasl_plain_password",
    "sasl.kerberos.service.name": "sasl_kerberos_service_name",
    "sasl.kerberos.domain.name": "sasl_kerberos_domain_name",
}


def security_options(key: Callable[[str], str], config: Mapping[str, Any]) -> dict[str, Any]:
    """The security arguments of every aiokafka client; ``key(name)`` is the full key. Raises
    one ConfigError listing every problem."""
    problems: list[Problem] = []
    checked = collecting(problems)

    protocol_key = key("security.protocol")
    protocol = checked(
        lambda: _choice(
            protocol_key, config.get("security.protocol", "PLAINTEXT"), SECURITY_PROTOCOLS
        ),
        None,
    )
    security: dict[str, Any] = {"security_protocol": protocol}

    ssl_args = {name: config[f"ssl.{name}"] for name in SSL_KEYS if config.get(f"ssl.{name}")}
    tls = protocol in ("SSL", "SASL_SSL")
    if ssl_args and protocol is not None and not tls:
        first = key(f"ssl.{next(iter(ssl_args))}")
        message = (
            f"{first} is set but {protocol_key} is {protocol}: set it to SSL or SASL_SSL to use TLS"
        )
        problems.append(Problem(first, message))
    if tls:
        security["ssl_context"] = checked(lambda: _ssl_context(key, ssl_args), None)

    sasl = {arg: config[name] for name, arg in SASL_KEYS.items() if config.get(name) is not None}
    if sasl and protocol is not None and not protocol.startswith("SASL"):
        first = key(next(name for name, arg in SASL_KEYS.items() if arg in sasl))
        message = (
            f"{first} is set but {protocol_key} is {protocol}: set it to SASL_PLAINTEXT or "
            "SASL_SSL to authenticate with SASL"
        )
        problems.append(Problem(first, message))
    if protocol is not None and protocol.startswith("SASL"):
        mechanism = checked(
            lambda: _choice(
                key("sasl.mechanism"), sasl.get("sasl_mechanism", "PLAIN"), SASL_MECHANISMS
            ),
            None,
        )
        sasl["sasl_mechanism"] = mechanism
        for arg in ("sasl_plain_username", "sasl_plain_password"):
            if arg in sasl and not isinstance(sasl[arg], str):
                sasl[arg] = str(sasl[arg])
        if mechanism == "GSSAPI" and importlib.util.find_spec("gssapi") is None:
            message = (
                f"{key('sasl.mechanism')} GSSAPI needs the gssapi package, which is not "
                "installed: pip install 'aiokafka[gssapi]'"
            )
            problems.append(Problem(key("sasl.mechanism"), message))
        if mechanism not in (None, "GSSAPI"):
            for name in ("sasl.plain.username", "sasl.plain.password"):
                if not sasl.get(SASL_KEYS[name]):
                    message = (
                        f"{key(name)} must be set: sasl.mechanism {mechanism} needs a "
                        "username and a password"
                    )
                    problems.append(Problem(key(name), message))
        security.update(sasl)
    if problems:
        raise config_error(problems, None)
    return security


def _choice(key: str, value: Any, choices: tuple[str, ...]) -> str:
    text = value.strip().upper() if isinstance(value, str) else None
    if text not in choices:
        raise ConfigError(f"{key} must be one of {', '.join(choices)}, got {value!r}", key=key)
    return text


def _ssl_context(key: Callable[[str], str], ssl_args: Mapping[str, Any]) -> ssl.SSLContext:
    for name, value in ssl_args.items():
        if not isinstance(value, str):
            raise ConfigError(
                f"{key(f'ssl.{name}')} must be a string, got {value!r}", key=key(f"ssl.{name}")
            )
    try:
        context: ssl.SSLContext = create_ssl_context(**ssl_args)
        return context
    except (OSError, ssl.SSLError, ValueError) as exc:
        named = ", ".join(key(f"ssl.{name}") for name in ssl_args) or key("security.protocol")
        raise ConfigError(
            f"cannot build the TLS context from {named}: {exc}",
            key=key(f"ssl.{next(iter(ssl_args))}") if ssl_args else key("security.protocol"),
        ) from exc


__all__ = [
    "SASL_KEYS",
    "SASL_MECHANISMS",
    "SECURITY_PROTOCOLS",
    "SSL_KEYS",
    "security_options",
]
