"""The ``samzapy`` command: arguments, logging set-up, the event loop, signals and exit codes.

``samzapy run JOB_YAML`` runs one container until the job finishes, is stopped by SIGTERM or
SIGINT, or fails; ``samzapy validate JOB_YAML`` prints the resolved configuration or its
problems; ``samzapy plan JOB_YAML`` prints an application's operator graph (``plan.py``).
Exit codes: 0 finished or stopped cleanly, 1 job failure, 2 configuration or usage error.

A run goes:

1. configure logging (JSON lines on stdout by default);
2. load and resolve the configuration (problems are logged as ``config_invalid``, exit 2);
   for an application (``app.class``), describe and plan it first and merge its keys;
3. bind ``job`` and ``container`` to every later log event, and load the task class (a class
   that cannot be loaded or is not a task is a configuration problem too: one
   ``config_invalid`` line, its cause's traceback only at debug level);
4. run the container on uvloop (or asyncio when ``job.loop`` says so or uvloop is missing),
   with SIGTERM and SIGINT asking it to stop gracefully; a second signal forces the exit;
5. log the outcome once and return its exit code.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import structlog
import yaml
from structlog.typing import FilteringBoundLogger

from samzapy import __version__
from samzapy.api.errors import ConfigError, SamzapyError
from samzapy.cli.logging import FORMATS, LEVELS, add_secrets, configure_logging, scrub
from samzapy.config import load_config, resolve
from samzapy.config.classes import TASK_CLASS_KEY, load_task_class, split_class_path
from samzapy.config.secrets import extra_patterns, redacted, secret_values
from samzapy.container.event_loop import loop_factory
from samzapy.operators.application import Application, is_application, load_application

if TYPE_CHECKING:
    from samzapy.config import ResolvedConfig

EXIT_OK = 0
EXIT_JOB_FAILED = 1
EXIT_CONFIG = 2

_STOP_SIGNALS = ("SIGTERM", "SIGINT")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default: ``sys.argv[1:]``) and return its exit code."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # usage errors, --help and --version
        return exc.code if isinstance(exc.code, int) else EXIT_CONFIG
    if args.command == "validate":
        return _validate(args.job_yaml, args.overrides)
    if args.command == "plan":
        from samzapy.cli.plan import print_plan

        return print_plan(args.job_yaml, args.overrides, args.format, _load)
    return _run(args.job_yaml, args.overrides, args.log_format, args.log_level)


def run() -> None:
    """Console-script style entry point: exit the process with ``main()``'s code."""
    sys.exit(main())


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="samzapy", description="Run Samza stream-processing jobs on asyncio."
    )
    parser.add_argument("--version", action="version", version=f"samzapy {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run_cmd = commands.add_parser("run", help="run a job's container until it finishes or stops")
    validate_cmd = commands.add_parser(
        "validate", help="print the resolved configuration of a job, or its problems"
    )
    plan_cmd = commands.add_parser(
        "plan", help="print an application's operator graph, streams and stores"
    )
    plan_cmd.add_argument("--format", choices=("text", "json"), default="text")
    for cmd in (run_cmd, validate_cmd, plan_cmd):
        cmd.add_argument("job_yaml", metavar="JOB_YAML", help="the job's YAML configuration")
        cmd.add_argument(
            "--set",
            dest="overrides",
            action="append",
            default=[],
            type=_override,
            metavar="KEY=VALUE",
            help="override one configuration key (repeatable)",
        )
    run_cmd.add_argument("--log-format", choices=FORMATS, default="json")
    run_cmd.add_argument("--log-level", choices=LEVELS, default="info")
    return parser


def _override(text: str) -> str:
    key, sep, _ = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return text


def _load(job_yaml: str, overrides: Sequence[str]) -> tuple[ResolvedConfig, Application | None]:
    """The resolved configuration, and the application when ``app.class`` is set (described
    and planned, its keys merged under the file's); every failure, a missing file included,
    is a ConfigError. An application that cannot be described is reported with the other
    problems of the file."""
    path = Path(job_yaml)
    if not path.is_file():
        raise ConfigError(f"job file {job_yaml!r} does not exist or is not a file")
    try:
        config = load_config(path, overrides=overrides)
    except OSError as exc:
        raise ConfigError(f"job file {job_yaml!r} cannot be read: {exc}") from exc
    # Before anything can log the config's values: from here on they are scrubbed.
    add_secrets(secret_values(config))
    app = None
    if is_application(config):
        try:
            app = load_application(config)
        except ConfigError as exc:
            raise _with_other_problems(exc, config) from exc
        config = app.config
    try:
        return resolve(config), app
    except OSError as exc:
        raise ConfigError(f"job file {job_yaml!r} cannot be read: {exc}") from exc


def _with_other_problems(app_error: ConfigError, config: Any) -> ConfigError:
    """The application's problem, and those of the file's other keys (task.inputs, which
    the application would have given, aside)."""
    problems = list(app_error.problems)
    try:
        resolve(config)
    except ConfigError as exc:
        problems.extend(p for p in exc.problems if not p.startswith("task.inputs is required"))
    if len(problems) == 1:
        return app_error
    text = f"{len(problems)} configuration problems:\n" + "\n".join(f"  {p}" for p in problems)
    return ConfigError(text, key=app_error.key, problems=tuple(problems))


def _add_working_directory_to_path() -> None:
    """Like `python -m`, find task classes relative to the directory the job is started from."""
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())


