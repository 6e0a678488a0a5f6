"""Run a program under Nsight Compute: the first stage of the flow.

``run_profile("./app", ["--size", "1024"], out_dir="out")`` finds ``ncu``, runs the program
under it with the advisor section set (:mod:`ncu_advisor.profiling.sections`: only what the
analysis reads), and returns the ``.ncu-rep``. ncu's own messages go to a log file
(``--log-file``) that is followed for the live line (kernels profiled, passes, time left); the
program's stdout and stderr stay its own, passed through and never parsed. The report is then
exported as the raw page (one row per launch) and the details page (with ncu's rule rows), which
the analysis reads: on the H200 that took 1.4 s for 32 kernels, against 2.4 s reading the
``.ncu-rep`` through ``ncu_report`` (BENCHMARKS.md, "Profiling cost"); ``export_csv=False``
reads the ``.ncu-rep`` instead. Ctrl-C stops ncu and the program and keeps what was profiled.
Every failure raises an :class:`~ncu_advisor.errors.NcuAdviseError` with one line that says what
happened and how to fix it.

This module is the orchestration (:func:`run_profile`, :class:`ProfileResult`); the parts
live by job:

- :mod:`ncu_advisor.profiling.install`: finding ncu, its version, whether a ``.ncu-rep`` can be
  read;
- :mod:`ncu_advisor.profiling.command`: the profiling and export command lines, the CSV export;
- :mod:`ncu_advisor.profiling.session`: running ncu, following its log, the live line, Ctrl-C.

Their public functions are importable from here too. Nothing here loads pandas: the wrapper
starts ncu before the analysis is imported.
"""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from ..errors import NcuAdviseError, ProfilingError, ProfilingInterrupted
from . import census
from . import sections as collect
from .command import (
    build_import_command,
    build_ncu_command,
    collection_args,
    count_launches,
    default_name,
    export_csvs,
    export_page,
    has_option,
    option_value,
    report_stem,
    resolve_program,
)
from .install import MIN_NCU_VERSION, can_read_ncu_rep, find_ncu, ncu_version, version_warnings
from .session import LiveDisplay, run_ncu

__all__ = [
    "MIN_NCU_VERSION",
    "ProfileResult",
    "build_import_command",
    "build_ncu_command",
    "can_read_ncu_rep",
    "collection_args",
    "export_csvs",
    "find_ncu",
    "ncu_version",
    "run_profile",
    "version_warnings",
]

T = TypeVar("T")
_PERM_MESSAGE = (
    "the GPU performance counters are restricted to admin users (ERR_NVGPUCTRPERM): run with "
    "sudo, or add 'options nvidia NVreg_RestrictProfilingToAdminUsers=0' to a file in "
    "/etc/modprobe.d and reboot (in a container: --cap-add=SYS_ADMIN); "
    "see https://developer.nvidia.com/ERR_NVGPUCTRPERM"
)


