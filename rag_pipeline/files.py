"""Files written whole or not at all, copied as they are, and what their names say."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path


def write_atomically(path: Path, write: Callable[[str], None]) -> None:
    """``write(temporary_path)``, then move the result onto ``path`` in one step."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(
        dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"
    )
    os.close(descriptor)
    try:
        write(temporary)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def copy_keeping_holes(source: str, target: str) -> str:
    """Copy a file, leaving its holes holes (``shutil.copytree``'s ``copy_function``): a plain
    copy writes a sparse file's unallocated ranges out as zeros, and a vector store's
    preallocated files are mostly that."""
    with open(source, "rb") as reading, open(target, "wb") as writing:
        descriptor = reading.fileno()
        size = os.fstat(descriptor).st_size
        offset = 0
        while offset < size:
            try:
                start = os.lseek(descriptor, offset, os.SEEK_DATA)
            except OSError:  # only a hole is left
                break
            end = os.lseek(descriptor, start, os.SEEK_HOLE)
            reading.seek(start)
            writing.seek(start)
            while start < end and (block := reading.read(min(end - start, 1 << 20))):
                writing.write(block)
                start += len(block)
            offset = end
        writing.truncate(size)
    shutil.copystat(source, target)
    return target


def extension_of(path: str | Path) -> str:
    """A file name's extension in lower case (``".pdf"``), ``""`` for none: the rules of
    ``os.path.splitext`` (a name's leading dots start no extension) without its cost, since a
    pass asks it of every file."""
    name = path.name if isinstance(path, Path) else path.rpartition("/")[2]
    stem, dot, extension = name.rpartition(".")
    if not dot or not stem.strip("."):
        return ""
    return f".{extension.lower()}"
