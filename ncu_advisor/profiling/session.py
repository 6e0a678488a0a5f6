"""Running ncu and following it: the live line, the program's output, Ctrl-C.

:func:`run_ncu` starts the command :mod:`ncu_advisor.profiling.command` built in its own process
group, passes the program's stdout and stderr through untouched, and follows ncu's own
messages in its ``--log-file`` (:class:`_LogFollower`), sorting them line by line
(:class:`_NcuOutput`: kernels, passes, errors, the report's path) for the live line on stderr
(:class:`LiveDisplay`). Ctrl-C stops ncu and the program once so that ncu saves what it profiled.
Part of the wrapper (:mod:`ncu_advisor.profiling.run`).
"""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.text import Text

from ..errors import NcuNotFoundError
from .install import NCU_FIX_HINT

# ncu's own lines; everything else on its output is the program's.
_NCU_LINE = re.compile(r"^==(PROF|WARNING|ERROR|INFO)== ?(.*)$")
# A line can carry a second ncu message when one interrupts a kernel's progress dots.
_EMBEDDED_NCU = re.compile(r"(?<=.)(?===(?:PROF|WARNING|ERROR|INFO)==)")
# `Profiling "name" - 3: 0%....50%....100% - 38 passes`, with `- 3 (4/12):` under `-c 12`;
# under `-k` ncu 2025.3 prints neither: `Profiling "saxpy": 0%...` (also with `-c`).
_PROFILING = re.compile(
    r'^Profiling "(?P<name>.*)"(?: - (?P<id>\d+))?(?: \((?P<n>\d+)/(?P<total>\d+)\))?:'
    r"(?P<rest>.*)$"
)
_PASSES = re.compile(r"- (\d+) pass(?:es)?\b")
_PERCENT = re.compile(r"(\d+)%")
_APP_ERROR = re.compile(r"application returned an error code \((-?\d+)\)")
_REPORT = re.compile(r"^Report: (.+)$")
_UNABLE = re.compile(r"^Unable to access the following (\d+) metrics: (.*?)\.?$")
_AVAILABLE = re.compile(r"^(?:Available Kernels:|\s*\d+\. (?P<name>.+))\s*$")
# Expected with `--clock-control none`, which build_ncu_command chooses on purpose.
_QUIET_WARNINGS = ("Note: Running with unmodified GPU clocks", "No kernels were profiled")
# How long ncu may take to save the report after Ctrl-C before it and the program are killed.
_INTERRUPT_GRACE_S = 60.0


@dataclass
class _NcuOutput:
    """What ncu printed, sorted out line by line (kept apart from the I/O to test it alone)."""

    log: list[str] = field(default_factory=list)
    kernels: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    app_exit_code: int | None = None
    report: str | None = None
    permission_denied: bool = False
    nothing_profiled: bool = False
    available: list[str] = field(default_factory=list)
    total: int | None = None
    passes: list[int] = field(default_factory=list)

    def add(self, line: str) -> tuple[str, re.Match[str] | None] | None:
        """Record one ncu line; return ``(kind, profiling match)``, or None for program output."""
        match = _NCU_LINE.match(line)
        if not match:
            # After "No kernels were profiled." ncu lists the kernels it saw (the program has
            # ended by then): `Available Kernels:`, `1. apply_pair`, ...
            listed = _AVAILABLE.match(line) if self.nothing_profiled else None
            if listed:
                self.log.append(line)
                if listed["name"]:
                    self.available.append(listed["name"])
                return "LIST", None
            return None
        kind, text = match.groups()
        self.log.append(line)
        profiling = None
        if kind == "PROF":
            profiling = _PROFILING.match(text)
            report = _REPORT.match(text)
            if profiling:
                self.kernels.append(profiling["name"])
                if profiling["total"]:
                    self.total = int(profiling["total"])
                passes = _PASSES.search(profiling["rest"])
                if passes:
                    self.passes.append(int(passes.group(1)))
            elif report:
                self.report = report.group(1).strip()
        elif kind == "ERROR":
            app = _APP_ERROR.search(text)
            if app:
                self.app_exit_code = int(app.group(1))
            elif "ERR_NVGPUCTRPERM" in text:
                self.permission_denied = True
            elif "No kernels were profiled" in text:
                self.nothing_profiled = True
            else:
                self.errors.append(text.strip())
        elif kind == "WARNING":
            if "No kernels were profiled" in text:
                self.nothing_profiled = True
            unable = _UNABLE.match(text)
            if unable:
                # On an H200 without a C2C link, the full set always misses 6 ctc__ metrics.
                names = unable.group(2).split(", ")
                shown = ", ".join(names[:2]) + (", ..." if len(names) > 2 else "")
                self.warnings.append(
                    f"ncu could not collect {unable.group(1)} metrics ({shown}); they read n/a"
                )
            elif not text.startswith(_QUIET_WARNINGS):
                short = text if len(text) <= 200 else text[:197] + "..."
                self.warnings.append(f"ncu: {short}")
        return kind, profiling


