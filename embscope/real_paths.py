"""Paths resolved as os.path.realpath resolves them, but with each folder looked at once: Path.resolve lstat()s
every component of every path it is given, so N paths that run D folders deep cost N x D calls, each walking
the whole path in the kernel. Here a (real folder, name) pair is looked up once, whatever path it is part of,
and a walk gives up past the links the kernel itself would follow (MAX_LINKS) or past `max_parts` names."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

MAX_LINKS = 40  # the links Linux follows in one lookup before it reports ELOOP


class RealPaths:
    """One resolver per batch of related paths (a model's external files, a snapshot's links): what it has
    looked up stays known, so a folder shared by many paths costs one lstat."""

    def __init__(self, strict: bool = False, max_parts: int | None = None) -> None:
        self.strict = strict  # a missing component raises FileNotFoundError, as Path.resolve(strict=True)
        self.max_parts = max_parts  # names one path (or one link's text) may hold; None: no limit
        self.known: dict[tuple[str, str], str] = {}
        self.following: set[tuple[str, str]] = set()

    def resolve(self, path: str | os.PathLike[str]) -> Path:
        """The real path: links followed, "." and ".." applied after them. OSError with ELOOP for a loop or
        too many links, ENAMETOOLONG for a path of more than `max_parts` names."""
        text = os.fspath(path)
        start = os.sep if os.path.isabs(text) else os.getcwd()
        return Path(self.walk(start, text, 0))

    def walk(self, current: str, rest: str, hops: int) -> str:
        names = rest.split(os.sep)
        if self.max_parts is not None and len(names) > self.max_parts:
            raise OSError(errno.ENAMETOOLONG, f"a path of more than {self.max_parts} names")
        for name in names:
            if name in ("", "."):
                continue
            current = os.path.dirname(current) if name == ".." else self.step(current, name, hops)
        return current

    def step(self, folder: str, name: str, hops: int) -> str:
        """`name` inside the real folder `folder`, followed when it is a link."""
        key = (folder, name)
        if key in self.known:
            return self.known[key]
        path = os.path.join(folder, name)
        try:
            is_link = stat.S_ISLNK(os.lstat(path).st_mode)
        except OSError:
            if self.strict:
                raise
            is_link = False
        if is_link:
            if key in self.following or hops >= MAX_LINKS:
                raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), path)
            self.following.add(key)
            try:
                target = os.readlink(path)
                path = self.walk(os.sep if os.path.isabs(target) else folder, target, hops + 1)
            finally:
                self.following.discard(key)
        self.known[key] = path
        return path
