"""Shared fixtures: each real capture is read and analyzed at most once per test run.

``read_cached(path)`` and ``analysis_cached(path)`` return the same objects for the same path
during a run. Treat them as read-only (use ``copy.deepcopy`` or ``subset`` before changing
one); tests that need a fresh Report call ``read_report`` themselves.
"""

from __future__ import annotations

import json
import os
import signal
from functools import cache
from pathlib import Path

import pytest

from ncu_advisor import analyze, read_report

ROOT = Path(__file__).resolve().parent.parent


# Every capture outside the corpus, gzipped or not (the corpus' exports are test_corpus's).
SAMPLE_CAPTURES = sorted(
    p for p in (ROOT / "sample_reports").rglob("*")
    if p.parent.name != "corpus"
    and (p.suffix in (".ncu-rep", ".csv") or p.name.endswith((".ncu-rep.gz", ".csv.gz"))))


def folder_and_form(path: Path) -> tuple[str, str]:
    """(folder, export form): ``sample_reports/demos``, ``.raw.csv`` (the last suffixes)."""
    suffixes = [s for s in path.suffixes if s not in (".gz", ".xz")][-2:]
    return path.parent.relative_to(ROOT).as_posix(), "".join(suffixes)


def first_of_each(paths) -> set[Path]:
    """The first of ``paths`` in each folder and export form."""
    first: dict[tuple[str, str], Path] = {}
    for path in paths:
        first.setdefault(folder_and_form(path), path)
    return set(first.values())


def first_of_each_form(paths, *, marks=(pytest.mark.slow,)) -> list:
    """``paths`` as test parameters: the first capture of each folder and export form runs in
    the quick run, the others carry ``marks`` (CI's slow phase runs them): a check repeated
    over 170 captures took a third of the quick run."""
    quick = first_of_each(paths)
    return [path if path in quick else pytest.param(path, marks=list(marks)) for path in paths]


@cache
def _read(key: str):
    return read_report(key.split(os.pathsep) if os.pathsep in key else key)


@cache
def _analysis(key: str):
    return analyze(_read(key))


def _key(path) -> str:
    if isinstance(path, list | tuple):
        return os.pathsep.join(str(p) for p in path)
    return str(path)


def read_cached(path):
    """The Report of a capture (a path or a list of paths), read once per test run."""
    return _read(_key(path))


def analysis_cached(path):
    """The Analysis of a capture, computed once per test run."""
    return _analysis(_key(path))


@pytest.fixture(scope="session")
def captures():
    """Access to the cached readers: ``captures.read(path)``, ``captures.analysis(path)``."""
    class Captures:
        read = staticmethod(read_cached)
        analysis = staticmethod(analysis_cached)

    return Captures()


# --- the test double for ncu (tests/fake_ncu/ncu), shared by the wrapper tests ---------------
FAKE_NCU = Path(__file__).parent / "fake_ncu" / "ncu"


def use_fake_ncu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Point ``$NCU`` at the fake ncu, logging its calls to ``tmp_path``; clear its knobs."""
    for var in ("FAKE_NCU_MODE", "FAKE_NCU_VERSION", "FAKE_NCU_DELAY", "FAKE_NCU_PASSES",
                "FORCE_COLOR", "NCU_ADVISE_SECTIONS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NCU", str(FAKE_NCU))
    monkeypatch.setenv("FAKE_NCU_LOG", str(tmp_path / "ncu_calls.jsonl"))
    return FAKE_NCU


def ncu_calls(tmp_path: Path) -> list[list[str]]:
    """The argument lists the fake ncu was called with, in order."""
    lines = (tmp_path / "ncu_calls.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def ncu_profile_call(tmp_path: Path) -> list[str]:
    """The fake ncu's profiling call (``ncu --version`` runs beside it, in either order)."""
    return next(c for c in ncu_calls(tmp_path) if "--version" not in c and "--import" not in c)


@pytest.fixture
def ctrl_c():
    """SIGINT raises KeyboardInterrupt during the test, as at a terminal.

    A runner started as a background job of a non-interactive shell inherits SIGINT ignored
    (POSIX), and a test's Ctrl-C then never arrives.
    """
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)
