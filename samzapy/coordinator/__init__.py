"""Which of the job's tasks run in this process: the JobRunner and its coordinators (a static
split or the Kafka consumer group), the shares of tasks it starts and releases, and the group
lease. Above the container, which only runs the tasks it is given."""

from samzapy.coordinator.job_runner import JobRunner

__all__ = ["JobRunner"]
