"""PrometheusReporter over real HTTP on 127.0.0.1: /metrics translation, /healthz, /readyz."""

from __future__ import annotations

import asyncio
import json
import socket
import urllib.request
from collections.abc import AsyncIterator

import pytest
from prometheus_client import CONTENT_TYPE_LATEST
from prometheus_client.parser import text_string_to_metric_families
from structlog.testing import capture_logs

from samzapy.api.errors import ConfigError
from samzapy.config import load_config, resolve
from samzapy.metrics import Health, MetricsRegistry, PrometheusReporter, prometheus, reporter_for
from samzapy.metrics.prometheus import HISTOGRAM_BOUNDS_S, sanitize

MINIMAL = """
job.name: wc
task.class: app.tasks:WordCount
task.inputs: [mem.words]
systems.mem.samza.factory: memory
"""

Sample = tuple[str, dict[str, str], float]


class Reply:
    """One HTTP response as the client read it."""

    def __init__(self, data: bytes) -> None:
        head, _, self.body = data.partition(b"\r\n\r\n")
        status_line, *lines = head.decode("latin-1").split("\r\n")
        self.version, status, _ = status_line.split(" ", 2)
        self.status = int(status)
        self.headers = {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in lines)}

    def json(self) -> object:
        assert self.headers["content-type"] == "application/json"
        return json.loads(self.body)


