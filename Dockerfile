# samzapy: a slim, non-root image whose entry point is the `samzapy` command.
# Build:  docker build -t samzapy .
# Run:    docker run --rm samzapy                      (the quick-start job)
#         docker run --rm -v $PWD/job.yaml:/etc/samzapy/job.yaml samzapy
#         docker run --rm samzapy validate /etc/samzapy/job.yaml
# tests/cli/test_dockerfile.py lints this file with hadolint and replays its steps in a
# virtualenv; its parser knows ARG, FROM, ENV, RUN, WORKDIR, COPY, USER, EXPOSE, ENTRYPOINT,
# CMD. `make docker-test` builds it for real on a base image made from Debian's packages
# (scripts/docker.sh passes --build-arg BASE_IMAGE=samzapy-base:bookworm: Debian's Python 3.11).
ARG BASE_IMAGE=python:3.12.7-slim-bookworm
FROM ${BASE_IMAGE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONPATH=/app \
    SAMZAPY_STATE_DIR=/var/lib/samzapy/state \
    SAMZAPY_OUTPUT_DIR=/var/lib/samzapy/output

# A fixed numeric uid/gid: Kubernetes' runAsNonRoot can only verify a numeric USER, and
# volumes (fsGroup: 10001) are made writable for it. The state and output directories exist in
# the image, owned by it, so that a named volume mounted there starts writable.
RUN groupadd --system --gid 10001 samzapy \
    && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/samzapy --create-home \
        --shell /usr/sbin/nologin samzapy \
    && install -d -o 10001 -g 10001 /var/lib/samzapy/state /var/lib/samzapy/output

WORKDIR /app
COPY pyproject.toml setup.py README.md ./
COPY samzapy ./samzapy
# RocksDB comes from rocksdict's manylinux wheel (uvloop's and murmurhash2's too): refuse a
# source build, which would need a Rust toolchain. samzapy's own C extension (KV's constructor
# and the framed records' paths, samzapy/_speedups.c) is built with a C compiler installed for
# this step and removed in it, so the image carries no compiler (the slim image has Python's
# headers; container_started logs kv_speedups). pip installs samzapy with its bytecode; the
# source copied for the build then goes, since /app comes first on PYTHONPATH and an
# uncompiled samzapy there would be compiled at every start (PYTHONDONTWRITEBYTECODE, and the
# user cannot write /app): 0.4 s more to each restart.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev \
    && pip install --no-cache-dir --only-binary=rocksdict,uvloop,murmurhash2 . \
    && apt-mark auto gcc libc6-dev \
    && apt-get autoremove -y --purge \
    && rm -rf /var/lib/apt/lists/* samzapy build samzapy.egg-info
COPY examples ./examples
# The task classes compiled once here, for the same reason.
RUN python -m compileall -q examples
COPY configs/quickstart.yaml /etc/samzapy/job.yaml

USER 10001:10001
# The Prometheus reporter's port (metrics.prometheus.port) with /metrics, /healthz, /readyz;
# a job listens there when metrics.reporters has prometheus and metrics.prometheus.host is 0.0.0.0.
EXPOSE 9090
ENTRYPOINT ["samzapy"]
CMD ["run", "/etc/samzapy/job.yaml"]
