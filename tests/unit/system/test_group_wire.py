"""The job each member of a consumer group names, and the leader's refusal of another job's
members (two jobs whose ``samzapy.<job.name>.<job.id>`` are the same group)."""

from __future__ import annotations

import json

from samzapy.system.kafka.group_wire import decode, job_of, refusal, refusals, strangers

LEADER = ("a.b", "1")
OTHER = ("a", "b.1")


def test_a_member_names_its_job_and_an_older_one_names_none() -> None:
    assert job_of(decode(b'{"tasks": [], "job": ["a.b", "1"]}')) == LEADER
    assert job_of(decode(b'{"tasks": [1]}')) is None
    assert job_of({"job": ["a.b", 1]}) is None


def test_only_another_jobs_members_are_strangers() -> None:
    jobs = {"m1": LEADER, "m2": OTHER, "m3": None}
    assert strangers(LEADER, jobs) == {"m2": OTHER}
    assert strangers(None, jobs) == {}  # a leader of an older samzapy refuses no one


def test_the_refusal_names_the_group_both_jobs_and_the_remedy() -> None:
    message = refusal("samzapy.a.b.1", LEADER, OTHER)
    assert message.startswith("job.name, job.id: consumer group 'samzapy.a.b.1' is used by")
    assert "(job.name 'a.b' job.id '1')" in message
    assert "(job.name 'a' job.id 'b.1')" in message
    assert "change job.name or job.id" in message
    [(member, data)] = refusals("samzapy.a.b.1", LEADER, {"m2": OTHER})
    assert member == "m2" and json.loads(data) == {"refused": message}
