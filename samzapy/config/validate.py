"""Validating a flat Config against the schema, collecting every problem into one ConfigError.

The check runs in four steps:

1. type every key of samzapy's namespaces (an unknown key is a problem, with the nearest known
   key suggested, whatever its value: one set to null, ``${VAR:-null}`` say, is "not set" but
   still misspelt); keys outside the namespaces are the job's own and pass untouched;
2. require the required keys (``job.name``, ``task.class``, ``task.inputs``, each system's
   factory, a file system's path);
3. check the shapes and references: class paths, ``system.stream`` names, broadcast partitions,
   that every referenced system is defined and every serde name is known;
4. fill in the defaults, giving the effective typed values the views are built from.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any

from samzapy.api.system import SystemStream
from samzapy.config.changelogs import changelog_problems
from samzapy.config.checkpoints import checkpoint_system
from samzapy.config.directories import directory_problems
from samzapy.config.drops import dead_letter_problems
from samzapy.config.guarantee import exactly_once_problems
from samzapy.config.kafka_names import kafka_name_problems
from samzapy.config.loader import Config, Problem, config_error
from samzapy.config.reporters import reporter_problems
from samzapy.config.samza_classes import is_samza_class, samza_class_problems
from samzapy.config.schema import (
    BUILTIN_SERDES,
    KEYLESS_FACTORIES,
    KNOWN_KEYS,
    NAMESPACES,
    SAMZA_SYSTEM_FACTORIES,
    SYSTEM_FACTORIES,
    ConfigKey,
    keys_in,
    lookup,
)
from samzapy.config.secrets import is_secret
from samzapy.config.standbys import standby_problems
from samzapy.config.stream_keys import input_key_problems, not_in_samzapy

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_MODULE_CLASS = re.compile(rf"{_IDENT}(?:\.{_IDENT})*:{_IDENT}(?:\.{_IDENT})*")
_DOTTED_CLASS = re.compile(rf"{_IDENT}(?:\.{_IDENT})+")
_BROADCAST = re.compile(r"(?P<stream>.+)#(?:(?P<one>[0-9]+)|\[(?P<lo>[0-9]+)-(?P<hi>[0-9]+)\])")
_PLACEHOLDER = {"systems": "name", "streams": "id", "serializers": "name", "stores": "name"}


def is_module_class(text: str) -> bool:
    """Whether ``text`` has the shape ``package.module:Class``."""
    return _MODULE_CLASS.fullmatch(text) is not None


def parse_system_stream(text: str) -> SystemStream | None:
    """``kafka.page.views`` -> ``SystemStream("kafka", "page.views")`` (split at the first dot)."""
    system, dot, stream = text.partition(".")
    if not dot or not system or not stream:
        return None
    return SystemStream(system, stream)


def parse_broadcast(text: str) -> tuple[SystemStream, tuple[int, ...]] | None:
    """``kafka.s#2`` or ``kafka.s#[0-3]`` -> the stream and its partitions; None if malformed."""
    match = _BROADCAST.fullmatch(text)
    if match is None:
        return None
    system_stream = parse_system_stream(match.group("stream"))
    if system_stream is None:
        return None
    if match.group("one") is not None:
        return system_stream, (int(match.group("one")),)
    low, high = int(match.group("lo")), int(match.group("hi"))
    if low > high or high - low >= 100_000:  # a typo's range would fill memory
        return None
    return system_stream, tuple(range(low, high + 1))


@dataclass(frozen=True, slots=True)
class Checked:
    """The outcome of a successful check: effective values (typed, defaults filled), names."""

    values: dict[str, Any]
    systems: tuple[str, ...]
    streams: tuple[str, ...]
    serializers: tuple[str, ...]


def check(config: Config) -> Checked:
    """Validate ``config``; raise one ConfigError listing every problem, else the values."""
    return _Checker(config).run()


