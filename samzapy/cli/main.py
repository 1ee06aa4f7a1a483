"""The ``samzapy`` command: arguments, logging set-up, the event loop, signals and exit codes.

``samzapy run JOB_YAML`` runs one container until the job finishes, is stopped by SIGTERM,
SIGINT or SIGHUP, or fails; ``samzapy validate JOB_YAML`` prints the resolved configuration or
its problems; ``samzapy plan JOB_YAML`` prints an application's operator graph (``plan.py``);
``samzapy checkpoint show|set JOB_YAML`` reads or moves a job's checkpoints
(``checkpoint_tool.py``); ``samzapy tail JOB_YAML STREAM`` prints a stream's messages as the
job reads them (``tail.py``).
Exit codes: 0 finished or stopped cleanly, 1 job failure, 2 configuration or usage error.
Ctrl-C stops ``validate``, ``plan`` and ``checkpoint`` with one line on stderr and exit 1.

A run goes:

1. configure logging (JSON lines on stdout by default);
2. check the job file as ``samzapy validate`` does (``problems.check_job``: load and resolve,
   describe and plan an application, load the task class, build the systems' factories...);
3. bind ``job`` and ``container`` to every later log event; any problem found in 2. is logged
   as one ``config_invalid`` line listing them all (the traceback of a cause, a task module
   that failed to import say, only at debug level), exit 2;
4. run the container on uvloop (or asyncio when ``job.loop`` says so or uvloop is missing),
   with SIGTERM, SIGINT and SIGHUP (unless ignored, as under ``nohup``) asking it to stop
   gracefully (``signals.py``); a second signal forces the exit (one before the loop's handlers are
   installed, while the task's module imports say, is one ``job_interrupted`` line naming the
   stage, exit 1); so does the loss of stdout's reader (``| head``, a log collector gone),
   but the stop then exits 1 (``process.LogOutput``);
5. tell what the job's memory systems held, gone with the process (``memory_streams.py``);
   log the outcome once and return its exit code.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TextIO, cast

import structlog
import yaml
from structlog.typing import FilteringBoundLogger

from samzapy import __version__
from samzapy.api.errors import ConfigError, InputMissingError, SamzapyError
from samzapy.cli.logging import FORMATS, LEVELS, configure_logging, flush_library_logs, scrub
from samzapy.cli.memory_streams import report_memory_streams
from samzapy.cli.problems import check_job, load_job
from samzapy.cli.process import (
    LogOutput,
    add_working_directory_to_path,
    command_output,
    leave_unless_calls_ended,
    write_output,
)
from samzapy.cli.signals import (
    OUTPUT_CLOSED,
    SignalStopper,
    install_thread_dump,
    interrupt,
    stop_signals,
)
from samzapy.config.secrets import extra_patterns, redacted
from samzapy.container.event_loop import loop_factory

if TYPE_CHECKING:
    from samzapy.config import ResolvedConfig
    from samzapy.operators.application import Application

EXIT_OK = 0
EXIT_JOB_FAILED = 1
EXIT_CONFIG = 2

#: The operator tools: each module has HELP, add_arguments(parser, job_arguments) and
#: run(args, load) -> int.
_TOOLS = {"checkpoint": "samzapy.cli.checkpoint_tool", "tail": "samzapy.cli.tail"}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default: ``sys.argv[1:]``) and return its exit code."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # usage errors, --help and --version
        write_output(sys.stdout, "")  # the help's reader gone: no error at exit
        return exc.code if isinstance(exc.code, int) else EXIT_CONFIG
    if args.command == "run":
        return _run(args.job_yaml, args.overrides, args.log_format, args.log_level)
    # SIGTERM (`docker stop`, `kubectl delete` of a pod running `tail --follow`) stops a tool
    # as Ctrl-C does, rather than killing it with what it held unwritten (on the main thread
    # only, where Python runs handlers; the caller's handler back after, for a call in-process).
    main_thread = threading.current_thread() is threading.main_thread()
    before = signal.signal(signal.SIGTERM, interrupt) if main_thread else None
    try:
        return _command(args)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM (tail takes it as its end, exit 0): one line
        name = " ".join(filter(None, (args.command, getattr(args, "checkpoint_command", None))))
        after = "; what it wrote before stays (samzapy checkpoint show)" if "set" in name else ""
        print(f"samzapy {name}: interrupted{after}", file=sys.stderr)
        return EXIT_JOB_FAILED
    finally:
        if before is not None:  # None: a handler not set from Python, which cannot be put back
            signal.signal(signal.SIGTERM, before)


def _command(args: argparse.Namespace) -> int:
    """Every command but run."""
    if args.command == "validate":
        return _validate(args.job_yaml, args.overrides)
    if args.command == "plan":
        from samzapy.cli.plan import print_plan

        return print_plan(args.job_yaml, args.overrides, args.format)
    code: int = _tool(args.command).run(args, _load)
    return code


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
        _job_arguments(cmd)
    run_cmd.add_argument("--log-format", choices=FORMATS, default="json")
    run_cmd.add_argument("--log-level", choices=LEVELS, default="info")
    for name in _TOOLS:
        tool = _tool(name)
        tool.add_arguments(commands.add_parser(name, help=tool.HELP), _job_arguments)
    return parser


def _job_arguments(cmd: argparse.ArgumentParser) -> None:
    """JOB_YAML and ``--set KEY=VALUE``, which every command takes."""
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


def _tool(name: str) -> Any:
    import importlib

    return importlib.import_module(_TOOLS[name])


def _override(text: str) -> str:
    key, sep, _ = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return text


def _load(job_yaml: str, overrides: Sequence[str]) -> tuple[ResolvedConfig, Application | None]:
    """The resolved configuration, and the application when ``app.class`` is set (described
    and planned, its keys merged under the file's); every failure, a missing file included,
    is one ConfigError listing the file's problems (``problems.load_job``)."""
    check = load_job(job_yaml, overrides)
    if check.errors or check.resolved is None:
        raise check.error()
    return check.resolved, check.app


def _validate(job_yaml: str, overrides: Sequence[str]) -> int:
    configure_logging("console", "warning", stream=sys.stderr)  # keep stdout pure YAML
    add_working_directory_to_path()
    with command_output() as out:  # what the job's modules print goes to stderr
        check = check_job(job_yaml, overrides)  # the same check as `samzapy run`
    resolved = check.resolved
    if check.errors or resolved is None:
        for problem in check.problems:
            print(scrub(problem), file=sys.stderr)
        return EXIT_CONFIG
    values = redacted(resolved.to_dict(), extra_patterns(resolved.raw))
    text = yaml.safe_dump(_plain(values), sort_keys=True, allow_unicode=True)
    write_output(out, text)  # `samzapy validate job.yaml | head`: quietly
    return EXIT_OK


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
    log: FilteringBoundLogger = structlog.get_logger("samzapy.cli")
    stopper = SignalStopper(log)
    out = LogOutput(sys.stdout, stopper.output_closed)
    configure_logging(log_format, log_level, stream=cast(TextIO, out))  # what logging calls
    add_working_directory_to_path()
    # Until the event loop's handlers take over, SIGTERM and SIGINT interrupt: a signal while
    # the task's module imports is one log line and exit 1, not a traceback or a kill. (Set
    # for SIGINT too, as the loop's handler will be: a process started in the background
    # inherits SIGINT ignored.)
    for sig in stop_signals():
        signal.signal(sig, interrupt)
    install_thread_dump(log)  # SIGQUIT: a thread dump on stderr, as a JVM's kill -3
    try:
        code = _check_and_run(job_yaml, overrides, log, stopper)
    except KeyboardInterrupt:
        log.warning("job_interrupted", stage="start-up", exit_code=EXIT_JOB_FAILED)
        code = EXIT_JOB_FAILED
    leave_unless_calls_ended(code)  # a call given up on the thread pool is not waited for
    return code


def _check_and_run(
    job_yaml: str, overrides: Sequence[str], log: FilteringBoundLogger, stopper: SignalStopper
) -> int:
    check = check_job(job_yaml, overrides)  # the same check as `samzapy validate`
    resolved = check.resolved
    if resolved is None:
        return _config_invalid(log, check.error(), causes=check.causes, path=job_yaml)
    from samzapy.coordinator.identity import container_name

    with structlog.contextvars.bound_contextvars(
        job=resolved.job.name, container=container_name(resolved)
    ):
        if check.errors:
            return _config_invalid(log, check.error(), causes=check.causes, path=job_yaml)
        return _run_resolved(resolved, log, check.task_factory, stopper)


def _config_invalid(
    log: FilteringBoundLogger,
    exc: ConfigError,
    *,
    causes: Sequence[BaseException] | None = None,
    **fields: Any,
) -> int:
    """Log a configuration error as one ``config_invalid`` line; the traceback of what caused
    it (a task module that raised while importing, say) only at debug level."""
    if causes is None:
        causes = [exc.__cause__] if exc.__cause__ is not None else []
    for cause in causes:
        log.debug("config_error_cause", error=str(exc), exc_info=cause)
    log.error("config_invalid", **fields, problems=list(exc.problems), exit_code=EXIT_CONFIG)
    return EXIT_CONFIG


def _run_resolved(
    resolved: ResolvedConfig,
    log: FilteringBoundLogger,
    task_factory: Callable[[], Any] | None,
    stopper: SignalStopper,
) -> int:
    loop_factory, loop_name = _loop_factory(resolved.job.loop, log)
    log.info("event_loop_chosen", loop=loop_name, configured=resolved.job.loop)
    try:
        with asyncio.Runner(loop_factory=loop_factory) as runner:
            try:
                runner.run(_run_container(resolved, stopper, task_factory))
            finally:  # before the last lines: what the libraries' rate limit left out
                flush_library_logs()
                report_memory_streams(resolved, log)  # gone with the process
    except InputMissingError as exc:
        log.error(
            "input_missing",
            system=exc.system,
            stream=exc.stream,
            hint=exc.hint,
            exit_code=EXIT_CONFIG,
        )
        return EXIT_CONFIG
    except ConfigError as exc:
        return _config_invalid(log, exc)
    except SamzapyError as exc:
        log.error(
            "job_failed", error=str(exc), error_type=type(exc).__name__, exit_code=EXIT_JOB_FAILED
        )
        return EXIT_JOB_FAILED
    except KeyboardInterrupt:  # SIGINT or SIGTERM before the loop's handlers were installed
        log.warning("job_interrupted", stage="container start", exit_code=EXIT_JOB_FAILED)
        return EXIT_JOB_FAILED
    except Exception as exc:  # nothing translated it (a bug): its traceback comes too
        log.exception(
            "job_failed",
            error=str(exc) or repr(exc),
            error_type=type(exc).__name__,
            exit_code=EXIT_JOB_FAILED,
        )
        return EXIT_JOB_FAILED
    # The container logged job_finished with its counts; this is the process's last line.
    # Stopped for its log stream's loss, it fails, so that a supervisor restarts it.
    code = EXIT_JOB_FAILED if stopper.reason == OUTPUT_CLOSED else EXIT_OK
    log.info("container_exited", stopped_by=stopper.reason, exit_code=code)
    return code


def _loop_factory(
    configured: str, log: FilteringBoundLogger
) -> tuple[Callable[[], asyncio.AbstractEventLoop], str]:
    factory, name = loop_factory(configured)
    if name != configured:
        log.warning("uvloop_unavailable", fallback=name)
    return factory, name


#: Allocations between two passes of the collector over its youngest generation, in a job.
YOUNG_GC_THRESHOLD = 50_000


async def _run_container(
    resolved: ResolvedConfig, stopper: SignalStopper, task_factory: Callable[[], Any] | None
) -> None:
    # Imported here so that `samzapy validate` and `--version` never load the container.
    from samzapy.container.pool import DefaultExecutor
    from samzapy.coordinator.job_runner import JobRunner

    container = JobRunner(resolved, task_factory=task_factory)
    # What start-up made (modules, classes, the configuration) lives as long as the process:
    # keep it out of the collector's full passes, which the messages buffered in the input
    # queues set off every few seconds under load.
    gc.collect()
    gc.freeze()
    # Every message allocates a few objects the collector tracks (envelopes, batches), and
    # refcounting frees them: the young generation's pass every 700 allocations finds
    # nothing to collect, only the messages still waiting in the queues, which it then
    # promotes and scans again. One pass every 50,000 costs far less; cyclic garbage waits
    # longer to be freed, a few MB at most.
    gc.set_threshold(YOUNG_GC_THRESHOLD, *gc.get_threshold()[1:])
    loop = asyncio.get_running_loop()
    # Its shutdown, when the loop closes, does not wait for a blocking call a stop gave up on.
    loop.set_default_executor(DefaultExecutor())
    stopper.install(loop, container)
    try:
        await container.run()
    finally:
        stopper.uninstall(loop)


__all__ = ["EXIT_CONFIG", "EXIT_JOB_FAILED", "EXIT_OK", "main"]
