"""Calls into a foreign library that a hostile file can make loop for ever or crash: libhdf5 never returned
from reading an attribute whose global-heap object size was one byte off, and Ctrl-C could not stop it
(the loop is in C). Such a call runs in a forked child under an address-space limit and a wall-clock
limit; the parent waits in Python (so Ctrl-C works), kills the child when its time is up, and turns a
hang, a crash or a memory limit into one CheckpointError. The child answers with JSON (never a pickle:
it has read a hostile file) and may fill a shared buffer the parent mapped before the fork.

Forking costs a few milliseconds (measured in benchmarks/bench_h5_child.py). Where there is no fork
(Windows), the call runs in this process, as before."""

from __future__ import annotations

import json
import mmap
import os
import select
import signal
import time
import warnings
from collections.abc import Callable
from typing import Any

from ..core import files
from ..core.errors import CheckpointError, EmbscopeError
from ..core.memory import size_text
from ..core.text import detail

STATM_BYTES = 4096  # seven numbers on one line
MAX_ANSWER_BYTES = 64 << 20  # a catalogue of 200,000 tensors in JSON fits well within this
EXIT_GRACE_S = 1.0  # a child that has written its answer has this long to exit before it is killed


def address_space() -> int:
    """This process's virtual memory now (what RLIMIT_AS counts), or 0 where /proc cannot say."""
    try:
        statm = files.read_bytes("/proc/self/statm", STATM_BYTES, "/proc/self/statm", record=False)
        return int(statm.split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (CheckpointError, OSError, ValueError, IndexError):
        return 0


def shared_buffer(nbytes: int) -> mmap.mmap:
    """Anonymous memory the parent and a forked child both see: where the child puts the bytes it reads."""
    return mmap.mmap(-1, max(nbytes, 1), flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)


def run_isolated(call: Callable[[], Any], *, seconds: float, memory: int, what: str, library: str) -> Any:
    """`call()`'s JSON-able result, computed in a forked child that may use `memory` bytes of address space
    beyond what this process has and `seconds` of wall-clock time. An EmbscopeError it raises is raised again
    here (its message kept); a hang, a crash or the memory limit becomes a CheckpointError about `what`."""
    if not hasattr(os, "fork"):
        return call()
    reader, writer = os.pipe()
    current = address_space()
    limit = current + memory if current else 0  # unknown (no /proc): the time limit still holds
    with warnings.catch_warnings():  # Python 3.12 warns that forking a threaded process may deadlock the child
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(reader)
        _child(call, writer, limit)
    os.close(writer)
    finished = False
    try:
        answer, finished = _wait_for_answer(reader, time.monotonic() + seconds)
    finally:
        os.close(reader)
        status = _ended(pid, EXIT_GRACE_S if finished else 0.0)
    if not finished:
        raise CheckpointError(f"{what}: {library} did not finish within {seconds:g} s and was stopped (a damaged "
                              "file can make it loop without end); refused")
    if not answer:
        cause = (f"was killed by {signal.Signals(os.WTERMSIG(status)).name}" if os.WIFSIGNALED(status)
                 else f"ended with status {os.WEXITSTATUS(status)}")
        raise CheckpointError(f"{what}: {library} crashed on it (the process reading it {cause}); refused")
    kind, value = json.loads(answer)
    if kind == "ok":
        return value
    if kind == "memory":
        raise CheckpointError(f"{what}: {library} needed more than {size_text(memory)} of memory to read it; refused")
    if kind == "error":
        raise CheckpointError(value)
    raise CheckpointError(f"{what}: {library} failed on it ({value}); refused")


def _child(call: Callable[[], Any], writer: int, limit: int) -> None:
    """Run `call` under the limit and write [kind, value] as JSON; leave by os._exit (no atexit, no flush of
    the parent's buffers)."""
    code = 0
    try:
        import faulthandler
        import resource  # POSIX only, as fork is
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # end the child at once; the parent reports it
            signal.signal(signum, signal.SIG_DFL)
        faulthandler.disable()  # a crash is the parent's one line, not a dump on stderr
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 2)  # nothing the library prints reaches the user
        if limit:  # the soft limit only, within any hard limit already set (a fuzzer's, a container's)
            hard = resource.getrlimit(resource.RLIMIT_AS)[1]
            soft = limit if hard == resource.RLIM_INFINITY else min(limit, hard)
            resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        try:
            answer: list[Any] = ["ok", call()]
        except MemoryError:
            answer = ["memory", None]
        except EmbscopeError as err:
            answer = ["error", str(err)]
        except BaseException as err:  # noqa: BLE001  anything else is the library's failure, said in one line
            answer = ["failed", detail(err)]
        data = json.dumps(answer).encode()
        if len(data) > MAX_ANSWER_BYTES:
            data = json.dumps(["failed", f"an answer of {size_text(len(data))}"]).encode()
        view = memoryview(data)
        while view:
            view = view[os.write(writer, view):]
    except BaseException:  # noqa: BLE001  nothing may escape a forked child: it would run the parent's code
        code = 1
    finally:
        os._exit(code)


def _wait_for_answer(reader: int, deadline: float) -> tuple[bytes, bool]:
    """(the bytes the child wrote, whether it closed its end before the deadline)."""
    chunks: list[bytes] = []
    held = 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return b"", False
        ready, _, _ = select.select([reader], [], [], left)
        if not ready:
            return b"", False
        chunk = os.read(reader, 1 << 20)
        if not chunk:
            return b"".join(chunks), True
        held += len(chunk)
        if held > MAX_ANSWER_BYTES:  # more than the child ever writes: not its answer
            return b"", True
        chunks.append(chunk)


def _ended(pid: int, grace: float) -> int:
    """The child's wait status, once it has ended: it is given `grace` seconds to exit on its own (it closed its
    end of the pipe, so it is leaving), then killed."""
    deadline = time.monotonic() + grace
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        if time.monotonic() >= deadline:
            os.kill(pid, signal.SIGKILL)
            return os.waitpid(pid, 0)[1]
        time.sleep(0.001)
