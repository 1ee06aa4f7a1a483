"""The container: SamzaContainer, the plan, the run loop, task
instances and their slots, the input and output sides, and the clock."""

from samzapy.config.classes import load_task_class
from samzapy.container.clock import Clock, LoopClock
from samzapy.container.container import SamzaContainer

__all__ = ["Clock", "LoopClock", "SamzaContainer", "load_task_class"]
