"""The command line: parse, call the library, render. Every way a run can end is decided here, in one place:
0 an answer; 1 an error about the input (one line on stderr); 2 a usage error (`Error: ...` and a usage line).
The options the library's messages name are spelled here as this command line's flags (render/flags.py)."""

from __future__ import annotations

import errno
import gc
import io
import os
import sys
from collections.abc import Sequence
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

from . import sigbus, stopping
from .commands import REGISTER, register
from .commands.base import EmbscopeCommand
from .commands.examples import ROOT_EXAMPLES, ROOT_HELP, SHORT_HELP, describe, epilog
from .core import files
from .core.errors import EmbscopeError, Option, OptionError, message_of
from .core.text import bounded, printable, shortened
from .extras import missing_package
from .render.flags import as_flags, flag
from .version import VERSION

COMMANDS = tuple(REGISTER)  # the order is the order --help lists them


def error_line(message: str) -> None:
    """One line on stderr, whatever stderr's encoding, and of bounded length: a message may quote what the user
    typed (20,000 extra arguments) or what a file holds, and a refusal stays one readable line."""
    sys.stderr.write(f"Error: {printable(bounded(message))}\n")  # stderr escapes what its encoding cannot show


def os_error_text(err: OSError) -> str:
    """An OSError as the user should read it: what failed, on which file (a long name cut short)."""
    reason = err.strerror or type(err).__name__
    if err.filename is None:
        return reason
    return f"expected a file that can be read, found {reason}: {shortened(str(err.filename))!r}"


def memory_text(err: MemoryError) -> str:
    """numpy's _ArrayMemoryError says what it could not allocate ("Unable to allocate 446. MiB for an array with
    shape (57050, 1024) and data type float64"); a bare MemoryError says nothing."""
    said = str(err).splitlines()[0][:200] if str(err) else ""
    return (f"expected enough memory for this answer, found too little{f' ({said})' if said else ''}: a smaller "
            "table, fewer rows or a machine with more memory may do")


def stdout_failed(err: OSError) -> int:
    """Output could not be written (a full disk, a closed pipe): say so once, and stop Python trying again at exit."""
    try:  # later flushes go nowhere instead of raising during shutdown
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass
    if err.errno != errno.EPIPE:  # a reader that stopped early (`| head`) wanted no more: nothing to report
        error_line(f"could not write the output: {err.strerror or err}")
    return 1


def show_usage_error(err: typer.TyperException) -> None:
    """`Error: ...` and one line of usage, instead of typer's boxes or click's three lines."""
    error_line(err.format_message())
    ctx = getattr(err, "ctx", None)
    if ctx is not None:
        usage = " ".join(ctx.get_usage().split())
        sys.stderr.write(f"{usage}  (see '{ctx.command_path} --help')\n")


def click_usage(message: str, hint: str | None, ctx: typer.Context) -> typer.TyperException:
    """The usage error (exit 2) for a message of the library's about an option the user typed."""
    return typer.BadParameter(message, ctx=ctx, param_hint=hint)


HELP_OPTIONS = ("-h", "--help")
RESOLVED = "embscope.command"  # where the group keeps the command it resolved, for usage lines


class EmbscopeGroup(TyperGroup):
    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, windows_expand_args: bool = True, **extra: Any) -> Any:
        try:
            code = super().main(args, prog_name, complete_var, False, windows_expand_args, **extra)
            sys.stdout.flush()  # a full disk shows here, not as a traceback at exit
        except typer.TyperException as err:  # click's usage and parameter errors
            show_usage_error(err)
            code = err.exit_code
        except typer.Abort:
            error_line("aborted")
            code = 1
        except KeyboardInterrupt:
            error_line("interrupted")
            code = 130
        except OSError as err:
            code = stdout_failed(err)
        code = stopping.exit_code(code if isinstance(code, int) else 0)  # SIGTERM, SIGHUP: cleaned up as Ctrl-C
        if not standalone_mode:
            return code
        sys.exit(code)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """Every command's line, from SHORT_HELP as describe gives it to the command: the root's help lists them all
        whichever were built, and a run that prints it builds none."""
        with formatter.section("Commands"):
            formatter.write_dl([(name, SHORT_HELP[name]) for name in COMMANDS])

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        name, command, rest = super().resolve_command(ctx, args)
        ctx.meta[RESOLVED] = name, command
        return name, command, rest

    def invoke(self, ctx: Any) -> Any:
        try:  # the files this run reads are its own record (outputs may not land on them), ended with it
            with files.reading(files.ReadLog()):
                return super().invoke(ctx)
        except typer.TyperException as err:
            name, command = ctx.meta.get(RESOLVED, (None, None))
            # the parser's own complaints (`--out` with no value) come without the command's context
            if getattr(err, "ctx", False) is None and command is not None:
                err.ctx = typer.Context(command, info_name=name, parent=ctx)  # type: ignore[attr-defined]
            raise
        except OptionError as err:  # an option's value, or a combination, the library cannot use: a usage error
            name, command = ctx.meta.get(RESOLVED, (None, None))
            hint = f"'{flag(Option(err.option))}'" if err.option else None
            usage = typer.Context(command, info_name=name, parent=ctx)
            raise click_usage(as_flags(message_of(err)), hint, usage) from None
        except EmbscopeError as err:
            error_line(as_flags(message_of(err)))
        except ModuleNotFoundError as err:  # an optional package, however deep its import: one line naming it
            missing = missing_package(err, f"embscope {ctx.meta.get(RESOLVED, ('',))[0]}".strip())
            if missing is None:
                raise
            error_line(as_flags(message_of(missing)))
        except MemoryError as err:  # an allocation past what the machine (or a ulimit) allows, wherever it was
            error_line(memory_text(err))
        except OSError as err:  # a file the formats did not expect to fail (a name too long, a vanished file)
            if err.filename is None and err.errno in (errno.EPIPE, errno.ENOSPC, errno.EIO, errno.EDQUOT):
                raise  # writing stdout failed: main says so
            error_line(os_error_text(err))
        except KeyboardInterrupt:  # typer makes it exit 130 without a word: said here, as main says it around typer
            error_line("interrupted")
            raise
        raise typer.Exit(1)


