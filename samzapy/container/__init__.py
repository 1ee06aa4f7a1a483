"""The container: SamzaContainer and the JobRunner above it, the plan, the run loop, task
instances and their slots, the input and output sides, and the clock."""

from samzapy.config.classes import load_task_class
from samzapy.container.clock import Clock, LoopClock
from samzapy.container.container import SamzaContainer
from samzapy.container.job_runner import JobRunner

__all__ = ["Clock", "JobRunner", "LoopClock", "SamzaContainer", "load_task_class"]