async def send(port: int, raw: bytes) -> Reply:
    """Send ``raw`` and read until the server closes the connection."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(raw)
        await writer.drain()
        data = await asyncio.wait_for(reader.read(), timeout=10)
    finally:
        writer.close()
        await writer.wait_closed()
    return Reply(data)


async def get(port: int, path: str, method: str = "GET") -> Reply:
    reply = await send(port, f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    assert reply.version == "HTTP/1.1"
    assert reply.headers["connection"] == "close"
    if method != "HEAD":
        assert int(reply.headers["content-length"]) == len(reply.body)
    return reply


async def scrape(port: int) -> dict[str, tuple[str, list[Sample]]]:
    """``/metrics`` parsed: family name -> (type, samples)."""
    reply = await get(port, "/metrics")
    assert reply.status == 200
    assert reply.headers["content-type"] == CONTENT_TYPE_LATEST
    return {
        family.name: (family.type, [(s.name, s.labels, s.value) for s in family.samples])
        for family in text_string_to_metric_families(reply.body.decode())
    }


@pytest.fixture
async def served() -> AsyncIterator[tuple[MetricsRegistry, PrometheusReporter]]:
    registry = MetricsRegistry()
    reporter = PrometheusReporter("127.0.0.1", 0)
    await reporter.start(registry)
    yield registry, reporter
    await reporter.stop()


class TestHealth:
    def test_starts_unready_and_healthy(self) -> None:
        health = Health()
        assert (health.ready, health.healthy, health.problems) == (False, True, {})

    def test_problems_are_set_replaced_and_cleared(self) -> None:
        health = Health()
        health.set_problem("stall:task-0", {"task": "Partition 0", "seconds": 31})
        health.set_problem("stall:task-0", {"task": "Partition 0", "seconds": 62})
        health.set_problem("stall:task-1", {"task": "Partition 1"})
        assert not health.healthy
        assert health.problems == {
            "stall:task-0": {"task": "Partition 0", "seconds": 62},
            "stall:task-1": {"task": "Partition 1"},
        }
        health.clear_problem("stall:task-0")
        health.clear_problem("never-set")
        assert health.problems == {"stall:task-1": {"task": "Partition 1"}}
        health.clear_problem("stall:task-1")
        assert health.healthy

    def test_problems_is_a_copy(self) -> None:
        health = Health()
        detail = {"task": "Partition 0"}
        health.set_problem("stall", detail)
        detail["task"] = "changed"
        health.problems["stall"]["task"] = "changed too"
        health.problems.clear()
        assert health.problems == {"stall": {"task": "Partition 0"}}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("messages-processed", "messages_processed"),
        ("process_latency", "process_latency"),
        ("commitLatency", "commitLatency"),
        ("a..b -- c", "a_b_c"),
        ("-edge-", "edge"),
        ("héllo wörld", "h_llo_w_rld"),
        ("9lives", "9lives"),
        ("", "_"),
        ("---", "_"),
    ],
)
def test_sanitize(text: str, expected: str) -> None:
    assert sanitize(text) == expected


class TestMetricsEndpoint:
    async def test_counter_gauge_and_timer_with_task_label(
        self, served: tuple[MetricsRegistry, PrometheusReporter]
    ) -> None:
        registry, reporter = served
        registry.counter("container", "producer-errors").inc(3)
        registry.gauge("container", "messages-processed", lambda: 42)
        registry.gauge("task.Partition 0", "in-flight").set(2)
        timer = registry.timer("task.Partition 0", "process-latency")
        timer.update_ns(1_000_000)
        timer.update_ns(3_000_000)
        latency = "samzapy_task_process_latency_seconds"
        task = {"task": "Partition 0"}
        # 1 ms lies in the timer's bucket [983040, 1048576) ns, wholly below 2.5 ms but not
        # 1 ms; 3 ms in [2883584, 3145728) ns, wholly below 5 ms.
        buckets = [
            (f"{latency}_bucket", {**task, "le": str(b)}, float((b >= 0.0025) + (b >= 0.005)))
            for b in HISTOGRAM_BOUNDS_S
        ]

        task = {"task": "Partition 0"}
        assert await scrape(reporter.port) == {
            "samzapy_container_producer_errors": (
                "counter",
                [("samzapy_container_producer_errors_total", {}, 3.0)],
            ),
            "samzapy_container_messages_processed": (
                "gauge",
                [("samzapy_container_messages_processed", {}, 42.0)],
            ),
            "samzapy_task_in_flight": ("gauge", [("samzapy_task_in_flight", task, 2.0)]),
            latency: (
                "histogram",
                [
                    *buckets,
                    (f"{latency}_bucket", {**task, "le": "+Inf"}, 2.0),
                    (f"{latency}_count", task, 2.0),
                    (f"{latency}_sum", task, 0.004),
                ],
            ),
        }

    async def test_each_scrape_reads_current_values(
        self, served: tuple[MetricsRegistry, PrometheusReporter]
    ) -> None:
        registry, reporter = served
        processed = [5]
        counter = registry.counter("task.t1", "commits")
        registry.gauge("task.t1", "processed", lambda: processed[0])
        assert await scrape(reporter.port) == {
            "samzapy_task_commits": (
                "counter",
                [("samzapy_task_commits_total", {"task": "t1"}, 0)],
            ),
            "samzapy_task_processed": ("gauge", [("samzapy_task_processed", {"task": "t1"}, 5)]),
        }
        counter.inc(2)
        processed[0] = 9
        registry.counter("task.t2", "commits").inc()
        registry.remove_group("task.t1")
        registry.counter("task.t1", "commits").inc(4)
        assert await scrape(reporter.port) == {
            "samzapy_task_commits": (
                "counter",
                [
                    ("samzapy_task_commits_total", {"task": "t2"}, 1),
                    ("samzapy_task_commits_total", {"task": "t1"}, 4),
                ],
            ),
        }

    async def test_group_kind_becomes_name_part_and_label(
        self, served: tuple[MetricsRegistry, PrometheusReporter]
    ) -> None:
        registry, reporter = served
        registry.gauge("partition.kafka.page-views.3", "lag").set(17)
        registry.gauge("store.word-counts", "size").set(4)
        registry.gauge("9p.x", "v").set(1)
        registry.gauge("quantile.x", "v").set(2)
        registry.counter("rebalance-events", "bytes-total").inc(6)
        registry.timer("container", "commit_seconds").update_ns(2_000)
        families = await scrape(reporter.port)
        assert families["samzapy_partition_lag"] == (
            "gauge",
            [("samzapy_partition_lag", {"partition": "kafka.page-views.3"}, 17)],
        )
        assert families["samzapy_store_size"] == (
            "gauge",
            [("samzapy_store_size", {"store": "word-counts"}, 4)],
        )
        assert families["samzapy_9p_v"] == ("gauge", [("samzapy_9p_v", {"_9p": "x"}, 1)])
        assert families["samzapy_quantile_v"] == (
            "gauge",
            [("samzapy_quantile_v", {"quantile_id": "x"}, 2)],
        )
        # A counter named ..._total is not doubled; a timer named ..._seconds neither.
        assert families["samzapy_rebalance_events_bytes"] == (
            "counter",
            [("samzapy_rebalance_events_bytes_total", {}, 6)],
        )
        assert [s[0] for s in families["samzapy_container_commit_seconds"][1]] == [
            *["samzapy_container_commit_seconds_bucket"] * (len(HISTOGRAM_BOUNDS_S) + 1),
            "samzapy_container_commit_seconds_count",
            "samzapy_container_commit_seconds_sum",
        ]

    async def test_label_values_keep_any_characters(
        self, served: tuple[MetricsRegistry, PrometheusReporter]
    ) -> None:
        registry, reporter = served
        odd = 'Partition "0"\\ \n ünï'
        registry.gauge(f"task.{odd}", "in-flight").set(1)
        assert await scrape(reporter.port) == {
            "samzapy_task_in_flight": ("gauge", [("samzapy_task_in_flight", {"task": odd}, 1)]),
        }

    async def test_clashing_names_export_the_first_and_log_once(
        self, served: tuple[MetricsRegistry, PrometheusReporter]
    ) -> None:
        registry, reporter = served
        registry.gauge("container", "in-flight").set(1)
        registry.gauge("container", "in_flight").set(2)  # same series once sanitized
        registry.counter("container", "commits").inc()
        registry.gauge("container", "commits_total").set(3)  # the counter's sample name
        registry.counter("task.a", "windows").inc(5)
        registry.gauge("task.b", "windows").set(6)  # the same family, another kind
        with capture_logs() as logs:
            first = await scrape(reporter.port)
            second = await scrape(reporter.port)
        assert first == second
        assert first["samzapy_container_in_flight"] == (
            "gauge",
            [("samzapy_container_in_flight", {}, 1)],
        )
        assert first["samzapy_container_commits"] == (
            "counter",
            [("samzapy_container_commits_total", {}, 1)],
        )
        assert "samzapy_container_commits_total" not in first
        assert first["samzapy_task_windows"] == (
            "counter",
            [("samzapy_task_windows_total", {"task": "a"}, 5)],
        )
        skipped = [
            (e["group"], e["metric"], e["reason"])
            for e in logs
            if e["event"] == "metric_not_exported"
        ]
        assert skipped == [
            (
                "container",
                "in_flight",
                "samzapy_container_in_flight{} is already exported",
            ),
            (
                "container",
                "commits_total",
                "samzapy_container_commits_total is already exported by samzapy_container_commits",
            ),
            ("task.b", "windows", "samzapy_task_windows is already exported as a counter"),
        ]

    async def test_a_failing_gauge_is_left_out_and_logged_once(
        self, served: tuple[MetricsRegistry, PrometheusReporter]
    ) -> None:
        registry, reporter = served

        def broken() -> float:
            raise RuntimeError("store closed")

        registry.gauge("store.counts", "size", broken)
        registry.gauge("store.counts", "keys").set(8)
        with capture_logs() as logs:
            for _ in range(2):
                assert await scrape(reporter.port) == {
                    "samzapy_store_keys": (
                        "gauge",
                        [("samzapy_store_keys", {"store": "counts"}, 8)],
                    )
                }
        failures = [e for e in logs if e["event"] == "metric_read_failed"]
        assert [(e["group"], e["metric"]) for e in failures] == [("store.counts", "size")]

    async def test_a_scrape_that_fails_as_a_whole_is_500_logged_and_the_next_one_serves(
        self,
        served: tuple[MetricsRegistry, PrometheusReporter],
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """docs/deploy.md, "Metrics": "a scrape that fails as a whole answers 500 and logs
        metrics_scrape_failed"; the probes and the next scrape are not affected."""
        registry, reporter = served
        registry.counter("container", "commits").inc()

        def broken(collectors: object) -> bytes:
            raise RuntimeError("exposition broke")

        monkeypatch.setattr(prometheus, "generate_latest", broken)
        with capture_logs() as logs:
            reply = await get(reporter.port, "/metrics")
        assert (reply.status, reply.body) == (
            500,
            b"collecting metrics failed; see the container log\n",
        )
        assert [e["event"] for e in logs] == ["metrics_scrape_failed"]
        assert (await get(reporter.port, "/healthz")).status == 200
        monkeypatch.undo()
        assert "samzapy_container_commits" in await scrape(reporter.port)

    async def test_query_string_is_ignored_and_head_has_no_body(
        self, served: tuple[MetricsRegistry, PrometheusReporter]
    ) -> None:
        registry, reporter = served
        registry.counter("container", "commits").inc()
        full = await get(reporter.port, "/metrics?name[]=x")
        head = await get(reporter.port, "/metrics", method="HEAD")
        assert full.status == head.status == 200
        assert b"samzapy_container_commits_total 1.0" in full.body
        assert head.body == b""
        assert head.headers["content-length"] == full.headers["content-length"]

    async def test_a_plain_http_client_reads_it(
        self, served: tuple[MetricsRegistry, PrometheusReporter]
    ) -> None:
        registry, reporter = served
        registry.gauge("container", "up").set(1)

        def fetch() -> tuple[int, str, str]:
            url = f"http://127.0.0.1:{reporter.port}/metrics"
            with urllib.request.urlopen(url, timeout=10) as response:
                return response.status, response.headers["Content-Type"], response.read().decode()

        status, content_type, text = await asyncio.to_thread(fetch)
        assert (status, content_type) == (200, CONTENT_TYPE_LATEST)
        assert "\nsamzapy_container_up 1.0\n" in text