@dataclass
class ProfileResult:
    """What one profiling run produced.

    Attributes:
        rep_path: The ``.ncu-rep`` report ncu wrote.
        raw_csv: ``<name>.raw.csv``: the raw page, one row per launch, base units (None when
            the report was not exported: it is read from the ``.ncu-rep`` then).
        details_csv: ``<name>.details.csv``: the details page with ncu's rule rows, base units
            (None when not exported).
        command: The ncu command line that was run, as a list.
        ncu_version: ncu's version, e.g. ``"2025.3.1.0"`` (``"unknown"`` if it did not say).
        program_exit_code: The program's exit status (0 on success; ``None`` if unknown).
        warnings: One-line warnings for the user (old ncu, the program failed part way, ...).
        kernels_profiled: Launches in the report.
        log: ncu's own output lines (``==PROF==``, ``==WARNING==``, ``==ERROR==``).
        ncu: The ncu executable that was used.
        section_set: The section set collected (``None`` if none was asked for).
        clock_control: ncu's ``--clock-control`` value for this run.
        cache_control: ncu's ``--cache-control`` value for this run.
        passes: Replay passes of each profiled kernel, as ncu reported them.
        interrupted: The run was stopped with Ctrl-C; the report covers what was profiled.
        timings: Seconds spent: ``ncu`` (the program under ncu for the depth step),
            ``census`` (the census run), ``export`` (CSV pages).
        log_path: ncu's own messages (``--log-file``), kept beside the report.
        plan: The census and the shapes deep-profiled (None when every launch was profiled).

    """

    rep_path: Path
    raw_csv: Path | None
    details_csv: Path | None
    command: list[str]
    ncu_version: str
    program_exit_code: int | None
    warnings: list[str]
    kernels_profiled: int
    log: list[str]
    ncu: Path | None = None
    section_set: str | None = collect.ADVISOR_SET
    clock_control: str = "none"
    cache_control: str = "all"
    passes: list[int] = field(default_factory=list)
    interrupted: bool = False
    timings: dict[str, float] = field(default_factory=dict)
    log_path: Path | None = None
    plan: census.DepthPlan | None = None

    @property
    def report_files(self) -> list[Path]:
        """The files to read for the analysis: the CSV pages if exported, else the report."""
        if self.raw_csv is not None and self.details_csv is not None:
            return [self.raw_csv, self.details_csv]
        return [self.rep_path]

    def session_facts(self) -> dict[str, object]:
        """Facts about this run for ``Report.session`` (the report shows how data was taken)."""
        facts: dict[str, object] = {
            "ncu_version": self.ncu_version,
            "section_set": self.section_set,
            "clock_control": self.clock_control,
            "cache_control": self.cache_control,
            "ncu_command": shlex.join(self.command),
        }
        if self.passes:
            facts["passes_per_kernel"] = max(self.passes)
        facts["profiling"] = "all launches" if self.plan is None else "census, then depth"
        facts["program_exit_code"] = self.program_exit_code
        return facts


def _nothing_profiled(
    kernel_name: str | None, extra: Sequence[str], app_exit: int | None, available: list[str]
) -> str:
    filters = [f"-k {kernel_name}"] if kernel_name else []
    filters += [a for a in extra if a.split("=", 1)[0] in ("--launch-skip", "-s", "--nvtx-include")]
    if app_exit:
        why = f"the program exited with status {app_exit} before launching a profiled kernel"
    elif filters:
        why = (f"no kernel launch matched the filters ({' '.join(filters)}); ncu matches the "
               "function name exactly (use -k regex:PATTERN for a pattern)")
    else:
        why = ("the program launched no CUDA kernels under ncu (no -k/-c filters were set); "
               "check that it runs on the GPU with these arguments")
    if available:
        shown = ", ".join(available[:12]) + (", ..." if len(available) > 12 else "")
        why += f"; the program launched: {shown}"
    return f"nothing was profiled: {why}"


def in_background(fn: Callable[..., T], *args: object) -> Future[T]:
    """Start ``fn(*args)`` in a thread; ``.result()`` returns its value or raises its error."""
    pool = ThreadPoolExecutor(max_workers=1)
    future = pool.submit(fn, *args)
    pool.shutdown(wait=False)  # the call already submitted still runs
    return future


@dataclass
class _Pass:
    """One run of the program under ncu: its report and what ncu said."""

    rep: Path
    cmd: list[str]
    returncode: int
    output: object  # session._NcuOutput
    interrupted: bool
    seconds: float


def _stale(rep: Path) -> list[Path]:
    stem = report_stem(rep)
    return [rep, rep.with_name(stem + ".ncu.log"), rep.with_name(stem + ".raw.csv"),
            rep.with_name(stem + ".details.csv")]


