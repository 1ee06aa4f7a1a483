"""The RocksDB storage engine, on the rocksdict package (the only package that imports it)."""

from samzapy.storage.rocksdb.engine import RocksDBStorageEngine, RocksDBStoreFactory
from samzapy.storage.rocksdb.options import RocksDBSettings

__all__ = ["RocksDBSettings", "RocksDBStorageEngine", "RocksDBStoreFactory"]
