"""A full disk without root: SQLite's own file layer, told to refuse growth.

``with full_disk() as disk:`` makes a VFS over the default one the process's default, so
every connection opened inside (a ``Brain``, the CLI run in-process by ``clirun``, a
reflect's second connection) reads and writes its real files through it. While
``disk.full`` is true, a write that would make a file (the brain, its ``-wal``, a
journal) longer fails as a full disk does: SQLite gets ``SQLITE_FULL``. Writes inside a
file's length still succeed, as on a real full file system. ``PRAGMA max_page_count``
limits only the pages of one connection's main file, so it cannot fail an open, nor a
``COMMIT`` writing the -wal; this can.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import apsw


class FullDisk(apsw.VFS):  # type: ignore[misc]
    def __init__(self) -> None:
        self.full = False
        self.base = apsw.vfs_names()[0]  # the default VFS ("unix")
        super().__init__("brainmem-full-disk", self.base, makedefault=True)

    def xOpen(self, name: Any, flags: Any) -> FullFile:  # noqa: N802 (apsw's name)
        return FullFile(self, name, flags)


class FullFile(apsw.VFSFile):  # type: ignore[misc]
    def __init__(self, disk: FullDisk, name: Any, flags: Any) -> None:
        self.disk = disk
        super().__init__(disk.base, name, flags)

    def xWrite(self, data: bytes, offset: int) -> None:  # noqa: N802
        if self.disk.full and offset + len(data) > self.xFileSize():
            raise apsw.FullError("database or disk is full")
        super().xWrite(data, offset)


@contextlib.contextmanager
def full_disk() -> Iterator[FullDisk]:
    """The file layer of every connection opened inside; set ``.full`` to fill the disk."""
    disk = FullDisk()
    try:
        yield disk
    finally:
        disk.unregister()


@contextlib.contextmanager
def small_file_system(folder: Any, size: str = "64k") -> Iterator[None]:
    """A real full disk: a tmpfs of ``size`` mounted on ``folder`` (made if missing) while
    inside, unmounted after. Mounting needs root (or its capability): the test is
    skipped without it."""
    import os
    import subprocess

    import pytest

    os.makedirs(folder, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                          capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {made.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def fill(folder: Any) -> None:
    """Write a file ``filler`` in ``folder`` until its file system has no room left."""
    import contextlib
    import os

    with contextlib.suppress(OSError), open(os.path.join(folder, "filler"), "ab") as filler:
        while True:
            filler.write(b"x" * 4096)
            filler.flush()
