"""Where the file system keeps a stream: ``<root>/<stream>/<partition>.jsonl``.

A stream is a directory under the system's root; partition ``k`` is the file ``k.jsonl`` in
it, one message per line. A stream's partition files must be numbered 0..N-1 with no gap;
other files in the directory are ignored. A directory without any partition file is treated
as a stream that does not exist yet.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from samzapy.api.errors import StreamSystemError

PARTITION_SUFFIX = ".jsonl"
_PARTITION_FILE = re.compile(r"(0|[1-9][0-9]*)\.jsonl")


def stream_dir(root: Path, stream: str) -> Path:
    """The directory of ``stream``; the name must be a single path component."""
    if (
        not stream
        or stream in (".", "..")
        or "/" in stream
        or os.sep in stream
        or (os.altsep is not None and os.altsep in stream)
        or "\0" in stream
    ):
        raise StreamSystemError(
            f"file system stream name {stream!r} is not usable as a directory name: "
            "expected a non-empty name without path separators"
        )
    return root / stream


def partition_path(root: Path, stream: str, partition: int) -> Path:
    """The file of one partition of ``stream``."""
    return stream_dir(root, stream) / f"{partition}{PARTITION_SUFFIX}"


def partition_count(root: Path, stream: str) -> int | None:
    """How many partition files ``stream`` has, or None when it has none (or no directory).

    Raises StreamSystemError when the files are not numbered 0..N-1 without a gap.
    """
    directory = stream_dir(root, stream)
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        raise StreamSystemError(
            f"file system stream {stream!r}: {directory} is a file, expected a directory "
            f"of <partition>{PARTITION_SUFFIX} files"
        ) from None
    except OSError as exc:
        raise StreamSystemError(
            f"cannot list file system stream directory {directory}: {exc}"
        ) from exc
    partitions = sorted(
        int(match.group(1)) for name in names if (match := _PARTITION_FILE.fullmatch(name))
    )
    if not partitions:
        return None
    count = partitions[-1] + 1
    if len(partitions) != count:
        missing = sorted(set(range(count)) - set(partitions))
        shown = ", ".join(f"{p}{PARTITION_SUFFIX}" for p in missing[:5])
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        raise StreamSystemError(
            f"file system stream directory {directory} has a gap in its partition files: "
            f"expected 0{PARTITION_SUFFIX}..{count - 1}{PARTITION_SUFFIX}, "
            f"missing {shown}{more}"
        )
    return count


def create_partition_files(root: Path, stream: str, partitions: int) -> list[Path]:
    """Create the stream's directory and empty files for partitions 0..partitions-1.

    Existing files are kept as they are. Returns the directories whose entries changed, so a
    caller that needs durability can fsync them.
    """
    if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
        raise StreamSystemError(
            f"file system stream {stream!r} needs a partition count >= 1, got {partitions!r}"
        )
    directory = stream_dir(root, stream)
    changed: list[Path] = []
    try:
        if not directory.is_dir():
            if not root.is_dir():
                root.mkdir(parents=True, exist_ok=True)
                changed.append(root.parent)
            directory.mkdir(exist_ok=True)
            changed.append(root)
        for partition in range(partitions):
            path = directory / f"{partition}{PARTITION_SUFFIX}"
            if not path.exists():
                path.touch()
                if directory not in changed:
                    changed.append(directory)
    except OSError as exc:
        raise StreamSystemError(
            f"cannot create file system stream {stream!r} with {partitions} partitions "
            f"in {directory}: {exc}"
        ) from exc
    return changed


def fsync_directory(directory: Path) -> None:
    """Make a directory's entries (created or renamed files) durable."""
    if os.name == "nt":  # Windows cannot open a directory; NTFS journals its metadata
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


__all__ = [
    "PARTITION_SUFFIX",
    "create_partition_files",
    "fsync_directory",
    "partition_count",
    "partition_path",
    "stream_dir",
]
