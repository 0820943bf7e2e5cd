"""The `embscope` command (console script and `python -m embscope`). Start-up makes only objects that live as long
as the process (modules, classes, the command's parser), so the collector is off until cli.main has built the
command: its passes over them during the imports are wasted work (about 4% of a `similarity` run).

The process also ends without tearing the interpreter down. Once the command has ended with its exit status and
every atexit handler has run (temporary folders removed, log handlers flushed), what the teardown still does is
free each object and module one by one, which nothing outside the process sees: 0.1 s after a report, about 15 ms
after most commands (benchmarks/bench_report.py). The standard streams are flushed first; where that fails, or an
exception escaped the command (Ctrl-C and the stopping signals end it with a status), the interpreter ends as usual.
A Ctrl-C or stopping signal while the exit handlers run, or once the command has ended and its SystemExit is on
its way here (stopping.install with the entry point's list), is noted, not raised into one of them
(stopping.noted_to_the_end): they finish, and the status is 128 + its number; a second one ends the process at once.

Only `program` (the console script's and `python -m`'s entry) does so, where the command is the whole process;
`main` raises the command's SystemExit and leaves the process's ending to its caller, who may catch it and go on
(a test, a script running several commands): a quick exit there would end the caller's process with the command's
status, skipping the caller's own exit handlers and status. Nor does `program` where a handler was registered
before its own (sitecustomize, a .pth line: coverage's process_startup saves a subprocess's data so), which would
run after it, that is never, or where `python -i` goes on to a prompt after the command."""

import atexit
import gc
import os
import sys

gc.disable()  # cli.main turns it back on

try:
    from . import stopping
    from .cli import main  # after the collector is off; the command, ended by a SystemExit with its status
except KeyboardInterrupt:  # Ctrl-C in the tenth of a second before main has a handler: the line main gives it
    sys.stderr.write("Error: interrupted\n")
    sys.exit(130)


def program() -> None:
    """main as the whole process: the quick exit once it has ended with an exit status, where nothing may follow."""
    # a handler registered already would run after ours (CPython counts them; nothing public lists them); `python -i`
    # goes on to a prompt after the command
    if atexit._ncallbacks() or sys.flags.inspect:
        main()
        return
    ended: list[object] = []  # the status cli.main exits with, read by quick_exit
    came: list[int] = []  # a signal that came while the exit handlers ran
    atexit.register(quick_exit, ended, came)  # registered first, so it runs last: atexit runs the newest handler first
    stopping.install(came)  # a signal once the command has ended, while its SystemExit is on its way here: noted
    try:
        main()
    except SystemExit as stop:
        ended.append(stop.code)
        stopping.noted_to_the_end(came)
        raise


def quick_exit(ended: list[object], came: list[int]) -> None:
    """End the process now with the status cli.main exited with, as the interpreter would end it (None: 0, a
    number: itself, a message: 1, printed already), or 128 + the number of a signal that came while the exit
    handlers ran, as a process that signal ended has; the standard streams flushed."""
    if not ended:
        return
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):  # a stream that cannot be flushed: the interpreter's own ending says so
        return
    code = ended[0]  # read after the flush, which a stopped reader can hold while a signal comes
    status = 128 + came[0] if came else 0 if code is None else code if isinstance(code, int) else 1
    os._exit(status & 0xFF)


if __name__ == "__main__":
    program()