class TestProbes:
    async def test_healthz_follows_problems(
        self, served: tuple[MetricsRegistry, PrometheusReporter]
    ) -> None:
        _, reporter = served
        ok = await get(reporter.port, "/healthz")
        assert (ok.status, ok.json()) == (200, {"status": "ok"})

        reporter.health.set_problem("stall:Partition 0", {"task": "Partition 0", "idle_s": 31.5})
        sick = await get(reporter.port, "/healthz")
        assert (sick.status, sick.json()) == (
            503,
            {
                "status": "unhealthy",
                "problems": {"stall:Partition 0": {"task": "Partition 0", "idle_s": 31.5}},
            },
        )

        reporter.health.clear_problem("stall:Partition 0")
        again = await get(reporter.port, "/healthz")
        assert (again.status, again.json()) == (200, {"status": "ok"})

    async def test_readyz_needs_ready_and_healthy(
        self, served: tuple[MetricsRegistry, PrometheusReporter]
    ) -> None:
        _, reporter = served
        waiting = await get(reporter.port, "/readyz")
        assert (waiting.status, waiting.json()) == (
            503,
            {"status": "not ready", "tasks_running": False, "problems": {}},
        )

        reporter.health.ready = True
        ready = await get(reporter.port, "/readyz")
        assert (ready.status, ready.json()) == (200, {"status": "ready"})

        reporter.health.set_problem("stall", {"task": "t"})
        stalled = await get(reporter.port, "/readyz")
        assert (stalled.status, stalled.json()) == (
            503,
            {"status": "not ready", "tasks_running": True, "problems": {"stall": {"task": "t"}}},
        )

        reporter.health.clear_problem("stall")
        reporter.health.ready = False  # a rebalance
        assert (await get(reporter.port, "/readyz")).status == 503

    async def test_head_probe(self, served: tuple[MetricsRegistry, PrometheusReporter]) -> None:
        _, reporter = served
        reply = await get(reporter.port, "/healthz", method="HEAD")
        assert (reply.status, reply.body) == (200, b"")
        assert reply.headers["content-length"] == str(len(b'{"status": "ok"}\n'))

    async def test_health_given_to_the_reporter_is_the_one_served(self) -> None:
        health = Health()
        health.ready = True
        reporter = PrometheusReporter("127.0.0.1", 0, health)
        await reporter.start(MetricsRegistry())
        try:
            assert (await get(reporter.port, "/readyz")).status == 200
        finally:
            await reporter.stop()