class _Checker:
    def __init__(self, config: Config) -> None:
        self.config = config
        # None means "not set" for samzapy's keys (app.class too); the job's own keep theirs.
        self.present = {
            k: v
            for k, v in config.items()
            if v is not None or (k.partition(".")[0] not in NAMESPACES and k != "app.class")
        }
        self.problems: list[Problem] = []
        self.values: dict[str, Any] = {}
        self.serde_keys: list[str] = []
        self.systems = self._names("systems")
        self.streams = self._names("streams")
        self.serializers = tuple(
            n for n in self._names("serializers", 2) if f"serializers.registry.{n}.class" in self
        )
        self.factories = {n: self._factory(n) for n in self.systems}

    def __contains__(self, key: str) -> bool:
        return key in self.present

    def _names(self, namespace: str, index: int = 1) -> tuple[str, ...]:
        names: dict[str, None] = {}
        for key in self.present:
            parts = key.split(".")
            if parts[0] == namespace and len(parts) > index + 1:
                names[parts[index]] = None
        return tuple(names)

    def _factory(self, system: str) -> str | None:
        """The system's short factory name, ``module:Class``, or None when unset or invalid."""
        value = self.present.get(f"systems.{system}.samza.factory")
        if isinstance(value, str):
            value = SAMZA_SYSTEM_FACTORIES.get(value, value)
            if value in SYSTEM_FACTORIES or is_module_class(value):
                return value
        return None

    def problem(self, key: str | None, message: str) -> None:
        self.problems.append(Problem(key, message))

    def run(self) -> Checked:
        for key, value in self.config.items():  # 1.
            if key in self.present:
                self._type(key, value)
            else:  # set to null: not typed or used, but its name must still be known
                self._type(key, value, unset=True)
        self._require()  # 2.
        self._shapes()  # 3.
        self._references()
        if self.problems:
            raise config_error(self.problems, self.config.source)
        self._defaults()  # 4.
        return Checked(
            dict(sorted(self.values.items())), self.systems, self.streams, self.serializers
        )

    # 1. typing -------------------------------------------------------------------------------

    def _type(self, key: str, value: Any, *, unset: bool = False) -> None:
        """Type ``key``'s value into ``values``; an ``unset`` key (null) is only looked up."""
        if key.partition(".")[0] not in NAMESPACES:
            self.values[key] = value
            return
        matches = lookup(key)
        spec: ConfigKey | None = None
        if key.startswith("systems.") and key.count(".") >= 2:
            factory = self.factories.get(key.split(".")[1])
            allowed = [m for m in matches if m.factory in (None, factory)]
            spec = allowed[0] if allowed else None
            if spec is None and factory not in SYSTEM_FACTORIES:
                # a module:Class factory takes any key; a missing or invalid one is reported once
                if not unset:
                    self.values[key] = value
                return
        elif matches:
            spec = matches[0]
        if spec is None:
            self.problem(key, self._unknown(key, matches))
            return
        if unset:
            return
        try:
            self.values[key] = spec.coerce(value)
        except ValueError:
            shown = f"a {type(value).__name__}" if is_secret(key) else repr(value)
            self.problem(key, f"{key} must be {spec.expected}, got {shown}")
            return
        if spec.pattern.endswith(".serde"):
            self.serde_keys.append(key)

    def _unknown(self, key: str, other_factory: list[ConfigKey] | tuple[ConfigKey, ...]) -> str:
        message = f"unknown key '{key}'"
        if other_factory:
            system = key.split(".")[1]
            return (
                f"{message}: it is valid only for systems whose samza.factory is "
                f"'{other_factory[0].factory}', and system '{system}' uses "
                f"'{self.factories.get(system)}'"
            )
        if (reason := not_in_samzapy(key)) is not None:
            return f"{message}: {reason}"
        close = difflib.get_close_matches(key, self._candidates(key), n=1, cutoff=0.75)
        return f"{message}; did you mean '{close[0]}'?" if close else message

    def _candidates(self, key: str) -> list[str]:
        namespace = key.split(".", 1)[0]
        placeholder = _PLACEHOLDER.get(namespace)
        names = {
            "systems": self.systems,
            "streams": self.streams,
            "serializers": self.serializers,
            "stores": self._names("stores"),
        }.get(namespace, ())
        # The key's own parts too: a name whose defining key is the mistyped one.
        filling = {*names, *key.split(".")[1:]}
        out: list[str] = []
        for spec in keys_in(namespace):
            if spec.is_open:
                continue
            if placeholder is None:
                out.append(spec.pattern)
                continue
            for name in filling:
                if spec.factory is None or spec.factory == self.factories.get(name):
                    out.append(spec.fill(**{placeholder: name}))
        return out

    # 2. required keys ------------------------------------------------------------------------

    def _require(self) -> None:
        for spec in KNOWN_KEYS:
            key = spec.pattern
            if not spec.required or "<" in key:
                continue
            if key in self.values:
                if not self.values[key]:
                    self.problem(key, f"{key} must not be empty")
            elif key not in self:  # when present but ill-typed, that is already reported
                hint = " (a list of 'system.stream')" if key == "task.inputs" else ""
                self.problem(key, f"{key} is required{hint}")
        self._require_task_or_app()
        for system in self.systems:
            key = f"systems.{system}.samza.factory"
            if key not in self:
                self.problem(key, f"{key} is required: system '{system}' has no factory")
            if self.factories[system] == "file" and f"systems.{system}.path" not in self:
                self.problem(
                    f"systems.{system}.path", f"systems.{system}.path is required for a file system"
                )

    def _require_task_or_app(self) -> None:
        """A job runs a task class or an application: one of the two keys, not both."""
        has_task, has_app = "task.class" in self, "app.class" in self
        if has_task and has_app:
            self.problem(
                "app.class",
                "task.class and app.class are both set: a job runs a task class (task.class) "
                "or an application (app.class), not both",
            )
        elif not has_task and not has_app:
            self.problem(
                "task.class",
                "task.class is required (a task class, 'module:Class'), or app.class for an "
                "application",
            )

    # 3. shapes and references ----------------------------------------------------------------

    def _shapes(self) -> None:
        for class_key in ("task.class", "app.class"):
            path = self.values.get(class_key)
            if path is not None and not (
                isinstance(path, str) and (is_module_class(path) or _DOTTED_CLASS.fullmatch(path))
            ):
                self.problem(
                    class_key,
                    f"{class_key} must be 'module:Class' or 'dotted.path.Class', got {path!r}",
                )
        samza_class_problems(self.values, self.systems, self.problem)  # Samza's class names
        for system in self.systems:
            key = f"systems.{system}.samza.factory"
            value = self.values.get(key)
            if value is not None and self.factories[system] is None and not is_samza_class(value):
                self.problem(
                    key,
                    f"{key} must be {', '.join(SYSTEM_FACTORIES)} or a 'module:Class' path, "
                    f"got {value!r}",
                )
        for key in ("task.inputs", *(f"streams.{s}.samza.upstream.inputs" for s in self.streams)):
            for item in self.values.get(key) or ():
                if parse_system_stream(item) is None:
                    self.problem(key, f"{key} items must be 'system.stream', got {item!r}")
        for item in self.values.get("task.broadcast.inputs") or ():
            if parse_broadcast(item) is None:
                self.problem(
                    "task.broadcast.inputs",
                    "task.broadcast.inputs items must be 'system.stream#N' or 'system.stream"
                    f"#[A-B]' with A <= B (at most 100,000 partitions), got {item!r}",
                )
        reporter_problems(self.values, is_module_class, self.problem)
        for name in self.serializers:
            key = f"serializers.registry.{name}.class"
            value = self.values.get(key)
            if value is None:
                continue
            if isinstance(value, str):
                if not (is_module_class(value) or _DOTTED_CLASS.fullmatch(value)):
                    self.problem(key, f"{key} must be a 'module:Class' path, got {value!r}")
            elif isinstance(value, int | float) or not (  # int has to_bytes and from_bytes
                callable(getattr(value, "to_bytes", None))
                and callable(getattr(value, "from_bytes", None))
            ):  # an application's descriptors register serde objects
                self.problem(key, f"{key} must be a 'module:Class' path, got {value!r}")

    def _references(self) -> None:
        defined = {s for s in self.systems if f"systems.{s}.samza.factory" in self}
        default = self.values.get("job.default.system")  # undefined: reported under it alone
        referenced = [("job.default.system", default)] if isinstance(default, str) else []
        inputs: list[SystemStream] = []
        for item in self.values.get("task.inputs") or ():
            if (ss := parse_system_stream(item)) is not None:
                referenced.append(("task.inputs", ss.system))
                inputs.append(ss)
        for item in self.values.get("task.broadcast.inputs") or ():
            if (parsed := parse_broadcast(item)) is not None:
                referenced.append(("task.broadcast.inputs", parsed[0].system))
                inputs.append(parsed[0])
        for stream in self.streams:
            key = f"streams.{stream}.samza.system"
            if isinstance(self.values.get(key), str):
                referenced.append((key, self.values[key]))
        stores = {
            k.split(".")[1] for k in self.values if k.startswith("stores.") and k.count(".") >= 2
        }
        for store in sorted(stores):
            key = f"stores.{store}.changelog"
            changelog = self.values.get(key)
            if changelog is None:
                continue
            ss = parse_system_stream(changelog) if isinstance(changelog, str) else None
            if ss is None:
                self.problem(key, f"{key} must be 'system.stream', got {changelog!r}")
            else:
                referenced.append((key, ss.system))
                self._keeps_keys(key, ss.system, "a store changelog needs to restore the store")
        changelog_problems(self.values, stores, inputs, self.problem)
        stream_system = checkpoint_system(self.values, self.problem)
        if stream_system is not None:
            self._keeps_keys(
                "task.checkpoint.system",
                stream_system,
                "a checkpoint stream needs to tell the tasks apart",
            )
        reported = {(k, s) for k, s in referenced if s == default and k != "job.default.system"}
        for key, system in referenced:
            if system not in defined and (key, system) not in reported:
                reported.add((key, system))
                self.problem(
                    key,
                    f"{key} refers to system '{system}', which is not defined "
                    f"(set systems.{system}.samza.factory)",
                )
        self._control_references()
        standby_problems(self.values, self.factories, self.problem)
        input_key_problems(self.values, self.streams, inputs, self.problem)
        exactly_once_problems(self.values, self.factories, self.streams, self.problem)
        dead_letter_problems(self.values, self.factories, self.problem, inputs, self.streams)
        kafka_name_problems(self.values, self.factories, self.streams, self.problem)
        directory_problems(self.values, self.problem)
        known = {*BUILTIN_SERDES, *self.serializers}
        for key in self.serde_keys:
            name = self.values[key]
            if name not in known:
                self.problem(
                    key,
                    f"{key} names serde {name!r}, which is neither built in "
                    f"({', '.join(BUILTIN_SERDES)}) nor registered "
                    f"(serializers.registry.{name}.class)",
                )

    def _keeps_keys(self, key: str, system: str, need: str) -> None:
        """A changelog or checkpoint stream is read back by key: its system must keep keys."""
        factory = self.factories.get(system)
        if factory in KEYLESS_FACTORIES:
            keeping = " or ".join(f for f in SYSTEM_FACTORIES if f not in KEYLESS_FACTORIES)
            self.problem(
                key,
                f"{key}: system '{system}' (samza.factory {factory}) does not keep message keys, "
                f"which {need}; use a system whose samza.factory is {keeping}",
            )

    def _control_references(self) -> None:
        """Framed streams need a system; upstream inputs must be inputs of the job."""
        inputs = set(self.values.get("task.inputs") or ())
        for item in self.values.get("task.broadcast.inputs") or ():
            if (parsed := parse_broadcast(item)) is not None:
                inputs.add(str(parsed[0]))
        for stream in self.streams:
            prefix = f"streams.{stream}.samza."
            framed = any(self.values.get(prefix + k) is True for k in ("intermediate", "framed"))
            upstream = self.values.get(prefix + "upstream.inputs") or ()
            if (framed or upstream) and not isinstance(self.values.get(prefix + "system"), str):
                self.problem(
                    prefix + "system",
                    f"{prefix}system must name the system of stream {stream!r}, which is "
                    "framed (samza.intermediate, samza.framed or samza.upstream.inputs is set)",
                )
            if upstream and self.values.get(prefix + "intermediate") is not True:
                self.problem(
                    prefix + "upstream.inputs",
                    f"{prefix}upstream.inputs is only for intermediate streams: set "
                    f"{prefix}intermediate: true",
                )
            for item in upstream:
                if isinstance(item, str) and parse_system_stream(item) and item not in inputs:
                    self.problem(
                        prefix + "upstream.inputs",
                        f"{prefix}upstream.inputs items must be inputs of the job (task.inputs: "
                        f"{sorted(inputs)}), got {item!r}",
                    )

    # 4. defaults -----------------------------------------------------------------------------

    def _defaults(self) -> None:
        job_name = str(self.values.get("job.name", ""))
        for spec in KNOWN_KEYS:
            if spec.default is None or spec.is_open:
                continue
            namespace = spec.pattern.split(".", 1)[0]
            if namespace == "systems":
                for system in self.systems:
                    if spec.factory in (None, self.factories[system]):
                        self._default(spec, spec.fill(name=system), system)
            elif namespace == "streams":
                for stream in self.streams:
                    self._default(spec, spec.fill(id=stream), stream)
            elif "<" not in spec.pattern:
                self._default(spec, spec.pattern, job_name)

    def _default(self, spec: ConfigKey, key: str, name: str) -> None:
        if key in self.values:
            return
        value = spec.default
        if isinstance(value, tuple):
            value = list(value)
        elif isinstance(value, str):
            value = re.sub(r"<(name|id|job\.name)>", lambda _: name, value)
        self.values[key] = value


__all__ = ["Checked", "check", "is_module_class", "parse_broadcast", "parse_system_stream"]