def _run_pass(ncu_path: Path, program_arg: str, args: list[str], rep: Path, *,
              section_set: str | None, kernel_name: str | None, launch_count: int | None,
              nvtx: bool, extra: list[str], progress: bool) -> _Pass:
    """Run the program under ncu once; raise the one-line error when no report came of it.

    The caller has removed an earlier run's files (:func:`_stale`).
    """
    log_path = rep.with_name(report_stem(rep) + ".ncu.log")
    cmd = build_ncu_command(
        ncu_path, program_arg, args, rep_path=rep, section_set=section_set,
        kernel_name=kernel_name, launch_count=launch_count, nvtx=nvtx, extra=extra,
        log_file=log_path,
    )
    started = time.monotonic()
    returncode, output, interrupted = run_ncu(cmd, log_path, LiveDisplay(progress, launch_count))
    seconds = time.monotonic() - started
    if output.permission_denied:
        raise ProfilingError(_PERM_MESSAGE)
    if not rep.is_file() and output.report and Path(output.report).is_file():
        rep = Path(output.report)  # ncu chose another name than the one asked for
    if not rep.is_file():
        app_exit = output.app_exit_code
        if interrupted:
            raise ProfilingInterrupted(
                f"interrupted (Ctrl-C) after {len(output.passes)} kernel(s); ncu saved no report")
        if output.errors:  # e.g. "Unknown Error on device 0": more telling than "nothing"
            raise ProfilingError(f"ncu failed (exit status {returncode}): {output.errors[0]}")
        if output.nothing_profiled or not output.kernels:
            raise ProfilingError(_nothing_profiled(kernel_name, extra, app_exit, output.available))
        raise ProfilingError(
            f"ncu wrote no report at {rep} (exit status {returncode}"
            f"{'; ' + output.log[-1] if output.log else ''})"
        )
    return _Pass(rep, cmd, returncode, output, interrupted, seconds)


def census_applies(kernel_name: str | None, launch_count: int | None,
                   extra: Sequence[str]) -> bool:
    """Whether the default census-then-depth profiling applies: the user chose no launches."""
    return kernel_name is None and launch_count is None and not has_option(
        extra, *census.SELECTING_OPTIONS)


def _take_census(ncu_path: Path, program_arg: str, args: list[str], out: Path, stem: str,
                 nvtx: bool, extra: list[str], progress: bool,
                 coverage: float) -> tuple[census.DepthPlan, float, _Pass]:
    """The census step: every launch's duration alone; returns the plan for the depth step."""
    rep = out / f"{stem}.census.ncu-rep"
    done = _run_pass(ncu_path, program_arg, args, rep, section_set=None, kernel_name=None,
                     launch_count=None, nvtx=nvtx,
                     extra=[*_without_set(extra), "--metrics", census.CENSUS_METRICS],
                     progress=progress)
    started = time.monotonic()
    raw = rep.with_name(report_stem(rep) + ".raw.csv")
    export_page(ncu_path, done.rep, raw, page="raw")
    plan = census.plan_depth(census.read_census(raw), coverage=coverage)
    return plan, time.monotonic() - started, done


def _without_set(extra: Sequence[str]) -> list[str]:
    """The user's ncu options less the section choice (the census collects one metric)."""
    out, skip = [], False
    for arg in extra:
        if skip:
            skip = False
            continue
        if arg in ("--set", "--section", "--metrics"):
            skip = True
            continue
        if arg.split("=", 1)[0] in ("--set", "--section", "--metrics"):
            continue
        out.append(arg)
    return out


