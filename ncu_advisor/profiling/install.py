"""Finding ``ncu`` and telling what it is: where it is installed, its version, what reads it.

:func:`find_ncu` looks at ``$NCU``, ``PATH``, then the usual install folders; :func:`ncu_version`
asks ``ncu --version`` and :func:`version_warnings` says when it is older than the captures the
rules were written against; :func:`can_read_ncu_rep` says whether a ``.ncu-rep`` can be read
here without exporting it. Part of the wrapper (:mod:`ncu_advisor.profiling.run`).
"""

from __future__ import annotations

import glob
import importlib.util
import os
import re
import shutil
import subprocess
from pathlib import Path

from ..errors import NcuNotFoundError

__all__ = [
    "INSTALL_GLOBS",
    "MIN_NCU_VERSION",
    "can_read_ncu_rep",
    "find_ncu",
    "ncu_version",
    "version_warnings",
]

# Older versions name metrics and CSV columns differently from the captures the rules are
# written against (NCU_NOTES.md was made with 2025.3.1).
MIN_NCU_VERSION = (2023, 1)

# The usual install folders, in the order they are tried; within one pattern the highest
# version in the path wins.
INSTALL_GLOBS: tuple[str, ...] = (
    "/usr/local/cuda*/bin/ncu",
    "/opt/nvidia/nsight-compute/*/ncu",
    "/usr/local/NVIDIA-Nsight-Compute*/ncu",
    "/opt/cuda/bin/ncu",
)
_WINDOWS_GLOB = r"NVIDIA Corporation\Nsight Compute */ncu.bat"

NCU_FIX_HINT = "install Nsight Compute (part of the CUDA toolkit) or set NCU=/path/to/ncu"

_VERSION = re.compile(r"Version\s+(\d+(?:\.\d+)+)")
_PATH_VERSION = re.compile(r"\d+(?:\.\d+)*")


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _version_key(path: str) -> tuple[int, ...]:
    # The last version-looking part of the path: cuda-12.4 -> (12, 4), 2025.3.1 -> (2025, 3, 1).
    found = _PATH_VERSION.findall(str(Path(path).parent))
    return tuple(int(x) for x in found[-1].split(".")) if found else ()


def _install_patterns() -> list[str]:
    if os.name == "nt":
        program_files = os.environ.get("ProgramFiles", r"C:\Program Files")
        return [os.path.join(program_files, _WINDOWS_GLOB)]
    return list(INSTALL_GLOBS)


def find_ncu() -> Path:
    """Find the ``ncu`` executable.

    Looks at the ``NCU`` environment variable first, then ``PATH``, then the usual install
    folders (newest version first).

    Returns:
        The path of the ncu executable.

    Raises:
        NcuNotFoundError: ``NCU`` names no executable, or ncu is nowhere to be found.

    """
    env = os.environ.get("NCU", "").strip()
    if env:
        path = Path(env).expanduser()
        if path.is_dir():  # NCU=/opt/nvidia/nsight-compute/2025.3.1 is an easy mistake
            path = path / ("ncu.bat" if os.name == "nt" else "ncu")
        if _is_executable(path):
            return path
        on_path = shutil.which(env)
        if on_path:
            return Path(on_path)
        raise NcuNotFoundError(
            f"NCU={env} is not an executable file: set NCU=/path/to/ncu, or unset it to search"
            " PATH and the usual install folders"
        )
    on_path = shutil.which("ncu")
    if on_path:
        return Path(on_path)
    patterns = _install_patterns()
    for pattern in patterns:
        for candidate in sorted(glob.glob(pattern), key=_version_key, reverse=True):
            if _is_executable(Path(candidate)):
                return Path(candidate)
    raise NcuNotFoundError(
        f"ncu not found (looked at $NCU, PATH, {', '.join(patterns)}): {NCU_FIX_HINT}"
    )


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version.split(".") if x.isdigit())


def ncu_version(ncu: str | os.PathLike[str]) -> str:
    """Return ncu's version by running ``ncu --version``.

    Args:
        ncu: The ncu executable.

    Returns:
        The version, e.g. ``"2025.3.1.0"``, or ``"unknown"`` if ncu ran but printed none.

    Raises:
        NcuNotFoundError: ncu cannot be run or ``--version`` fails.

    """
    try:
        proc = subprocess.run(
            [str(ncu), "--version"], capture_output=True, text=True, errors="replace",
            timeout=120, check=False,
        )
    except OSError as exc:
        raise NcuNotFoundError(f"cannot run {ncu}: {exc.strerror or exc}; {NCU_FIX_HINT}") from None
    except subprocess.TimeoutExpired:
        raise NcuNotFoundError(f"{ncu} --version did not answer within 120 s") from None
    output = proc.stdout + proc.stderr
    if proc.returncode != 0:
        last = output.strip().splitlines()[-1:] or [f"exit status {proc.returncode}"]
        raise NcuNotFoundError(f"{ncu} --version failed ({last[0]}); {NCU_FIX_HINT}")
    match = _VERSION.search(output)
    return match.group(1) if match else "unknown"


def version_warnings(version: str) -> list[str]:
    """Return one-line warnings about an ncu version (empty when it is recent enough)."""
    if version == "unknown":
        return ["ncu did not print its version; ncu-advise expects Nsight Compute 2023.1 or newer"]
    if _version_tuple(version)[:2] < MIN_NCU_VERSION:
        return [
            f"ncu {version} is older than 2023.1: metric names and CSV columns may differ and "
            "some advice may be missing; update Nsight Compute"
        ]
    return []


def can_read_ncu_rep() -> bool:
    """Whether a ``.ncu-rep`` can be read here directly, so no CSV export is needed.

    True with NVIDIA's ``ncu-report`` wheel or the ``ncu_report`` module an Nsight Compute
    install ships (``extras/python``). The reader runs in a child process, so a module that
    crashes on a report costs the CSV export it would have saved, never the profiling run
    (``profiling.run.read_profiled`` falls back to it).
    """
    if importlib.util.find_spec("ncu_report") is not None:
        return True
    from ..readers.ncu_rep_child import ncu_report_folders  # loads the readers: after ncu ran

    return bool(ncu_report_folders())