def show_version(value: bool) -> None:
    if value:
        typer.echo(f"embscope {VERSION}")
        raise typer.Exit(0)


def root(ctx: typer.Context, version: bool = typer.Option(False, "--version", is_eager=True, callback=show_version,
                                                          help="Print the version and exit.")) -> None:
    """Look inside the token and position embedding tables of a language-model checkpoint."""
    if ctx.invoked_subcommand is None:  # `embscope` alone: the help, as an answer
        typer.echo(ctx.get_help())


class EmbscopeTyper(typer.Typer):
    """A typer app whose commands are built as EmbscopeCommand (strict numbers, options whose value may be left
    out), unless a command names its own class."""

    def command(self, name: str | None = None, *, cls: type[TyperCommand] | None = None, **kwargs: Any) -> Any:
        return super().command(name, cls=cls or EmbscopeCommand, **kwargs)


def build(names: Sequence[str] = COMMANDS) -> typer.Typer:
    """The command line with these commands (all of them, by default, as `app`)."""
    built = EmbscopeTyper(
        cls=EmbscopeGroup,
        name="embscope",
        help=ROOT_HELP,
        epilog=epilog(ROOT_EXAMPLES),
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,  # plain click help: no rich import to print --help
        context_settings={"help_option_names": list(HELP_OPTIONS)},  # every command's context inherits it
    )
    built.callback(invoke_without_command=True)(root)
    for name in names:
        register(built, name)  # imports that command's module, and only it
        describe(built.registered_commands[-1], name)  # its line in --help, and the examples ending its -h
    return built


ROOT_ONLY = (*HELP_OPTIONS, "--version")  # a run that begins so prints the root's help or the version, and runs nothing


def commands_for(args: Sequence[str]) -> Sequence[str]:
    """The command a run names; none for a run that only prints the root's help (its list comes from SHORT_HELP)
    or the version; every command for a name that is none of them (the error suggests the nearest). Each one's
    parser and modules take milliseconds, and a run uses one. A command runs only when it comes first: after
    --help or --version the run prints the root's help or the version."""
    if not args or args[0] in ROOT_ONLY:
        return ()
    return (args[0],) if args[0] in COMMANDS else COMMANDS


def __getattr__(name: str) -> Any:
    if name == "app":  # every command, for `typer.testing.CliRunner` and other callers of the app itself
        globals()["app"] = built = build()
        return built
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    sigbus.install()  # a checkpoint cut short under its memory map: one line and exit 1, not a silent death
    with stopping.installed():  # SIGTERM and SIGHUP clean up as Ctrl-C does; a script's own handlers come back after
        run_command()


def run_command() -> None:
    if sys.stderr is None:  # `2>&-`: messages go nowhere, but the exit code still tells usage from input errors
        sys.stderr = io.StringIO()
    if sys.stdout is None:  # `>&-`: there is nowhere to put an answer
        error_line("could not write the output: standard output is closed")
        sys.exit(1)
    if hasattr(sys.stdout, "reconfigure"):  # a terminal that cannot show a character gets an escape, not a crash
        sys.stdout.reconfigure(errors="backslashreplace")
    try:  # a signal may come while the command's modules import, or before typer's own handler is in place
        app = build(commands_for(sys.argv[1:]))
        # what is imported by now lives as long as the process: the collector need not walk it again, least of all
        # in the full collection at exit (about a seventh of the instructions embscope adds to a bare script's
        # start-up); __main__ turned the collector off for the imports, and the command's own work needs it on
        gc.freeze()
        gc.enable()
        app()
    except KeyboardInterrupt:
        error_line("interrupted")
        sys.exit(stopping.exit_code(130))
