"""The ``ncu-advise`` command line: declares options, calls the library, prints.

Every user-facing failure is an :class:`~ncu_advisor.errors.NcuAdviseError`; ``main`` prints
its one line and exits with code 2 (usage/input). No traceback reaches the user.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import os
import shutil
import sys
import warnings
from pathlib import Path

import typer
import typer.main

from ..errors import NcuAdviseError

app = typer.Typer(
    name="ncu-advise",
    help="Ranked, evidence-backed optimization advice from Nsight Compute profiles.\n\n"
         "Profile a program: ncu-advise ./app [args]   (same as: ncu-advise profile ./app)\n\n"
         "Analyze saved reports: ncu-advise run.csv   (same as: ncu-advise analyze run.csv)\n\n"
         "ncu-advise --version prints the version; --install-completion adds tab completion "
         "to your shell.",
    add_completion=True,
    pretty_exceptions_enable=False,
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _register_commands() -> None:
    """Register every command; each lives in a module of its own (in ``--help``'s order)."""
    from .analyze import analyze, export
    from .demo import demo_command
    from .occupancy import occupancy_command
    from .profile import profile_cmd
    from .rules import rules_cmd

    app.command()(analyze)
    app.command()(export)
    app.command("rules")(rules_cmd)
    app.command("profile", context_settings={
        "allow_extra_args": True, "ignore_unknown_options": True,
        "allow_interspersed_args": False})(profile_cmd)
    app.command("demo")(demo_command)
    app.command("occupancy")(occupancy_command)
    from .diff import diff_command
    from .store import ingest_command, query_command, trend_command

    app.command("diff")(diff_command)
    app.command("ingest")(ingest_command)
    app.command("query")(query_command)
    app.command("trend")(trend_command)


_register_commands()
# Options of `profile` that take a value, so that `ncu-advise -o DIR -c 20 ./app` finds ./app.
_PROFILE_VALUE_OPTIONS = {"-o", "--output", "--set", "-k", "--kernel", "--kernel-name", "-c",
                          "--launch-count", "--rules", "--coverage", "--color"}
# The app's own options (typer's shell completion): never a program to profile.
_APP_OPTIONS = ("--install-completion", "--show-completion")
HELP_WIDTH = 100


def command_names() -> set[str]:
    """The names of the registered commands (the first word that is not a program)."""
    return {c.name or c.callback.__name__.replace("_", "-") for c in app.registered_commands
            if c.callback is not None}


def _is_explicit_program(word: str) -> bool:
    """./app, /usr/bin/app, build/app: a path, never mistaken for a command."""
    return os.sep in word or bool(os.altsep and os.altsep in word)


def _is_saved_report(word: str) -> bool:
    """A folder, or a file that is not a program and that a reader would read as a report.

    ``ncu-advise run.csv`` and ``ncu-advise reports/`` mean ``analyze``: neither can be
    profiled, and the error for a program that does not run would send the user astray.
    """
    from ..readers.dispatch import looks_like_report

    path = Path(word)
    if path.is_dir():
        return True
    if path.exists() and (not path.is_file() or os.access(path, os.X_OK)):
        return False  # a program (or a pipe, a device): never read here
    # By name, a .txt/.log by its content; a missing report's name too: analyze says so.
    return looks_like_report(path)


VERSION_OPTIONS = ("--version", "-V")


def route(argv: list[str]) -> list[str]:
    """Turn the short form into the ``profile`` command, or refuse an unknown first word.

    ``ncu-advise ./app args`` and ``ncu-advise -o DIR -c 20 ./app args`` are ``profile``; a
    program on PATH is named after ``--`` (``ncu-advise -- python3 train.py``) or with the
    command (``ncu-advise profile python3 train.py``). A saved report or a folder as the first
    word (``ncu-advise run.csv``), or ``-`` for standard input, is ``analyze``. A first word
    that is none of these is an unknown command, not a program that happens to share its name.

    Raises:
        NcuAdviseError: The first word is not a command, and not explicitly a program.

    """
    if not argv or argv[0] in ("-h", "--help", *VERSION_OPTIONS, *_APP_OPTIONS):
        return argv
    commands = command_names()
    if argv[0] in commands:
        return argv
    if argv[0] == "-":  # a report on standard input: `ncu --csv ./app | ncu-advise -`
        return ["analyze", *argv]
    i = 0
    while i < len(argv) and argv[i].startswith("-") and argv[i] != "--":
        i += 2 if argv[i] in _PROFILE_VALUE_OPTIONS else 1
    if i < len(argv) and argv[i] == "--":
        return ["profile", *argv]  # what follows -- is the program, whatever its name
    if i < len(argv) and _is_saved_report(argv[i]):
        return ["analyze", *argv]
    if i >= len(argv) or _is_explicit_program(argv[i]):
        return ["profile", *argv]  # no program: profile's own usage error says so
    word = argv[i]
    close = difflib.get_close_matches(word, sorted(commands), n=1, cutoff=0.6)
    hint = f"did you mean '{close[0]}'? " if close else ""
    spelled = f"./{word}" if Path(word).exists() else f"-- {word}"
    raise NcuAdviseError(
        f"unknown command '{word}'; {hint}commands: {', '.join(sorted(commands))}; to profile "
        f"a program give its path or put -- before it: ncu-advise {spelled} ...")


def _plain_type(label: str) -> str:
    """A help type without Python's spelling: ``<list[Path]>`` -> ``<path>...``.

    ``<int>`` -> ``<integer>``, ``<float>`` -> ``<number>``; a flag's ``<bool>``: nothing.
    """
    inner = label[1:-1] if label.startswith("<") and label.endswith(">") else label
    many = inner.startswith("list[") and inner.endswith("]")
    inner = inner[5:-1] if many else inner
    inner = {"int": "integer", "float": "number", "str": "text", "Path": "path",
             "bool": ""}.get(inner, inner)
    return f"<{inner}>{'...' if many else ''}" if inner else ""


def _plain_help(command) -> None:
    """Show every parameter's type in words users know, on the whole command tree."""
    for sub in getattr(command, "commands", {}).values():
        _plain_help(sub)
    # The help option is made on first use and kept: make it now, to tidy it too.
    context = command.context_class(command, help_option_names=["-h", "--help"])
    helper = command.get_help_option(context)
    for param in [*command.params, *([helper] if helper is not None else [])]:
        if getattr(param, "is_flag", False):
            label = ""
        elif getattr(param, "metavar", None):
            label = param.metavar
        else:
            try:
                label = _plain_type(str(param.display_type(None)))
            except (AttributeError, TypeError):  # not a typer parameter: click's own help
                continue
        # typer's help reads the type column from this method (an argument's metavar is
        # not consulted): an instance attribute answers in its place.
        param.display_type_rich = lambda ctx, label=label: label
        if param.param_type_name == "argument" and param.metavar is None:
            # "PATHS..." in the usage line, "[NAME]" when optional; not "{paths}...".
            shown = param.name.upper() + ("..." if param.nargs != 1 else "")
            param.metavar = param.name.upper()
            param._usage_display_name = (lambda shown=shown: shown) if param.required \
                else (lambda shown=shown: f"[{shown}]")


@functools.cache
def click_command():
    """The click command tree of the app, with plain help types (built once)."""
    command = typer.main.get_command(app)
    _plain_help(command)
    return command


def _help_width() -> None:
    """Help fits the terminal and at most 100 columns (rich would fill a wide terminal)."""
    from typer import rich_utils

    columns = shutil.get_terminal_size((80, 24)).columns
    rich_utils.MAX_WIDTH = max(40, min(columns, HELP_WIDTH))


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``ncu-advise`` console script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] and argv[0] in VERSION_OPTIONS:  # before routing: never a program to profile
        from .._version import __version__

        typer.echo(f"ncu-advise {__version__}")
        return 0 if len(argv) == 1 else _usage(f"{argv[0]} takes no arguments")
    try:
        argv = route(argv)
    except NcuAdviseError as exc:
        from ..render.formats import safe_text

        typer.echo(f"ncu-advise: error: {safe_text(str(exc))}", err=True)
        return exc.exit_code
    click_error, abort = _click_exceptions()
    try:
        with warnings.catch_warnings():
            # numpy's "invalid value" warnings on odd inputs are not the user's business:
            # missing values are reported as such in the output.
            warnings.simplefilter("ignore", RuntimeWarning)
            _help_width()
            code = click_command().main(args=argv, prog_name="ncu-advise",
                                        standalone_mode=False)
        return code if isinstance(code, int) else 0
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except NcuAdviseError as exc:
        from ..render.formats import safe_text

        typer.echo(f"ncu-advise: error: {safe_text(_one_line(str(exc)))}", err=True)
        return exc.exit_code
    except click_error as exc:  # bad option value, missing argument: one line, not a box
        ctx = getattr(exc, "ctx", None)
        command = getattr(ctx, "info_name", None)
        hint = f" (see ncu-advise {command} --help)" if command not in (None, "ncu-advise") \
            else ""
        from ..render.formats import safe_text  # the message echoes the user's words

        typer.echo(f"ncu-advise: error: {safe_text(_one_line(exc.format_message()))}{hint}",
                   err=True)
        return getattr(exc, "exit_code", 2)
    except (KeyboardInterrupt, *abort):
        typer.echo("ncu-advise: interrupted", err=True)
        return 130
    except BrokenPipeError:
        return 0
    except OSError as exc:  # a filesystem problem is the user's to fix, not a bug
        from ..render.formats import safe_text

        where = f"{exc.filename}: " if exc.filename else ""
        typer.echo(f"ncu-advise: error: {safe_text(_one_line(f'{where}{exc.strerror or exc}'))}",
                   err=True)
        return 2
    except Exception as exc:  # noqa: BLE001 - a bug must still not dump a traceback on users
        if os.environ.get("NCU_ADVISE_DEBUG"):
            raise
        from ..render.formats import safe_text

        typer.echo(f"ncu-advise: internal error: {type(exc).__name__}: "
                   f"{safe_text(_one_line(str(exc)))} (a bug: please report it; set "
                   "NCU_ADVISE_DEBUG=1 to see the traceback)", err=True)
        return 70
    return 0


def _click_exceptions() -> tuple[tuple[type, ...], tuple[type, ...]]:
    """Click's usage-error and abort types (typer vendors click from 0.16 on as typer._click)."""
    errors, aborts = [], []
    for name in ("click.exceptions", "typer._click.exceptions"):
        try:
            module = importlib.import_module(name)
        except ImportError:  # not an error: typer brings one of the two, old or new layout
            continue
        errors.append(module.ClickException)
        if hasattr(module, "Abort"):
            aborts.append(module.Abort)
    aborts.append(typer.Abort)
    return tuple(errors), tuple(aborts)


def _usage(message: str) -> int:
    """Print a usage error in one line; its exit code (2)."""
    typer.echo(f"ncu-advise: error: {message}", err=True)
    return 2


def _one_line(text: str) -> str:
    return " ".join(text.split())


def run() -> None:
    """Console-script wrapper: exit with :func:`main`'s status."""
    sys.exit(main())


if __name__ == "__main__":
    run()
