"""Whole applications through TestRunner.of: each operator, several partitions, several
partition_by stages, merge, broadcast, flat_map_async's concurrency, and their errors."""

from __future__ import annotations

import asyncio
import gc
import warnings
from collections import Counter
from typing import Any, ClassVar

import pytest

from samzapy import (
    KV,
    ConfigError,
    InMemorySystemDescriptor,
    KafkaSystemDescriptor,
    KVSerde,
    StreamApplication,
    StreamApplicationDescriptor,
    TaskError,
)
from samzapy.operators import fusion
from samzapy.system.partitioner import partition_for
from samzapy.system.serde import JsonSerde
from samzapy.testing import TestRunner

KAFKA = KafkaSystemDescriptor("kafka")
LINES = KAFKA.get_input_descriptor("lines", "json")
WORDS = KAFKA.get_output_descriptor("words", KVSerde("string", "json"))
COUNTS = KAFKA.get_output_descriptor("counts", KVSerde("string", "json"))


class Lambda(StreamApplication):
    """An application whose describe is a function given to it."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def describe(self, app_desc: StreamApplicationDescriptor) -> None:
        self.fn(app_desc)


def run(fn: Any, inputs: Any, outputs: dict[Any, int], **config: Any) -> Any:
    runner = TestRunner.of(Lambda(fn), config)
    for descriptor, messages in inputs:
        runner.add_input_stream(descriptor, messages)
    for descriptor, partitions in outputs.items():
        runner.add_output_stream(descriptor, partitions)
    return runner.run(timeout=20)


def flat(by_partition: dict[int, list[Any]]) -> list[Any]:
    return [m for p in sorted(by_partition) for m in by_partition[p]]


def test_map_filter_flat_map_and_send_to_keep_each_partitions_order() -> None:
    def app(d: StreamApplicationDescriptor) -> None:
        out = d.get_output_stream(WORDS)
        (
            d.get_input_stream(LINES)
            .flat_map(str.split)
            .filter(lambda w: w != "the")
            .map(lambda w: KV(w, w.upper()))
            .send_to(out)
        )

    lines = {0: ["the cat sat", "on the mat"], 1: ["a dog"]}
    result = run(app, [(LINES, lines)], {WORDS: 1})
    assert sorted(flat(result.keyed_outputs(WORDS))) == sorted(
        KV(w, w.upper()) for w in ["cat", "sat", "on", "mat", "a", "dog"]
    )
    # partition 0's words in their order, whatever task 1 interleaved
    words = [kv.key for kv in flat(result.keyed_outputs(WORDS)) if kv.key not in ("a", "dog")]
    assert words == ["cat", "sat", "on", "mat"]


def test_a_keyed_input_gives_kvs_and_a_plain_one_values() -> None:
    seen: list[Any] = []
    keyed = KAFKA.get_input_descriptor("keyed", KVSerde("string", "json"))

    def app(d: StreamApplicationDescriptor) -> None:
        d.get_input_stream(keyed).sink(lambda m, c, k: seen.append(m))
        d.get_input_stream(LINES).sink(lambda m, c, k: seen.append(m))

    run(app, [(keyed, [KV("k", 1)]), (LINES, [KV("ignored", "v")])], {})
    assert sorted(map(repr, seen)) == sorted([repr(KV("k", 1)), repr("v")])


class CountWords:
    """A function object with per-task state: init gives each task its own counts."""

    inits: ClassVar[list[str]] = []
    closes = 0

    def init(self, context: Any) -> None:
        CountWords.inits.append(str(context.task_name))
        self.counts: Counter[str] = Counter()

    def apply(self, kv: KV) -> KV:
        self.counts[kv.key] += 1
        return KV(kv.key, self.counts[kv.key])

    def close(self) -> None:
        CountWords.closes += 1


def count_app(stages: int) -> Any:
    def app(d: StreamApplicationDescriptor) -> None:
        words = d.get_input_stream(LINES).flat_map(str.split)
        stream = words.partition_by(lambda w: w, lambda w: w, KVSerde("string", "json"), "s1")
        for n in range(2, stages + 1):
            stream = stream.partition_by(
                lambda kv: kv.key, lambda kv: kv.value, KVSerde("string", "json"), f"s{n}"
            )
        stream.map(CountWords()).send_to(d.get_output_stream(COUNTS))

    return app


@pytest.mark.parametrize("stages", [1, 3])
def test_counts_through_partition_by_stages_are_exact_and_the_job_ends(stages: int) -> None:
    CountWords.inits, CountWords.closes = [], 0
    lines = {p: [f"w{(p * 7 + i) % 11} w{i % 5}" for i in range(40)] for p in range(4)}
    result = run(count_app(stages), [(LINES, lines)], {COUNTS: 3})
    expected = Counter(w for ls in lines.values() for line in ls for w in line.split())
    final: dict[str, int] = {}
    for p, records in result.keyed_outputs(COUNTS).items():
        for kv in records:
            # each word is counted by one task only, so its counts rise 1, 2, 3... in order
            assert kv.value == final.get(kv.key, 0) + 1, (p, kv)
            final[kv.key] = kv.value
    assert final == dict(expected)
    assert sorted(CountWords.inits) == [f"Partition {p}" for p in range(4)]
    assert CountWords.closes == 4
    # every task checkpointed its partition of every stream, the intermediate ones included
    assert all(len(offsets) == 1 + stages for offsets in result.checkpoints.values())


def test_partition_by_routes_each_key_to_one_partition() -> None:
    seen: dict[str, set[int]] = {}

    def app(d: StreamApplicationDescriptor) -> None:
        d.get_input_stream(LINES).partition_by(
            lambda m: m, lambda m: m, KVSerde("string", "json"), "p"
        ).sink(lambda m, c, k: None)

    lines = {p: [f"k{i}" for i in range(30)] for p in range(3)}
    result = run(app, [(LINES, lines)], {})
    broker = result._broker  # the intermediate stream, as written
    names = {ssp.stream for offsets in result.checkpoints.values() for ssp in offsets}
    (intermediate,) = [n for n in names if "partition_by" in n]
    for p in range(broker.partition_count(intermediate)):
        for key, _ in broker.records(intermediate, p):
            if key is not None:
                seen.setdefault(key, set()).add(p)
    assert len(seen) == 30
    assert all(len(ps) == 1 for ps in seen.values())


def test_merge_takes_every_message_of_every_stream() -> None:
    other = KAFKA.get_input_descriptor("other", "json")
    out = KAFKA.get_output_descriptor("out", "json")

    def app(d: StreamApplicationDescriptor) -> None:
        a = d.get_input_stream(LINES).map(lambda m: f"a:{m}")
        b = d.get_input_stream(other).map(lambda m: f"b:{m}")
        a.merge([b]).send_to(d.get_output_stream(out))

    result = run(app, [(LINES, ["1", "2"]), (other, ["3"])], {out: 1})
    assert sorted(flat(result.outputs(out))) == ["a:1", "a:2", "b:3"]


def test_merge_given_a_stream_instead_of_a_list_says_so() -> None:
    other = KAFKA.get_input_descriptor("other", "json")

    def app(d: StreamApplicationDescriptor) -> None:
        d.get_input_stream(LINES).merge(d.get_input_stream(other))  # type: ignore[arg-type]

    with pytest.raises(ConfigError, match=r"merge\(\[other\]\), not merge\(other\)"):
        run(app, [(LINES, ["1"]), (other, ["3"])], {})


def test_broadcast_gives_every_task_every_message() -> None:
    seen: dict[str, list[Any]] = {}

    class Record:
        def init(self, context: Any) -> None:
            self.name = str(context.task_name)

        def apply(self, m: Any, collector: Any, coordinator: Any) -> None:
            seen.setdefault(self.name, []).append(m)

    def app(d: StreamApplicationDescriptor) -> None:
        d.with_default_system(InMemorySystemDescriptor("memory"))
        d.get_input_stream(LINES).broadcast("json", "all").sink(Record())

    lines = {0: ["x", "y"], 1: ["z"], 2: []}
    run(app, [(LINES, lines)], {})
    assert sorted(seen) == ["Partition 0", "Partition 1", "Partition 2"]
    assert all(sorted(ms) == ["x", "y", "z"] for ms in seen.values())


def test_flat_map_async_keeps_at_most_max_concurrency_in_flight() -> None:
    state = {"now": 0, "peak": 0}

    async def enrich(m: str) -> list[str]:
        state["now"] += 1
        state["peak"] = max(state["peak"], state["now"])
        await asyncio.sleep(0.002)
        state["now"] -= 1
        return [m, m + "!"]

    out = KAFKA.get_output_descriptor("out", "json")

    def app(d: StreamApplicationDescriptor) -> None:
        d.get_input_stream(LINES).flat_map_async(enrich).send_to(d.get_output_stream(out))

    result = run(
        app, [(LINES, [str(i) for i in range(60)])], {out: 1}, **{"task.max.concurrency": 4}
    )
    assert state["peak"] == 4
    assert sorted(flat(result.outputs(out))) == sorted(
        [str(i) for i in range(60)] + [f"{i}!" for i in range(60)]
    )
    assert result.checkpoints["Partition 0"]
    assert list(result.checkpoints["Partition 0"].values()) == ["59"]


@pytest.mark.parametrize("every", [1, 64, 1024, 4096])
def test_operator_metrics_count_messages_in_and_out(
    every: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Exact counts past the fused counters' wraps (``fusion.WRAP``), one message in
    ``SAMPLE_EVERY`` timed (1,024 as shipped), below a wrap, at it and above it."""
    monkeypatch.setattr("samzapy.operators.fusion.SAMPLE_EVERY", every)
    out = KAFKA.get_output_descriptor("out", "json")

    def app(d: StreamApplicationDescriptor) -> None:
        d.get_input_stream(LINES).filter(lambda m: m % 2 == 0).send_to(d.get_output_stream(out))

    result = run(app, [(LINES, list(range(3000)))], {out: 1})
    snapshot = result.metrics.snapshot()["task.Partition 0"]
    assert snapshot["filter-1-messages-in"] == 3000
    assert snapshot["filter-1-messages-out"] == 1500
    assert snapshot["send_to-1-messages-in"] == 1500
    assert snapshot["lines-messages-out"] == 3000
    assert snapshot["filter-1-process-latency"]["count"] == 3000 // every
    assert result.outputs(out) == {0: list(range(0, 3000, 2))}


