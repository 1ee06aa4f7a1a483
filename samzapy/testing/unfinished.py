"""What a TestRunner's job was still doing when its run timed out, as a sentence.

A run that does not finish is most often an input that never ends (an intermediate stream
nothing upstream ends, a partition the test forgot) or a call that never returns; the
timeout names which, per task, so the test's author need not guess.
"""

from __future__ import annotations

from samzapy.api.system import SystemStream
from samzapy.container import SamzaContainer

#: How late past the timeout the run may notice it before the event loop counts as held.
HELD_S = 0.25


def describe_unfinished(container: SamzaContainer, late_s: float = 0.0) -> str:
    """What kept ``container`` from finishing: the tasks still running, each with its input
    partitions not ended and the call it was on; or the failure it was stopping after.
    ``late_s``: how long past the timeout the run noticed it (the loop held meanwhile)."""
    text = _unfinished(container)
    if late_s >= HELD_S:
        text += (
            f"; the event loop was held {late_s:.1f} s past the timeout by a synchronous "
            "call (a task's process, window, init or close, or an application's function, "
            "blocking it): give such calls threads with job.container.thread.pool.size"
        )
    return text


def failure_of(container: SamzaContainer) -> BaseException | None:
    """The error the job failed with, when it was stopping after one."""
    run_loop = container.run_loop
    return None if run_loop is None else run_loop.failure


def _unfinished(container: SamzaContainer) -> str:
    failure = failure_of(container)
    if failure is not None:
        return (
            f"the job failed ({failure}) and was still stopping: closing its tasks (their "
            "close, their stores) or the systems did not finish"
        )
    if not container.started.is_set():
        initializing = [str(t.name) for t in container.tasks if t.hooks.running == "init"]
        if initializing:
            return (
                f"the container was still starting: the init of task {initializing[0]!r} "
                "had not returned"
            )
        return (
            "the container was still starting (creating its systems, reading checkpoints, "
            "restoring stores or running a task's init)"
        )
    open_inputs = container.open_inputs()
    running = [task for task in container.tasks if not task.finished]
    if not running:
        return (
            "every task had finished; the container was still stopping (flushing what "
            "the tasks sent, closing them, their stores and the systems)"
        )
    intermediate: set[SystemStream] = set()
    parts: list[str] = []
    run_loop = container.run_loop
    asked = run_loop.shutdown_requested if run_loop is not None else frozenset()
    for task in running:
        progress = task.progress()
        facts = [f"processed {progress.processed}"]
        if task.name in asked:
            facts.append("asked to shut down")
        if progress.in_flight and progress.position is not None:
            ssp, offset = progress.position
            facts.append(f"a call in flight on {ssp} at offset {offset}")
        left = open_inputs.get(task.name, [])
        if left:
            facts.append(f"not ended: {', '.join(str(ssp) for ssp in left)}")
            config = container.config
            intermediate.update(
                ssp.system_stream for ssp in left if config.stream(ssp.system_stream).intermediate
            )
        else:
            facts.append("every input ended, its end-of-stream, commit or close not done")
        parts.append(f"task {str(task.name)!r} ({'; '.join(facts)})")
    text = "still running: " + ", ".join(parts)
    if any(task.name in asked for task in running):
        text += (
            "; a task's coordinator.shutdown() (RequestScope.CURRENT_TASK) stops the job once "
            "every task has asked, as in Samza: RequestScope.ALL_TASKS_IN_CONTAINER stops it "
            "at once"
        )
    if intermediate:
        text += "; an intermediate stream ends once every task writing it has sent end-of-stream"
        # An application's partition_by or broadcast stream is its own: its tasks end it once
        # its upstream inputs have ended, not another job.
        upstream = {u for ss in intermediate for u in container.config.stream(ss).upstream_inputs}
        still_open = {ssp.system_stream for ssps in open_inputs.values() for ssp in ssps}
        if blamed := sorted(str(ss) for ss in still_open & upstream):
            text += (
                ", which each does once its upstream inputs have ended (upstream not ended: "
                f"{', '.join(blamed)})"
            )
        else:
            text += ": run the job that writes it in this namespace first"
    return text


__all__ = ["HELD_S", "describe_unfinished", "failure_of"]
