# samzapy: a slim, non-root image whose entry point is the `samzapy` command.
# Build:  docker build -t samzapy .
# Run:    docker run --rm samzapy                      (the quick-start job)
#         docker run --rm -v $PWD/job.yaml:/etc/samzapy/job.yaml samzapy
FROM python:3.12.7-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONPATH=/app \
    SAMZAPY_STATE_DIR=/var/lib/samzapy/state \
    SAMZAPY_OUTPUT_DIR=/var/lib/samzapy/output

WORKDIR /app
COPY pyproject.toml README.md ./
COPY samzapy ./samzapy
RUN pip install --no-cache-dir . \
    && useradd --system --uid 10001 --home-dir /var/lib/samzapy --create-home samzapy
COPY examples ./examples
COPY configs/quickstart.yaml /etc/samzapy/job.yaml

USER samzapy
ENTRYPOINT ["samzapy"]
CMD ["run", "/etc/samzapy/job.yaml"]
