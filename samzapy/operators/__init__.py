"""Running applications of the high-level API (Samza's samza-core side of it).

``application.py`` loads, describes and plans an application and merges its config keys;
``plan.py`` is the pure planner (the graph -> streams, operators, config; what ``samzapy
plan`` prints); ``impl.py`` holds the operator implementations; ``task.py`` the operator task
that runs one task's copy of the graph. The container knows none of this: it gets a task
factory and the config, as for task classes.
"""

from samzapy.operators.application import Application, load_application
from samzapy.operators.plan import plan_application
from samzapy.operators.plan_document import AppPlan
from samzapy.operators.task import OperatorTaskFactory

__all__ = ["AppPlan", "Application", "OperatorTaskFactory", "load_application", "plan_application"]