def run_profile(
    program: str | os.PathLike[str],
    args: Sequence[str | os.PathLike[str]] = (),
    *,
    out_dir: str | os.PathLike[str] = ".",
    name: str | None = None,
    section_set: str | None = collect.ADVISOR_SET,
    kernel_name: str | None = None,
    launch_count: int | None = None,
    nvtx: bool = False,
    extra: Sequence[str] = (),
    progress: bool = True,
    ncu: str | os.PathLike[str] | None = None,
    export_csv: bool = True,
    all_launches: bool = False,
    coverage: float = census.DEFAULT_COVERAGE,
    on_plan: Callable[[str], None] | None = None,
) -> ProfileResult:
    """Profile a program under ncu.

    By default in two steps (:mod:`ncu_advisor.profiling.census`): a census of every launch
    (the duration alone), then the section set on one launch of each kernel shape among those
    holding ``coverage`` of the GPU time, weighted afterwards by the census. With
    ``all_launches``, ``kernel_name``, ``launch_count`` or a selecting ncu option in ``extra``
    (``-s``, ``--nvtx-include``, ...), one run profiles every launch the filters admit.

    Writes ``<out_dir>/<name>.ncu-rep`` and ``<name>.ncu.log`` (ncu's own messages), and, when
    exported, ``<name>.raw.csv`` and ``<name>.details.csv`` (``name`` defaults to the
    program's name, or the script's for ``python3 script.py``); the census adds
    ``<name>.census.*``.

    Args:
        program: The program to run, a path or a command on PATH (e.g. ``python3``).
        args: Its arguments.
        out_dir: The folder for the report and the CSV files (created if missing).
        name: The base name of the files.
        section_set: ``"advise"`` (default: what ncu-advise reads), or an ncu set (``"full"``).
        kernel_name: Profile only kernels with this name (``-k``).
        launch_count: Profile at most this many launches (``-c``).
        nvtx: Record NVTX ranges (``--nvtx``).
        extra: More ncu options, passed through (``--clock-control`` here replaces the default).
        progress: Show a live line on stderr (only when stderr is a terminal).
        ncu: The ncu executable; found with :func:`find_ncu` when None.
        export_csv: Export the raw and details pages as CSV (the default: faster to read
            than the ``.ncu-rep``); False leaves the ``.ncu-rep`` to be read directly, which
            needs :func:`can_read_ncu_rep` (the CSV export then happens only if that fails).
        all_launches: Profile every launch with the section set (no census).
        coverage: The share of the census's GPU time the deep-profiled shapes must hold.
        on_plan: Called with the plan's one-line summary before the depth step.

    Returns:
        The files written and what the run reported. After Ctrl-C, what was profiled before
        it, with ``interrupted`` set.

    Raises:
        NcuNotFoundError: ncu cannot be found or run.
        ProfilingError: The program cannot be run, the counters are restricted, nothing was
            profiled, or ncu wrote no report.

    """
    ncu_path = Path(ncu) if ncu is not None else find_ncu()
    # `ncu --version` starts ncu once more (a noticeable share of a short run): it runs beside
    # the profiling run, and its answer is needed only afterwards.
    version_query = in_background(ncu_version, ncu_path)
    warnings: list[str] = []
    program_arg = resolve_program(str(program))
    args = [str(a) for a in args]
    extra = [str(e) for e in extra]
    if not 0 < coverage <= 1:
        raise ProfilingError(f"the coverage must be above 0% and at most 100%, not "
                             f"{100 * coverage:g}%")

    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ProfilingError(f"cannot create {out}: {exc.strerror or exc}") from None
    stem = name or default_name(str(program), args)
    rep = out / f"{stem}.ncu-rep"
    # ncu writes no report when nothing is profiled: an earlier run's files (of any step)
    # must not pass for this run's.
    for stale in (*_stale(rep), *_stale(out / f"{stem}.census.ncu-rep")):
        stale.unlink(missing_ok=True)
    if not has_option(extra, "--set"):
        warnings += collection_args(ncu_path, section_set)[1]

    timings: dict[str, float] = {}
    plan = None
    filters: list[str] = []
    if not all_launches and census_applies(kernel_name, launch_count, extra):
        plan, export_s, taken = _take_census(ncu_path, program_arg, args, out, stem, nvtx,
                                             extra, progress, coverage)
        timings["census"] = taken.seconds
        timings["census_export"] = export_s
        if taken.interrupted:
            raise ProfilingInterrupted(
                f"interrupted (Ctrl-C) during the census, after {len(taken.output.kernels)} "
                "launch(es); nothing was deep-profiled")
        filters = plan.filters
        if on_plan is not None:
            on_plan(plan.summary())

    first = _run_pass(ncu_path, program_arg, args, rep, section_set=section_set,
                      kernel_name=kernel_name, launch_count=launch_count, nvtx=nvtx,
                      extra=[*extra, *filters], progress=progress)
    rep = first.rep
    timings["ncu"] = first.seconds
    # Raises ncu --version's own error: ncu cannot run at all, said rather than "no report".
    version = version_query.result()
    warnings[:0] = version_warnings(version)

    output = first.output
    interrupted = first.interrupted
    app_exit = output.app_exit_code
    if app_exit is None and first.returncode == 0:
        app_exit = 0
    raw_csv = details_csv = None
    kernels = len(output.passes) or len(output.kernels)
    if export_csv or not can_read_ncu_rep():
        started = time.monotonic()
        raw_csv, details_csv = export_csvs(ncu_path, rep)
        timings["export"] = time.monotonic() - started
        kernels = count_launches(raw_csv)
        if kernels == 0 and not interrupted:
            raise ProfilingError(_nothing_profiled(kernel_name, extra, app_exit,
                                                  output.available))
    warnings += output.warnings
    warnings += [f"ncu: {e}" for e in output.errors]
    plural = "s" if kernels != 1 else ""
    if interrupted:
        warnings.append(f"interrupted (Ctrl-C): the report covers the {kernels} kernel{plural} "
                        "profiled before that")
    elif app_exit:
        warnings.append(
            f"the program exited with status {app_exit}; the report covers the {kernels} "
            f"kernel{plural} profiled before that"
        )
    elif first.returncode != 0:
        warnings.append(f"ncu exited with status {first.returncode}; the report may be "
                        "incomplete")

    return ProfileResult(
        rep_path=rep,
        raw_csv=raw_csv,
        details_csv=details_csv,
        command=first.cmd,
        ncu_version=version,
        program_exit_code=app_exit,
        warnings=warnings,
        kernels_profiled=kernels,
        log=list(output.log),
        ncu=ncu_path,
        section_set=option_value(extra, "--set") or section_set,
        clock_control=option_value(extra, "--clock-control") or "none",
        cache_control=option_value(extra, "--cache-control") or "all",
        passes=list(output.passes),
        interrupted=interrupted,
        timings=timings,
        log_path=rep.with_name(report_stem(rep) + ".ncu.log"),
        plan=plan,
    )


