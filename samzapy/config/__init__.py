"""Job configuration: job.yaml -> flat dotted keys -> validated, typed, frozen views.

The only package that reads YAML or the environment. ``load_config`` reads a file into a flat
``Config``; ``resolve`` validates it against ``KNOWN_KEYS`` and builds the views.
"""

from samzapy.config.loader import Config, load_config
from samzapy.config.schema import KNOWN_KEYS, ConfigKey, Kind
from samzapy.config.views import (
    BroadcastInput,
    JobConfig,
    MetricsConfig,
    ResolvedConfig,
    StoreConfig,
    StreamConfig,
    SystemConfig,
    TaskConfig,
    resolve,
)

__all__ = [
    "KNOWN_KEYS",
    "BroadcastInput",
    "Config",
    "ConfigKey",
    "JobConfig",
    "Kind",
    "MetricsConfig",
    "ResolvedConfig",
    "StoreConfig",
    "StreamConfig",
    "SystemConfig",
    "TaskConfig",
    "load_config",
    "resolve",
]
