"""samzapy: Apache Samza's stream-processing container, rebuilt on asyncio.

What job authors import from here (``samzapy.api``'s names: ``from samzapy import
StreamTask``) is loaded on first use rather than with the package, which the ``samzapy``
command imports before it can take SIGTERM over (``samzapy.cli``): a stop sent as the process
starts then finds its handler already there (``docker stop``; a container's PID 1 drops a
signal it has no handler for).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own costs an import; type checkers know the name
if TYPE_CHECKING:  # what they see: the names as if imported here
    from samzapy.api import *  # noqa: F403

__version__ = "0.1.0"

if not TYPE_CHECKING:  # hidden from type checkers, which would take any name for one of these

    def __getattr__(name: str) -> object:
        """``samzapy.api``'s names, and ``__all__`` (which ``from samzapy import *`` reads)."""
        if name.startswith("__") and name != "__all__":
            raise AttributeError(f"module 'samzapy' has no attribute {name!r}")
        import importlib

        api = importlib.import_module("samzapy.api")  # not `from samzapy import`: it asks here
        if name in globals():  # a submodule, `api` itself or one that it imported
            return globals()[name]
        if name == "__all__":
            return [*api.__all__, "__version__"]
        if name not in api.__all__:
            raise AttributeError(f"module 'samzapy' has no attribute {name!r}")
        value = getattr(api, name)
        globals()[name] = value  # found at once the next time
        return value

    def __dir__() -> list[str]:
        return sorted({*globals(), *__getattr__("__all__")})
