"""The file system: streams as directories of JSON-lines files, one file per partition."""

from samzapy.system.file.consumer import FileSystemConsumer
from samzapy.system.file.factory import FileSystemAdmin, FileSystemFactory
from samzapy.system.file.producer import FileSystemProducer

__all__ = [
    "FileSystemAdmin",
    "FileSystemConsumer",
    "FileSystemFactory",
    "FileSystemProducer",
]