class TestHttp:
    async def test_unknown_path_is_404(
        self, served: tuple[MetricsRegistry, PrometheusReporter]
    ) -> None:
        _, reporter = served
        for path in ("/", "/metric", "/healthz/extra"):
            reply = await get(reporter.port, path)
            assert reply.status == 404
            assert reply.body == f"not found: {path}; try /metrics, /healthz or /readyz\n".encode()

    async def test_other_methods_are_405(
        self, served: tuple[MetricsRegistry, PrometheusReporter]
    ) -> None:
        _, reporter = served
        reply = await get(reporter.port, "/metrics", method="POST")
        assert (reply.status, reply.headers["allow"]) == (405, "GET, HEAD")

    @pytest.mark.parametrize(
        "raw",
        [
            b"GET /metrics\r\n\r\n",
            b"hello\r\n\r\n",
            b"GET /metrics HTTP/1.1\r\nHost: x\r\n",  # closed before the headers end
            b"GET /" + b"x" * 20_000 + b" HTTP/1.1\r\n\r\n",
        ],
    )
    async def test_malformed_request_is_400(
        self, served: tuple[MetricsRegistry, PrometheusReporter], raw: bytes
    ) -> None:
        _, reporter = served
        reader, writer = await asyncio.open_connection("127.0.0.1", reporter.port)
        writer.write(raw)
        writer.write_eof()
        data = await asyncio.wait_for(reader.read(), timeout=10)
        writer.close()
        await writer.wait_closed()
        assert Reply(data).status == 400


