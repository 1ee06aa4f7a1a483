"""The job each member of a consumer group names, and the leader's refusal of another job's
members (two jobs whose ``samzapy.<job.name>.<job.id>`` are the same group)."""

from __future__ import annotations

import json

from samzapy.system.kafka.group_wire import (
    decode,
    first_job,
    job_of,
    refusal,
    refusals,
    since_of,
    strangers,
)

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


def test_the_job_that_held_the_group_first_keeps_it_whichever_job_leads() -> None:
    jobs = {"old": LEADER, "young": OTHER, "older-samzapy": None}
    since = {"old": 100.0, "young": 200.0, "older-samzapy": None}
    # A member of an older samzapy (no job, no time) is the leader's, and the oldest.
    assert first_job(OTHER, jobs, since) == OTHER
    assert first_job(OTHER, {"old": LEADER, "young": OTHER}, since) == LEADER
    assert first_job(LEADER, {"old": LEADER, "young": OTHER}, since) == LEADER
    # So a leader of the job that came second refuses its own job's members, itself too.
    holder = first_job(OTHER, {"old": LEADER, "young": OTHER}, since)
    assert holder is not None
    assert strangers(holder, {"old": LEADER, "young": OTHER}) == {"young": OTHER}
    # A tie goes to the leader's job; a leader naming no job refuses no one.
    assert first_job(OTHER, {"a": LEADER, "b": OTHER}, {"a": 1.0, "b": 1.0}) == OTHER
    assert first_job(None, jobs, since) is None


def test_a_member_says_when_it_was_created() -> None:
    assert since_of(decode(b'{"job": ["a.b", "1"], "since": 1712345678.5}')) == 1712345678.5
    assert since_of(decode(b'{"job": ["a.b", "1"]}')) is None
    assert since_of({"since": True}) is None