def test_a_fused_count_read_as_it_wraps_never_goes_back() -> None:
    """A count read while its cell wraps on another thread falls short (the cell reset before
    its wraps move on): its reader gives the larger count it read before, so a counter
    metric never decreases."""
    reads = iter([(300,), (44,), (301,)])  # the second read fell between the two stores
    read = fusion._reader(lambda: next(reads), 0)
    assert [read(), read(), read()] == [300, 300, 301]


def test_a_failing_function_fails_the_task_naming_operator_partition_and_offset() -> None:
    def app(d: StreamApplicationDescriptor) -> None:
        d.get_input_stream(LINES).map(lambda m: 1 // m).sink(lambda m, c, k: None)

    with pytest.raises(TaskError) as info:
        run(app, [(LINES, {0: [1, 1], 1: [2, 0, 3]})], {})
    error = info.value
    assert error.operator == "map-1"
    assert (str(error.ssp), error.offset) == ("kafka.lines#1", "1")
    assert isinstance(error.__cause__, ZeroDivisionError)
    assert "operator 'map-1' (map)" in str(error)


def test_a_message_partition_by_cannot_serialize_names_the_operator_and_serde() -> None:
    def app(d: StreamApplicationDescriptor) -> None:
        d.get_input_stream(LINES).partition_by(
            lambda m: m, lambda m: m, KVSerde("string", "json"), "by-key"
        ).sink(lambda m, c, k: None)

    with pytest.raises(
        TaskError,
        match=r"operator 'by-key' \(partition_by\) cannot serialize "
        r"a message with its serde KVSerde\(string, json\)",
    ) as info:
        run(app, [(LINES, [7])], {})
    assert info.value.operator == "by-key"


def test_a_function_that_cannot_be_copied_per_task_is_a_config_error() -> None:
    import threading

    class Locked:
        def __init__(self) -> None:
            self.lock = threading.Lock()

        def apply(self, m: Any) -> Any:
            return m

    def app(d: StreamApplicationDescriptor) -> None:
        d.get_input_stream(LINES).map(Locked()).sink(lambda m, c, k: None)

    with pytest.raises(ConfigError, match=r"operator 'map-1' \(map\) cannot be copied"):
        run(app, [(LINES, [1])], {})


def test_watermarks_flow_through_every_partition_by_stage() -> None:
    from samzapy.control.wire import WATERMARK, decode

    def app(d: StreamApplicationDescriptor) -> None:
        first = d.get_input_stream(LINES).partition_by(
            lambda m: m, lambda m: m, KVSerde("string", "json"), "one"
        )
        first.partition_by(
            lambda kv: kv.key, lambda kv: kv.value, KVSerde("string", "json"), "two"
        ).sink(lambda m, c, k: None)

    runner = TestRunner.of(Lambda(app))
    runner.add_config("streams.lines.samza.watermark.lateness.ms", 0)
    runner.add_config("streams.lines.samza.msg.serde", "none")
    runner.broker.create_stream("lines", 2)
    for p, times in {0: [1_000, 5_000], 1: [2_000, 3_000]}.items():
        for t in times:
            runner.broker.append("lines", p, None, f"m{t}", timestamp=t)
    runner.broker.end_stream("lines")
    result = runner.run(timeout=20)
    for stage in ("one", "two"):
        stream = f"test-job-{runner.namespace}-partition_by-{stage}"
        for p in range(2):
            marks = [
                decoded[1].timestamp
                for _, record in result._broker.records(stream, p)
                if (decoded := decode(record))[0] == WATERMARK
            ]
            # each writer task sends its watermarks in order; the last one of the job is
            # the minimum over the input partitions' largest event times
            assert marks, (stage, p)
            assert min(marks[-2:]) == 3_000, (stage, p, marks)


def test_a_stream_used_twice_feeds_both_branches_in_order() -> None:
    evens = KAFKA.get_output_descriptor("evens", "json")
    tens = KAFKA.get_output_descriptor("tens", "json")

    def app(d: StreamApplicationDescriptor) -> None:
        numbers = d.get_input_stream(LINES).map(int)
        numbers.filter(lambda n: n % 2 == 0).send_to(d.get_output_stream(evens))
        numbers.map(lambda n: n * 10).send_to(d.get_output_stream(tens))

    result = run(app, [(LINES, [str(i) for i in range(300)])], {evens: 1, tens: 1})
    assert result.outputs(evens) == {0: list(range(0, 300, 2))}
    assert result.outputs(tens) == {0: [n * 10 for n in range(300)]}
    snapshot = result.metrics.snapshot()["task.Partition 0"]
    assert snapshot["map-1-messages-out"] == 300
    assert (snapshot["filter-1-messages-in"], snapshot["filter-1-messages-out"]) == (300, 150)


@pytest.mark.parametrize(
    ("build", "operator"),
    [
        (lambda s, out: s.filter(lambda m: 1 // m).send_to(out), "filter-1"),
        (lambda s, out: s.map(lambda m: m).send_to(out), "send_to-1"),  # unserializable
        (lambda s, out: s.flat_map(lambda m: [1 // m]).send_to(out), "flat_map-1"),
        (
            lambda s, out: s.partition_by(lambda m: 1 // m, str, "json", "by").sink(
                lambda m, c, k: None
            ),
            "by",
        ),
    ],
)
def test_every_fused_step_fails_as_its_own_operator(build: Any, operator: str) -> None:
    out = KAFKA.get_output_descriptor("out", "json")

    def app(d: StreamApplicationDescriptor) -> None:
        build(d.get_input_stream(LINES), d.get_output_stream(out))

    runner = TestRunner.of(Lambda(app)).add_input_stream(LINES, [1, 0])
    runner.add_output_stream(out).add_config("streams.out.samza.msg.serde", "json")
    if operator == "send_to-1":
        runner = TestRunner.of(Lambda(app)).add_input_stream(LINES, [{1, 2}])
        runner.add_output_stream(out).add_config("streams.out.samza.msg.serde", "json")
    with pytest.raises(TaskError) as info:
        runner.run(timeout=10)
    assert info.value.operator == operator


def test_a_failing_init_names_its_operator_with_the_functions_own_error() -> None:
    class BadInit:
        def init(self, context: Any) -> None:
            raise LookupError("no profile service")

        def apply(self, m: Any) -> Any:
            return m

    class Local(StreamApplication):  # a class of a function: TestRunner.of takes it
        def describe(self, app_desc: StreamApplicationDescriptor) -> None:
            app_desc.get_input_stream(LINES).map(BadInit()).sink(lambda m, c, k: None)

    with pytest.raises(TaskError, match=r"init\(\) of task 'Partition 0' failed") as info:
        TestRunner.of(Local).add_input_stream(LINES, [1]).run(timeout=10)
    assert info.value.operator == "map-1"
    assert isinstance(info.value.__cause__, LookupError)


def test_the_test_runner_keeps_a_systems_samzapy_settings_and_drops_its_clients() -> None:
    kafka = KafkaSystemDescriptor("kafka").with_bootstrap_servers("broker:9092")
    kafka.with_system_configs({"samza.msg.serde": "json"})
    source = kafka.get_input_descriptor("src")
    seen: list[Any] = []

    def app(d: StreamApplicationDescriptor) -> None:
        d.get_input_stream(source).broadcast(None, "all").sink(lambda m, c, k: seen.append(m))

    runner = TestRunner.of(Lambda(app)).add_input_stream(source, [{"a": 1}])
    resolved, _ = runner._resolved()
    assert resolved.systems["kafka"].factory == "memory"
    assert "systems.kafka.bootstrap.servers" not in resolved.raw
    # the broadcast stream takes the system's json serde: its messages are serialized for real
    assert (
        resolved.stream(next(iter(resolved.task.broadcast_inputs)).system_stream).msg_serde
        == "json"
    )
    runner.run(timeout=10)
    assert seen == [{"a": 1}]


def test_a_broadcast_without_a_serde_on_a_system_without_one_fails_before_running() -> None:
    seen: list[Any] = []

    def app(d: StreamApplicationDescriptor) -> None:
        d.get_input_stream(LINES).broadcast(None, "all").sink(lambda m, c, k: seen.append(m))

    runner = TestRunner.of(Lambda(app)).add_input_stream(LINES, [{"a": 1}])
    with pytest.raises(ConfigError, match=r"broadcast 'all' was given serde None"):
        runner.run(timeout=10)
    assert seen == []


def test_the_test_runner_follows_a_stream_its_config_renames() -> None:
    source = KAFKA.get_input_descriptor("src", "json")
    out = KAFKA.get_output_descriptor("out", "json")

    def app(d: StreamApplicationDescriptor) -> None:
        d.get_input_stream(source).map(lambda m: m + 1).send_to(d.get_output_stream(out))

    renames = {"streams.src.samza.physical.name": "in2", "streams.out.samza.physical.name": "o2"}
    result = (
        TestRunner.of(Lambda(app), renames)
        .add_input_stream(source, [1, 2])
        .add_output_stream(out, partitions=2)
        .run(timeout=10)
    )
    assert sorted(flat(result.outputs(out))) == [2, 3]
    assert len(result.outputs("o2")) == 2


def test_one_function_object_given_to_two_operators_stays_one_in_each_task() -> None:
    other = KAFKA.get_input_descriptor("other", "json")
    out = KAFKA.get_output_descriptor("out", "json")

    class Dedup:
        inits = 0

        def init(self, context: Any) -> None:
            Dedup.inits += 1
            self.seen: set[Any] = set()

        def apply(self, m: Any) -> bool:
            new = m not in self.seen
            self.seen.add(m)
            return new

    def app(d: StreamApplicationDescriptor) -> None:
        dedup = Dedup()
        a = d.get_input_stream(LINES).filter(dedup)
        b = d.get_input_stream(other).filter(dedup)
        a.merge([b]).send_to(d.get_output_stream(out))

    result = run(app, [(LINES, [1, 2, 3]), (other, [2, 3, 4])], {out: 1})
    assert sorted(flat(result.outputs(out))) == [1, 2, 3, 4]
    assert Dedup.inits == 1


@pytest.mark.parametrize("shape", ["fused", "fan-out", "async"])
def test_a_map_that_returns_none_sends_nothing_on_as_samzas_does(shape: str) -> None:
    out = KAFKA.get_output_descriptor("odd", "json")
    other = KAFKA.get_output_descriptor("odd-too", "json")

    async def same(n: int) -> list[int]:
        return [n]

    def app(d: StreamApplicationDescriptor) -> None:
        lines = d.get_input_stream(LINES)
        if shape == "async":
            lines = lines.flat_map_async(same)
        odd = lines.map(lambda n: n if n % 2 else None)
        odd.send_to(d.get_output_stream(out))
        if shape == "fan-out":
            odd.send_to(d.get_output_stream(other))

    outputs = {out: 1, other: 1} if shape == "fan-out" else {out: 1}
    # More than 1,024 messages: the chain's sampled (timed) path drops them too.
    numbers = list(range(1, 2050))
    result = run(app, [(LINES, numbers)], outputs)
    odd = [n for n in numbers if n % 2]
    for descriptor in outputs:
        assert result.outputs(descriptor) == {0: odd}
    snapshot = result.metrics.snapshot()["task.Partition 0"]
    assert (snapshot["map-1-messages-in"], snapshot["map-1-messages-out"]) == (2049, len(odd))
    assert snapshot["send_to-1-messages-in"] == len(odd)


def test_the_runner_names_the_tests_own_mistakes_with_its_streams() -> None:
    unread = KAFKA.get_input_descriptor("unread", "json")
    out = KAFKA.get_output_descriptor("copied", "json")

    def app(d: StreamApplicationDescriptor) -> None:
        d.get_input_stream(LINES).send_to(d.get_output_stream(out))

    with pytest.raises(ValueError, match=r"add_input_stream: the application reads no stream "):
        run(app, [(LINES, [1]), (unread, [2])], {out: 1})
    with pytest.raises(ValueError, match=r"reads stream 'lines', which has no messages: give"):
        run(app, [], {out: 1})
    result = run(app, [(LINES, [1])], {})  # the output not declared: its bytes, not objects
    with pytest.raises(KeyError, match=r"'copied' was not declared with add_output_stream"):
        result.outputs(out)


def test_a_message_its_output_serde_refuses_fails_the_test_as_it_fails_the_job() -> None:
    """The runner's outputs carry objects, but each declared output's message serde checks
    them as the job's would: what the job cannot send, the test cannot either."""
    named = KAFKA.get_output_descriptor("named", "string")

    def app(to: Any) -> Any:
        return lambda d: d.get_input_stream(LINES).map(to).send_to(d.get_output_stream(named))

    assert run(app(str), [(LINES, [1, 2])], {named: 1}).outputs(named) == {0: ["1", "2"]}
    with pytest.raises(TaskError, match="string serde expects a str, got 5") as info:
        run(app(lambda n: 5), [(LINES, [1, 2])], {named: 1})
    assert info.value.operator == "send_to-1"


def test_an_output_serde_that_makes_no_bytes_fails_the_test_as_it_fails_the_job() -> None:
    class Text:  # to_bytes gives str: Kafka and the file system refuse it
        def to_bytes(self, obj: Any) -> Any:
            return str(obj)

        def from_bytes(self, data: Any) -> Any:
            return data

    texts = KAFKA.get_output_descriptor("texts", Text())

    def app(d: StreamApplicationDescriptor) -> None:
        d.get_input_stream(LINES).send_to(d.get_output_stream(texts))

    with pytest.raises(TaskError, match=r"the serde Text made str of 1, not bytes") as info:
        run(app, [(LINES, [1, 2])], {texts: 1})
    assert info.value.operator == "send_to-1"


def test_a_key_lands_on_the_partition_the_job_sends_it_to_and_reads_back_as_sent() -> None:
    """The runner partitions a key by the bytes the output's key serde makes of it, as the
    job does (a json key "w1" is the bytes "w1" with its quotes, another partition than its
    bare text's for most keys); the result holds the keys as the application sent them."""
    out = KAFKA.get_output_descriptor("by-json-key", KVSerde("json", "json"))
    keys: list[Any] = [f"w{i}" for i in range(40)] + [7, [1, "a"]]

    def app(d: StreamApplicationDescriptor) -> None:
        d.get_input_stream(LINES).map(lambda i: KV(keys[i], i)).send_to(d.get_output_stream(out))

    result = run(app, [(LINES, list(range(len(keys))))], {out: 4})
    where = {repr(kv.key): p for p, kvs in result.keyed_outputs(out).items() for kv in kvs}
    expected = {repr(k): partition_for(JsonSerde().to_bytes(k), 4) for k in keys}
    assert where == expected
    assert sorted(kv.value for kv in flat(result.keyed_outputs(out))) == list(range(len(keys)))
    assert {type(kv.key) for kv in flat(result.keyed_outputs(out))} == {str, int, list}


def test_a_key_its_output_serde_refuses_fails_the_test_as_it_fails_the_job() -> None:
    def app(d: StreamApplicationDescriptor) -> None:
        d.get_input_stream(LINES).map(lambda i: KV(i, i)).send_to(d.get_output_stream(WORDS))

    with pytest.raises(TaskError, match="string serde expects a str, got 5") as info:
        run(app, [(LINES, [5])], {WORDS: 1})
    assert info.value.operator == "send_to-1"


def test_an_application_without_describe_says_what_it_lacks() -> None:
    class Empty(StreamApplication):
        pass

    with pytest.raises(ConfigError, match=r"Empty must define describe\(self, app_desc\)"):
        TestRunner.of(Empty).add_input_stream(LINES, [1]).run(timeout=10)


@pytest.mark.parametrize("failing", ["flat_map_async", "map"])
def test_a_failed_branch_of_a_fan_out_leaves_no_other_branch_unawaited(failing: str) -> None:
    """A stream fans out to a flat_map_async and a branch that fails on "poison" (a
    flat_map_async after it, or a map, which fails before the other's awaitable ran): the
    flat_map_async still runs to its end for that message (none of its coroutines is left
    never awaited, nothing it started runs on its own), and the message is dropped whole."""
    done: list[str] = []

    def check(m: str) -> list[str]:
        if m == "poison":
            raise ValueError("cannot take poison")
        return [m]

    async def fails(m: str) -> list[str]:
        await asyncio.sleep(0)
        return check(m)

    async def records(m: str) -> list[str]:
        await asyncio.sleep(0.001)
        done.append(m)
        return []

    out = KAFKA.get_output_descriptor("out", "json")

    def app(d: StreamApplicationDescriptor) -> None:
        lines = d.get_input_stream(LINES)
        if failing == "map":
            lines.flat_map_async(records).sink(lambda m, c, k: None)
            lines.flat_map(check).send_to(d.get_output_stream(out))
        else:
            lines.flat_map_async(fails).send_to(d.get_output_stream(out))
            lines.flat_map_async(records).sink(lambda m, c, k: None)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = run(
            app,
            [(LINES, ["a", "poison", "b"])],
            {out: 1},
            **{"task.drop.process.errors": True},
        )
        gc.collect()
    assert flat(result.outputs(out)) == ["a", "b"]
    assert done == ["a", "poison", "b"]
    assert not [w for w in caught if "never awaited" in str(w.message)]


@pytest.mark.parametrize("path", ["flat_map", "sampled"])
def test_a_failure_after_an_awaitable_leaves_nothing_unawaited(
    path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other ways one message reaches several operators: a flat_map's results, the first
    handed to a flat_map_async whose function refuses the second before returning an
    awaitable; and a fan-out on the sampled path (every message timed here), a flat_map_async
    beside a flat_map that fails. The awaitable made before the failure runs to its end, and
    the message is dropped whole."""
    done: list[str] = []

    async def records(m: str) -> list[str]:
        await asyncio.sleep(0.001)
        done.append(m)
        return []

    def refuses(m: str) -> Any:
        if m == "poison":
            raise ValueError("cannot take poison")
        return records(m)

    def check(m: str) -> list[str]:
        if m == "poison":
            raise ValueError("cannot take poison")
        return [m]

    out = KAFKA.get_output_descriptor("out", "json")

    def app(d: StreamApplicationDescriptor) -> None:
        lines = d.get_input_stream(LINES)
        if path == "flat_map":
            lines.flat_map(lambda m: [f"{m}-first", m]).flat_map_async(refuses).sink(
                lambda m, c, k: None
            )
            lines.flat_map(check).send_to(d.get_output_stream(out))
        else:
            monkeypatch.setattr("samzapy.operators.fusion.SAMPLE_EVERY", 1)
            lines.flat_map_async(records).sink(lambda m, c, k: None)
            lines.flat_map(check).send_to(d.get_output_stream(out))

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = run(
            app, [(LINES, ["a", "poison", "b"])], {out: 1}, **{"task.drop.process.errors": True}
        )
        gc.collect()
    assert flat(result.outputs(out)) == ["a", "b"]
    if path == "flat_map":
        assert done == ["a-first", "a", "poison-first", "b-first", "b"]
    else:
        assert done == ["a", "poison", "b"]
    assert not [w for w in caught if "never awaited" in str(w.message)]


@pytest.mark.parametrize("returns", ["task", "gather", "coroutine", "task after a flat_map"])
async def test_a_cancelled_message_cancels_what_a_later_branch_s_function_started(
    returns: str,
) -> None:
    """A stream fans out to a flat_map_async that waits and one whose function returns a Task,
    ``asyncio.gather``'s future or a coroutine. The other task fails while the first branch
    is awaited, so the job stops and cancels this task's message: what the second branch's
    function returned (its call started with the message, not awaited yet) is cancelled,
    not left running on its own, and a coroutine is not left never awaited."""
    reached, log = asyncio.Event(), []

    async def waits(m: str) -> list[str]:
        if m == "poison":
            await reached.wait()
            raise ValueError("cannot take poison")
        reached.set()
        await asyncio.sleep(10)
        return []

    async def work(m: str) -> list[str]:
        try:
            await asyncio.sleep(0 if m == "poison" else 1)
        except asyncio.CancelledError:
            log.append(("cancelled", m))
            raise
        log.append(("done", m))
        return []

    def starts(m: str) -> Any:
        if returns == "coroutine":
            return work(m)
        if returns == "gather":
            return asyncio.gather(work(m))
        return asyncio.ensure_future(work(m))

    def app(d: StreamApplicationDescriptor) -> None:
        lines = d.get_input_stream(LINES)
        lines.flat_map_async(waits).sink(lambda m, c, k: None)
        if returns == "task after a flat_map":
            lines = lines.flat_map(lambda m: [m])
        lines.flat_map_async(starts).sink(lambda m, c, k: None)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        runner = TestRunner.of(Lambda(app)).add_input_stream(LINES, {0: ["a"], 1: ["poison"]})
        with pytest.raises(TaskError, match="cannot take poison"):
            await runner.run_async(timeout=10)
        await asyncio.sleep(0.05)  # a cancelled Task ends at its next step
        assert [entry for entry in log if entry[1] == "a"] == (
            [] if returns == "coroutine" else [("cancelled", "a")]
        )
        del runner  # its stopped tasks' tracebacks hold what was let go
        gc.collect()
    assert not [w for w in caught if "never awaited" in str(w.message)]