class LiveDisplay:
    """The live line on stderr while ncu runs, and the program's output passed through.

    The line says which kernel is being profiled, how many are done, their replay passes and,
    when the number of launches is known (``-c``, or ncu's ``(n/N)``), the time left.
    """

    def __init__(self, enabled: bool, total: int | None) -> None:
        self._progress: Progress | None = None
        self.total = total
        self.started = time.monotonic()
        self.first_kernel_at: float | None = None
        console = Console(stderr=True)
        if enabled and console.is_terminal and not console.is_dumb_terminal:
            self._progress = Progress(
                SpinnerColumn(),
                TextColumn("{task.description}"),
                TimeElapsedColumn(),
                console=console,
                transient=True,
                # Never reroute stdout: when it is a file, the program's output belongs there.
                redirect_stdout=False,
                redirect_stderr=False,
            )
            self._task = self._progress.add_task("starting the program under ncu", total=None)
        self._stdout_is_terminal = sys.stdout.isatty()

    @contextmanager
    def shown(self) -> Iterator[LiveDisplay]:
        """Show the live line for the duration of the block."""
        if self._progress is None:
            yield self
            return
        with self._progress:
            yield self

    def program_output(self, line: str, stream: IO[str] | None = None) -> None:
        """Pass one line of the program's output on (its stdout to stdout, stderr to stderr)."""
        stream = stream or sys.stdout
        if self._progress is not None and stream.isatty():
            # Same terminal: print above the live line so the two do not overwrite each other.
            self._progress.console.print(Text(line), soft_wrap=True, highlight=False)
        else:
            stream.write(line + "\n")
            stream.flush()

    def note(self, text: str) -> None:
        """Show a message about the run itself (e.g. that Ctrl-C is being handled)."""
        if self._progress is not None:
            self._progress.update(self._task, description=text, refresh=True)
        else:
            sys.stderr.write(f"ncu-advise: {text}\n")
            sys.stderr.flush()

    def status(self, out: _NcuOutput, current: re.Match[str] | None = None) -> str:
        """Return the live line's text for what ncu said so far (kept testable without a tty)."""
        done = len(out.passes)
        total = out.total or self.total
        parts = []
        if current is not None:
            name = current["name"]
            name = name if len(name) <= 50 else name[:47] + "..."
            kernel = f"kernel {current['id']}: {name}" if current["id"] else name
            percents = _PERCENT.findall(current["rest"])
            parts.append(f"profiling {kernel}" + (f" {percents[-1]}%" if percents else ""))
        else:
            parts.append("running the program under ncu")
        if done:
            passes = sorted(set(out.passes))
            each = (f"{passes[0]}" if len(passes) == 1 else f"{passes[0]}-{passes[-1]}")
            parts.append(f"{done}{'/' + str(total) if total else ''} kernels done, "
                         f"{each} passes each")
            if self.first_kernel_at is not None:
                per_kernel = (time.monotonic() - self.first_kernel_at) / done
                parts.append(f"{per_kernel:.1f} s/kernel")
                if total and total > done:
                    parts.append(f"about {_duration(per_kernel * (total - done))} left")
        return " | ".join(parts)

    def kernel(self, out: _NcuOutput, current: re.Match[str] | None) -> None:
        """Update the live line after a line (or a partial line) of ncu's progress."""
        if current is not None and self.first_kernel_at is None:
            self.first_kernel_at = time.monotonic()
        if self._progress is None:
            return
        self._progress.update(self._task, description=self.status(out, current), refresh=True)


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def _split_ncu_messages(line: str) -> list[str]:
    return [part for part in _EMBEDDED_NCU.split(line) if part] or [line]


def _pump(pipe: IO[bytes], stream: IO[str], lines: queue.Queue) -> None:
    """Move the program's output lines from a pipe to the queue (in a thread)."""
    with pipe:
        for raw in iter(pipe.readline, b""):
            lines.put((stream, raw.rstrip(b"\n").rstrip(b"\r").decode(errors="replace")))
    lines.put((stream, None))


