"""samzapy: Apache Samza's stream-processing container, rebuilt on asyncio."""

from samzapy.api import *  # noqa: F403
from samzapy.api import __all__ as _api_all

__version__ = "0.1.0"
__all__ = [*_api_all, "__version__"]
