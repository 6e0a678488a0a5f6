"""The one error hierarchy of ncu-advise: the library raises these, the CLI prints them."""


class NcuAdviseError(Exception):
    """Base class: a problem the user can fix, reported as one line (CLI exit code 2)."""

    exit_code = 2


class ReportParseError(NcuAdviseError):
    """An input file is missing, empty, not an Nsight Compute export, or unreadable."""


class ReportNotFoundError(ReportParseError, FileNotFoundError):
    """An input path does not exist (also a ``FileNotFoundError``, as callers expect)."""

    def __str__(self) -> str:  # one line, not OSError's "[Errno ...]" form
        return str(self.args[0]) if self.args else ""


class OutputError(NcuAdviseError):
    """An output cannot be written (an input, a folder, read-only, full disk, permissions)."""


class NcuNotFoundError(NcuAdviseError):
    """The ``ncu`` executable could not be found or run."""


class ProfilingError(NcuAdviseError):
    """Running the program under ``ncu`` failed (permissions, nothing profiled, ...)."""


class ProfilingInterrupted(ProfilingError):
    """Ctrl-C stopped the profiling run before anything could be reported (exit 130)."""

    exit_code = 130


class RuleDefinitionError(NcuAdviseError):
    """A rule file does not match the rule schema."""


class DemoError(NcuAdviseError):
    """A demo kernel cannot run here (no CuPy, no GPU, unknown name, wrong result)."""


class StoreError(NcuAdviseError):
    """A report store is missing, not a store, of a newer schema, or a query on it failed."""