class _LogFollower:
    """Follow ncu's log file as it grows: whole lines to the output, the partial one aside."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh: IO[bytes] | None = None
        self._pending = b""

    def poll(self) -> tuple[list[str], str]:
        """Return the new complete lines and the current partial line."""
        if self._fh is None:
            try:
                self._fh = self.path.open("rb")
            except OSError:  # ncu has not created it yet
                return [], ""
        chunk = self._fh.read()
        if not chunk:
            return [], self._pending.decode(errors="replace")
        *complete, self._pending = (self._pending + chunk).split(b"\n")
        lines = [c.rstrip(b"\r").decode(errors="replace") for c in complete]
        return lines, self._pending.decode(errors="replace")

    def close(self) -> list[str]:
        """Return what is left (a last line without a newline) and close the file."""
        lines, partial = self.poll()
        if self._fh is not None:
            self._fh.close()
        return lines + ([partial] if partial.strip() else [])


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    """Send a signal to ncu and everything it started (the program, its children)."""
    try:
        if os.name == "posix":
            os.killpg(proc.pid, sig)
        elif sig == signal.SIGINT:
            proc.terminate()
        else:
            proc.kill()
    except (ProcessLookupError, PermissionError):
        pass


def run_ncu(
    cmd: list[str], log_path: Path, display: LiveDisplay
) -> tuple[int, _NcuOutput, bool]:
    """Run ncu; show its progress and pass the program's output through.

    Returns:
        ncu's exit status, what it said, and whether the run was interrupted (Ctrl-C).

    """
    out = _NcuOutput(total=display.total)
    follower = _LogFollower(log_path)

    def on_ncu_line(raw: str) -> None:
        for line in _split_ncu_messages(raw):
            seen = out.add(line)
            if seen is not None and seen[1] is not None:
                display.kernel(out, seen[1])

    kwargs: dict = {}
    if os.name == "posix":
        # Its own process group: Ctrl-C reaches ncu-advise alone, which then stops ncu (and
        # through ncu the program) once, so that ncu can save what it profiled.
        kwargs["process_group"] = 0
    # A process outside the terminal's foreground group that reads the terminal is stopped;
    # a program fed through a pipe or a file keeps its input.
    stdin = subprocess.DEVNULL if sys.stdin is not None and sys.stdin.isatty() else None
    try:
        proc = subprocess.Popen(cmd, stdin=stdin, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, **kwargs)
    except OSError as exc:
        raise NcuNotFoundError(
            f"cannot run {cmd[0]}: {exc.strerror or exc}; {NCU_FIX_HINT}") from None
    assert proc.stdout is not None and proc.stderr is not None
    lines: queue.Queue = queue.Queue()
    pumps = [threading.Thread(target=_pump, args=(proc.stdout, sys.stdout, lines), daemon=True),
             threading.Thread(target=_pump, args=(proc.stderr, sys.stderr, lines), daemon=True)]
    for pump in pumps:
        pump.start()
    open_pipes = len(pumps)

    def step(timeout: float) -> None:
        nonlocal open_pipes
        try:
            stream, line = lines.get(timeout=timeout)
            while True:
                if line is None:
                    open_pipes -= 1
                else:
                    display.program_output(line, stream)
                stream, line = lines.get_nowait()
        except queue.Empty:
            pass
        complete, partial = follower.poll()
        for line in complete:
            on_ncu_line(line)
        started = _NCU_LINE.match(partial)
        if started and started.group(1) == "PROF":
            current = _PROFILING.match(started.group(2))
            if current:
                display.kernel(out, current)

    def until_exit(deadline: float | None) -> bool:
        """Run until ncu has exited and its pipes are drained; False if the deadline passed."""
        while proc.poll() is None or open_pipes > 0:
            if deadline is not None and time.monotonic() > deadline:
                return False
            step(0.1)
        return True

    interrupted = False
    try:
        with display.shown():
            try:
                until_exit(None)
            except KeyboardInterrupt:
                interrupted = True
                display.note("Ctrl-C: stopping ncu and the program, keeping what was profiled "
                             "(Ctrl-C again to kill them)")
                _signal_group(proc, signal.SIGINT)
                try:
                    if not until_exit(time.monotonic() + _INTERRUPT_GRACE_S):
                        _signal_group(proc, signal.SIGKILL)
                except KeyboardInterrupt:
                    _signal_group(proc, signal.SIGKILL)
                proc.wait()
            for line in follower.close():
                on_ncu_line(line)
    finally:
        if proc.poll() is None:  # failed while reading: leave nothing running
            _signal_group(proc, signal.SIGKILL)
            proc.wait()
    return proc.returncode, out, interrupted
