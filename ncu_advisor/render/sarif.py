"""SARIF 2.1.0 (``-f sarif``): findings with source lines as code-scanning annotations.

One result per finding and source line it names (the line's share of the cause in its
message), the rule id as ``ruleId``, severity as ``level`` (high: error, medium: warning, low
and info: note). A finding without source lines (a library kernel, a capture without
``-lineinfo``) has nowhere to point in the code: it is listed as a notification of the run,
not as a result (code scanning needs a location for each result).
"""

from __future__ import annotations

from pathlib import PurePosixPath, PureWindowsPath

from .. import json_text
from .._version import __version__
from .formats import fmt_time

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
LEVELS = {"high": "error", "medium": "warning", "low": "note", "info": "note"}


def _uri(path: str) -> str:
    """A source file as a SARIF artifact URI (absolute paths as file: URIs)."""
    if PureWindowsPath(path).drive:
        return PureWindowsPath(path).as_uri()
    posix = PurePosixPath(path.replace("\\", "/"))
    return posix.as_uri() if posix.is_absolute() else str(posix)


def _message(f: dict) -> str:
    saving = f.get("estimated_saving_ns")
    gain = (f" Estimated saving ~{fmt_time(saving)} ({f['app_saving_pct']:.1f}% of the run)."
            if saving else "")
    return f"{f['title']} in {f['kernel']}.{gain} Fix: {' '.join(f['advice'].split())}"


def to_sarif(result: dict) -> dict:
    """The SARIF log (a dict) of one analysis: the JSON contract's dictionary."""
    rules: dict[str, dict] = {}
    results: list[dict] = []
    notes: list[dict] = []
    for f in result["findings"]:
        if f["rule"] not in rules:
            rules[f["rule"]] = {
                "id": f["rule"], "name": f["rule"],
                "shortDescription": {"text": f.get("category") or f["rule"]},
                "help": {"text": " ".join(f["advice"].split())},
                "properties": {"category": f.get("category"), "demo": f.get("demo")}}
        sources = f.get("source_lines") or []
        if not sources:
            notes.append({"level": LEVELS[f["severity"]], "message": {"text": _message(f)},
                          "descriptor": {"id": f["rule"]}})
            continue
        for src in sources:
            region = {"startLine": max(1, int(src["line"]))}
            if src.get("sass"):
                region["snippet"] = {"text": src["sass"]}
            results.append({
                "ruleId": f["rule"], "ruleIndex": list(rules).index(f["rule"]),
                "level": LEVELS[f["severity"]],
                "message": {"text": f"{_message(f)} ({src['share_pct']:.0f}% of the cause "
                                    "on this line)"},
                "locations": [{"physicalLocation": {
                    "artifactLocation": {"uri": _uri(src["file"])}, "region": region}}],
                "properties": {"severity": f["severity"], "confidence": f.get("confidence"),
                               "kernel": f["kernel"], "launches": f.get("kernel_ids") or [],
                               "estimated_saving_ns": f.get("estimated_saving_ns")}})
    run = {
        "tool": {"driver": {"name": "ncu-advise", "version": __version__,
                            "rules": list(rules.values())}},
        "results": results,
        "invocations": [{"executionSuccessful": True,
                         "toolExecutionNotifications": notes}],
        "properties": {"sources": list(result.get("sources") or []),
                       "gpu": (result.get("session") or {}).get("gpu")},
    }
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}


def render_sarif(result: dict) -> str:
    """The SARIF log as strict, indented JSON text."""
    return json_text.dumps_text(to_sarif(result))
