"""A task module that fails as it is imported, and names the password the job was given
through the environment, as careless code might (tests/cli/test_secrets.py)."""

import os

raise RuntimeError(f"cannot log in as samzapy with {os.environ.get('KAFKA_PASSWORD')!r}")
