"""The public test kit: TestRunner over the in-memory system, and a clock tests move by hand."""

from samzapy.testing.clock import ManualClock, wait_all_tasks_blocked
from samzapy.testing.records import Message
from samzapy.testing.runner import TestResult, TestRunner

__all__ = ["ManualClock", "Message", "TestResult", "TestRunner", "wait_all_tasks_blocked"]