def _validate(job_yaml: str, overrides: Sequence[str]) -> int:
    configure_logging("console", "warning", stream=sys.stderr)  # keep stdout pure YAML
    _add_working_directory_to_path()
    problems: list[str] = []
    try:
        resolved, app = _load(job_yaml, overrides)
        if app is not None:
            app.task_factory(resolved)  # the checks that need the resolved config
    except ConfigError as exc:
        problems.extend(exc.problems)
        resolved = None
    if not any(p.startswith("app.class") for p in problems) and (
        resolved is None or resolved.task.app_class is None
    ):
        problems.extend(_task_class_problems(job_yaml, overrides, resolved, problems))
    if problems or resolved is None:
        for problem in problems:
            print(scrub(problem), file=sys.stderr)
        return EXIT_CONFIG
    values = redacted(resolved.to_dict(), extra_patterns(resolved.raw))
    text = yaml.safe_dump(_plain(values), sort_keys=True, allow_unicode=True)
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:  # `samzapy validate job.yaml | head` closed the pipe early
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return EXIT_OK


def _task_class_problems(
    job_yaml: str,
    overrides: Sequence[str],
    resolved: ResolvedConfig | None,
    problems: list[str],
) -> list[str]:
    """What is wrong with loading the task class, checked even when other keys have problems
    (unless ``task.class`` itself is among them), so that validate lists every problem."""
    if resolved is not None:
        path: Any = resolved.task.task_class
    elif any(p.startswith(TASK_CLASS_KEY) for p in problems):
        return []
    else:
        try:
            raw = load_config(Path(job_yaml), overrides=overrides)
            if is_application(raw):
                return []  # an application: its own problems are reported
            path = raw.get(TASK_CLASS_KEY)
            split_class_path(path, key=TASK_CLASS_KEY)
        except (ConfigError, OSError):
            return []  # the file or the key is unreadable: already reported
    try:
        load_task_class(path)
    except ConfigError as exc:
        return list(exc.problems)
    return []


