"""A store's ``stores.<name>.rocksdb.*`` settings: parsed, checked, made into rocksdict Options.

The options that matter for a stream task's store, with their defaults (per task instance of
the store: a job with 8 tasks and one store opens 8 RocksDB instances):

- ``rocksdb.block.cache.size.bytes`` (``16777216``): the LRU cache of uncompressed data blocks
  read from the store's files; 0 keeps none.
- ``rocksdb.write.buffer.size.bytes`` (``16777216``): the size of a memtable, the in-memory
  buffer writes go to before RocksDB writes them out as a file.
- ``rocksdb.compression`` (``snappy``, as in Samza): ``none``, ``snappy``, ``lz4`` or ``zstd``.

Any other ``rocksdb.*`` key is a ConfigError rather than silently ignored: a misspelt option
would otherwise go unnoticed. Sizes are integers, or strings of digits (a value given on the
command line). Every other RocksDB option keeps RocksDB's default; the store always opens in
rocksdict's raw mode (bytes keys and values, RocksDB's bytewise order) and creates a missing
directory.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from rocksdict import BlockBasedOptions, Cache, DBCompressionType, Options

from samzapy.api.errors import ConfigError
from samzapy.config.loader import Problem, collecting, config_error

PREFIX = "rocksdb."
BLOCK_CACHE_SIZE = "rocksdb.block.cache.size.bytes"
WRITE_BUFFER_SIZE = "rocksdb.write.buffer.size.bytes"
COMPRESSION = "rocksdb.compression"

DEFAULT_BLOCK_CACHE_SIZE = 16 * 1024 * 1024
DEFAULT_WRITE_BUFFER_SIZE = 16 * 1024 * 1024
DEFAULT_COMPRESSION = "snappy"

COMPRESSIONS: Mapping[str, Callable[[], DBCompressionType]] = {
    "none": DBCompressionType.none,
    "snappy": DBCompressionType.snappy,
    "lz4": DBCompressionType.lz4,
    "zstd": DBCompressionType.zstd,
}

KNOWN_OPTIONS = (BLOCK_CACHE_SIZE, WRITE_BUFFER_SIZE, COMPRESSION)


@dataclass(frozen=True, slots=True)
class RocksDBSettings:
    """The RocksDB settings of one store, checked."""

    block_cache_size_bytes: int = DEFAULT_BLOCK_CACHE_SIZE
    write_buffer_size_bytes: int = DEFAULT_WRITE_BUFFER_SIZE
    compression: str = DEFAULT_COMPRESSION

    @classmethod
    def from_options(cls, store_name: str, options: Mapping[str, Any]) -> RocksDBSettings:
        """The settings in ``options`` (the store's keys, ``stores.<name>.`` prefix removed).

        Raises one ConfigError listing every bad or unknown option, each by its full key.
        """
        prefix = f"stores.{store_name}."
        known = ", ".join(prefix + key for key in KNOWN_OPTIONS)
        problems = [
            Problem(
                prefix + key, f"{prefix}{key} is not a RocksDB option samzapy knows; known: {known}"
            )
            for key in sorted(options)
            if key.startswith(PREFIX) and key not in KNOWN_OPTIONS
        ]
        checked = collecting(problems)

        settings = cls(
            block_cache_size_bytes=checked(
                lambda: _size(options, prefix, BLOCK_CACHE_SIZE, 0), DEFAULT_BLOCK_CACHE_SIZE
            ),
            write_buffer_size_bytes=checked(
                lambda: _size(options, prefix, WRITE_BUFFER_SIZE, 1), DEFAULT_WRITE_BUFFER_SIZE
            ),
            compression=checked(lambda: _compression(options, prefix), DEFAULT_COMPRESSION),
        )
        if problems:
            raise config_error(problems, None)
        return settings

    def to_rocksdict(self) -> Options:
        """rocksdict Options for a store: raw mode, created when missing, these settings."""
        options = Options(raw_mode=True)
        options.create_if_missing(True)
        table = BlockBasedOptions()
        table.set_block_cache(Cache(self.block_cache_size_bytes))
        options.set_block_based_table_factory(table)
        options.set_write_buffer_size(self.write_buffer_size_bytes)
        options.set_compression_type(COMPRESSIONS[self.compression]())
        return options


def _size(options: Mapping[str, Any], prefix: str, key: str, minimum: int) -> int:
    default = DEFAULT_BLOCK_CACHE_SIZE if key == BLOCK_CACHE_SIZE else DEFAULT_WRITE_BUFFER_SIZE
    value = options.get(key)
    if value is None:
        return default
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        number = int(value.strip())
    if number is None or number < minimum:
        raise ConfigError(
            f"{prefix}{key} must be an integer number of bytes >= {minimum}, got {value!r}",
            key=prefix + key,
        )
    return number


def _compression(options: Mapping[str, Any], prefix: str) -> str:
    value = options.get(COMPRESSION)
    if value is None:
        return DEFAULT_COMPRESSION
    name = value.strip().lower() if isinstance(value, str) else None
    if name is None or name not in COMPRESSIONS:
        raise ConfigError(
            f"{prefix}{COMPRESSION} must be one of {', '.join(COMPRESSIONS)}, got {value!r}",
            key=prefix + COMPRESSION,
        )
    return name


__all__ = [
    "BLOCK_CACHE_SIZE",
    "COMPRESSION",
    "COMPRESSIONS",
    "DEFAULT_BLOCK_CACHE_SIZE",
    "DEFAULT_COMPRESSION",
    "DEFAULT_WRITE_BUFFER_SIZE",
    "KNOWN_OPTIONS",
    "WRITE_BUFFER_SIZE",
    "RocksDBSettings",
]