class TestLifecycle:
    async def test_reporter_for_builds_it_on_the_configured_default_address(self) -> None:
        metrics = resolve(
            load_config(text=MINIMAL, overrides=("metrics.prometheus.port=0",), env={})
        ).metrics
        assert metrics.prometheus_host == "127.0.0.1"
        health = Health()
        reporter = reporter_for(
            "prometheus",
            interval_ms=metrics.reporter_interval_ms,
            host=metrics.prometheus_host,
            port=metrics.prometheus_port,
            health=health,
        )
        assert isinstance(reporter, PrometheusReporter)
        assert reporter.health is health
        await reporter.start(MetricsRegistry())
        try:
            assert reporter.port != 0
            assert reporter._server is not None
            bound = {sock.getsockname()[:2] for sock in reporter._server.sockets}
            assert bound == {("127.0.0.1", reporter.port)}
            assert (await get(reporter.port, "/healthz")).status == 200
        finally:
            await reporter.stop()

    def test_reporter_for_without_health_gives_a_fresh_one(self) -> None:
        reporter = reporter_for("prometheus", interval_ms=1000, host="127.0.0.1", port=0)
        assert isinstance(reporter, PrometheusReporter)
        assert (reporter.host, reporter.port) == ("127.0.0.1", 0)
        assert (reporter.health.ready, reporter.health.healthy) == (False, True)

    async def test_stop_frees_the_port(self) -> None:
        first = PrometheusReporter("127.0.0.1", 0)
        await first.start(MetricsRegistry())
        port = first.port
        assert (await get(port, "/healthz")).status == 200
        await first.stop()
        with pytest.raises(ConnectionRefusedError):
            await asyncio.open_connection("127.0.0.1", port)
        second = PrometheusReporter("127.0.0.1", port)
        await second.start(MetricsRegistry())
        try:
            assert second.port == port
            assert (await get(port, "/healthz")).status == 200
        finally:
            await second.stop()

    async def test_stop_closes_an_idle_connection(self) -> None:
        reporter = PrometheusReporter("127.0.0.1", 0)
        await reporter.start(MetricsRegistry())
        reader, writer = await asyncio.open_connection("127.0.0.1", reporter.port)
        writer.write(b"GET /metrics HTTP/1.1\r\n")  # and never the end of the headers
        await writer.drain()
        # Connections are taken in order: once a later one is answered, the idle one is open.
        assert (await get(reporter.port, "/healthz")).status == 200
        with capture_logs() as logs:
            await asyncio.wait_for(reporter.stop(), timeout=5)
        assert await asyncio.wait_for(reader.read(), timeout=5) == b""
        writer.close()
        assert [e["event"] for e in logs] == ["metrics_server_stopped"]

    async def test_port_in_use_is_a_config_error(self) -> None:
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = taken.getsockname()[1]
            reporter = PrometheusReporter("127.0.0.1", port)
            with pytest.raises(
                ConfigError,
                match=rf"^metrics\.prometheus\.port: cannot serve Prometheus metrics on "
                rf"127\.0\.0\.1:{port}: .*; choose another port$",
            ) as info:
                await reporter.start(MetricsRegistry())
        assert info.value.key == "metrics.prometheus.port"

    async def test_start_twice_is_refused_and_stop_is_idempotent(self) -> None:
        reporter = PrometheusReporter("127.0.0.1", 0)
        await reporter.start(MetricsRegistry())
        with pytest.raises(RuntimeError, match=r"^PrometheusReporter\.start\(\) called twice$"):
            await reporter.start(MetricsRegistry())
        await reporter.stop()
        await reporter.stop()

    async def test_logs_start_and_stop_with_the_bound_port(self) -> None:
        reporter = PrometheusReporter("127.0.0.1", 0)
        with capture_logs() as logs:
            await reporter.start(MetricsRegistry())
            await reporter.stop()
        assert [(e["event"], e["host"], e["port"]) for e in logs] == [
            ("metrics_server_started", "127.0.0.1", reporter.port),
            ("metrics_server_stopped", "127.0.0.1", reporter.port),
        ]