def read_profiled(result, lean: bool = False):
    """Read what a profiling run produced, weighted by its census when it had one.

    See :func:`_read_pages` for the reading and :func:`ncu_advisor.profiling.census.weigh`
    for the weights.
    """
    report = _read_pages(result, lean)
    return report if result.plan is None else census.weigh(report, result.plan)


def _read_pages(result, lean: bool = False):
    """Read what a profiling run produced: its CSV pages, else the .ncu-rep itself.

    A .ncu-rep the installed ``ncu_report`` module cannot read (a newer format, or a module
    that crashes on it: the reader runs in a child process) is exported as CSV instead.
    """
    from ..analysis.metric_use import lean_reading
    from ..readers import read_report

    reading = lean_reading() if lean else {}
    if result.raw_csv is None and result.ncu is not None:  # the .ncu-rep, else its export
        try:
            return read_report(result.report_files, **reading)
        except NcuAdviseError as exc:
            why = str(exc)
        started = time.monotonic()
        result.raw_csv, result.details_csv = export_csvs(result.ncu, result.rep_path)
        result.timings["export"] = time.monotonic() - started
        result.warnings.append(f"read the CSV export: the .ncu-rep reader failed ({why})")
    try:
        return read_report(result.report_files, **reading)
    except NcuAdviseError as exc:
        if result.raw_csv is None:
            raise
        return _read_the_pages_that_read(result, exc, reading)


def _read_the_pages_that_read(result, failure: NcuAdviseError, reading: dict):
    """A profiling run is never lost to one export page: read the pages that read, and warn.

    (A details page can be empty while the raw page holds every metric: a run that found
    only ncu-advise's own section has no body items to print.)
    """
    from ..readers import read_report

    for page in result.report_files:
        others = [p for p in result.report_files if p != page]
        if not others:
            break
        try:
            report = read_report(others, **reading)
        except NcuAdviseError:
            continue
        result.warnings.append(f"{page.name} could not be read and was left out ({failure})")
        return report
    raise failure


def attach_run_facts(report, result) -> None:
    """Put what the profiling run said into its report.

    The run's warnings go first, and ncu's own messages into the session for the validity
    checks (they say, e.g., whether clocks were locked).
    """
    report.warnings[:0] = list(result.warnings)
    report.session["ncu_messages"] = list(result.log)