def _plain(value: Any) -> Any:
    """``value`` with only the types safe_dump can write (tuples -> lists, others -> str)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def _run(job_yaml: str, overrides: Sequence[str], log_format: str, log_level: str) -> int:
    configure_logging(log_format, log_level)
    _add_working_directory_to_path()
    log: FilteringBoundLogger = structlog.get_logger("samzapy.cli")
    try:
        resolved, app = _load(job_yaml, overrides)
    except ConfigError as exc:
        return _config_invalid(log, exc, path=job_yaml)
    with structlog.contextvars.bound_contextvars(
        job=resolved.job.name, container=resolved.job.container_id
    ):
        if app is not None:
            try:
                factory = app.task_factory(resolved)
            except ConfigError as exc:
                return _config_invalid(log, exc, path=job_yaml)
            return _run_resolved(resolved, log, factory)
        try:
            load_task_class(resolved.task.task_class or "")
        except ConfigError as exc:
            return _config_invalid(log, exc, path=job_yaml)
        return _run_resolved(resolved, log, None)


def _config_invalid(log: FilteringBoundLogger, exc: ConfigError, **fields: Any) -> int:
    """Log a configuration error as one ``config_invalid`` line; the traceback of what caused
    it (a task module that raised while importing, say) only at debug level."""
    if exc.__cause__ is not None:
        log.debug("config_error_cause", error=str(exc), exc_info=exc.__cause__)
    log.error("config_invalid", **fields, problems=list(exc.problems), exit_code=EXIT_CONFIG)
    return EXIT_CONFIG


def _run_resolved(
    resolved: ResolvedConfig,
    log: FilteringBoundLogger,
    task_factory: Callable[[], Any] | None,
) -> int:
    loop_factory, loop_name = _loop_factory(resolved.job.loop, log)
    log.info("event_loop_chosen", loop=loop_name, configured=resolved.job.loop)
    stopper = _SignalStopper(log)
    try:
        with asyncio.Runner(loop_factory=loop_factory) as runner:
            runner.run(_run_container(resolved, stopper, task_factory))
    except ConfigError as exc:
        return _config_invalid(log, exc)
    except SamzapyError as exc:
        log.error(
            "job_failed", error=str(exc), error_type=type(exc).__name__, exit_code=EXIT_JOB_FAILED
        )
        return EXIT_JOB_FAILED
    except KeyboardInterrupt:  # SIGINT before the signal handlers were installed
        log.warning("job_interrupted", exit_code=EXIT_JOB_FAILED)
        return EXIT_JOB_FAILED
    except Exception:
        log.exception("job_failed", error_type="unexpected", exit_code=EXIT_JOB_FAILED)
        return EXIT_JOB_FAILED
    # The container logged job_finished with its counts; this is the process's last line.
    log.info("container_exited", stopped_by=stopper.signal_name, exit_code=EXIT_OK)
    return EXIT_OK


def _loop_factory(
    configured: str, log: FilteringBoundLogger
) -> tuple[Callable[[], asyncio.AbstractEventLoop], str]:
    factory, name = loop_factory(configured)
    if name != configured:
        log.warning("uvloop_unavailable", fallback=name)
    return factory, name


class _Stoppable(Protocol):
    def request_stop(self, reason: str) -> None: ...


class _SignalStopper:
    """The first SIGTERM/SIGINT asks the container to stop; a second one exits at once."""

    def __init__(self, log: FilteringBoundLogger) -> None:
        self._log = log
        self.signal_name: str | None = None
        self._installed: list[signal.Signals] = []

    def install(self, loop: asyncio.AbstractEventLoop, container: _Stoppable) -> None:
        for name in _STOP_SIGNALS:
            sig = getattr(signal, name, None)
            if sig is None:
                continue
            try:
                loop.add_signal_handler(sig, self._on_signal, name, container)
            except (NotImplementedError, RuntimeError, ValueError):
                continue  # not supported here (Windows, or not the main thread)
            self._installed.append(sig)

    def uninstall(self, loop: asyncio.AbstractEventLoop) -> None:
        for sig in self._installed:
            loop.remove_signal_handler(sig)
        self._installed.clear()

    def _on_signal(self, name: str, container: _Stoppable) -> None:
        if self.signal_name is None:
            self.signal_name = name
            self._log.info("signal_received", signal=name, action="graceful_stop")
            container.request_stop(name)
            return
        # The graceful stop is stuck or the operator is impatient: leave without cleanup.
        self._log.error(
            "shutdown_forced", signal=name, first_signal=self.signal_name, exit_code=EXIT_JOB_FAILED
        )
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        os._exit(EXIT_JOB_FAILED)


async def _run_container(
    resolved: ResolvedConfig, stopper: _SignalStopper, task_factory: Callable[[], Any] | None
) -> None:
    # Imported here so that `samzapy validate` and `--version` never load the container.
    from samzapy.container.job_runner import JobRunner

    container = JobRunner(resolved, task_factory=task_factory)
    # What start-up made (modules, classes, the configuration) lives as long as the process:
    # keep it out of the collector's full passes, which the messages buffered in the input
    # queues set off every few seconds under load.
    gc.collect()
    gc.freeze()
    loop = asyncio.get_running_loop()
    stopper.install(loop, container)
    try:
        await container.run()
    finally:
        stopper.uninstall(loop)


__all__ = ["EXIT_CONFIG", "EXIT_JOB_FAILED", "EXIT_OK", "main", "run"]
