"""Atomic file writes: a file is replaced whole or not at all.

Every file geostat writes is written to a temporary file in the destination's folder,
flushed to disk and renamed over the destination (:func:`os.replace`, atomic within one
file system [1]_). A failed or interrupted write leaves the previous file as it was; of
concurrent writers to one path, the file is one writer's complete output.

References
----------
.. [1] The Open Group (2018). rename(). POSIX.1-2017, IEEE Std 1003.1-2017.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path

__all__ = ["atomic_path", "atomic_write_bytes", "atomic_write_text"]


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """A temporary path to write instead of `path`, moved onto `path` on success.

    The temporary file is created empty (mode ``0o666`` less the umask) in the folder of
    `path` as ``.<name>.<random>.tmp<suffixes>`` (writers see the suffixes of `path`).
    On normal exit it is flushed (``fsync``) and renamed onto `path`; on an exception it
    is removed and `path` is untouched.

    Yields the temporary ``pathlib.Path`` (it may be reopened or replaced). The folder
    of `path` must exist. Raises IsADirectoryError if `path` is a folder, OSError if the
    temporary file cannot be created or renamed.
    """
    path = Path(os.fsdecode(path))
    if path.is_dir():
        raise IsADirectoryError(f"cannot write {path}: it is a folder; give a file name")
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp{''.join(path.suffixes)}")
    os.close(os.open(temporary, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
    try:
        yield temporary
        with open(temporary, "rb+") as written:
            os.fsync(written.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    _sync_folder(path.parent)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write `data` to `path` atomically (:func:`atomic_path`)."""
    with atomic_path(path) as temporary:
        temporary.write_bytes(data)


def atomic_write_text(path: str | os.PathLike, text: str, encoding: str = "utf-8") -> None:
    """Write `text` to `path` atomically (:func:`atomic_path`)."""
    atomic_write_bytes(path, text.encode(encoding))


def _sync_folder(folder: Path) -> None:
    """Flush the rename to disk where the platform allows opening a folder (POSIX)."""
    with contextlib.suppress(OSError):
        descriptor = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
