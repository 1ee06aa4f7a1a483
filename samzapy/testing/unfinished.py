"""What a TestRunner's job was still doing when its run timed out, as a sentence.

A run that does not finish is most often an input that never ends (an intermediate stream
nothing upstream ends, a partition the test forgot) or a call that never returns; the
timeout names which, per task, so the test's author need not guess.
"""

from __future__ import annotations

from samzapy.container import SamzaContainer


def describe_unfinished(container: SamzaContainer) -> str:
    """What kept ``container`` from finishing: the tasks still running, each with its input
    partitions not ended and the call it was on."""
    if not container.started.is_set():
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
    intermediate = False
    parts: list[str] = []
    for task in running:
        progress = task.progress()
        facts = [f"processed {progress.processed}"]
        if progress.in_flight and progress.position is not None:
            ssp, offset = progress.position
            facts.append(f"a call in flight on {ssp} at offset {offset}")
        left = open_inputs.get(task.name, [])
        if left:
            facts.append(f"not ended: {', '.join(str(ssp) for ssp in left)}")
            config = container.config
            intermediate = intermediate or any(
                config.stream(ssp.system_stream).intermediate for ssp in left
            )
        else:
            facts.append("every input ended, its end-of-stream, commit or close not done")
        parts.append(f"task {str(task.name)!r} ({'; '.join(facts)})")
    text = "still running: " + ", ".join(parts)
    if intermediate:
        text += (
            "; an intermediate stream ends once every task writing it has sent "
            "end-of-stream: run the job that writes it in this namespace first"
        )
    return text


__all__ = ["describe_unfinished"]
