"""The container: SamzaContainer, the run loop, task instances, grouper, collector and clock."""

from samzapy.container.clock import Clock, LoopClock
from samzapy.container.container import SamzaContainer, load_task_class

__all__ = ["Clock", "LoopClock", "SamzaContainer", "load_task_class"]
