"""Test cases of a rule, kept beside it: ``RULE.cases.toml`` next to ``RULE.toml``.

One runner (:func:`run_cases`, ``ncu-advise rules --test DIR``) runs two kinds of case, each
a ``[[case]]`` table, for the built-in rules (``rules/``) and for a user's alike.

A *values case* gives quantity values for one launch (anything not given is unknown) and the
outcome the rule must give on it::

    [[case]]
    name = "memory-bound, L2 misses"
    expect = "fires"            # fires | silent | not-evaluated
    severity = "medium"         # optional, with fires
    confidence = "high"         # optional, with fires
    title = "L2 hit rate"       # optional, with fires: text the finding's title contains
    estimate = 42.5             # optional, with fires: its estimated_speedup_pct (within
                                # 0.5 points), or a range: estimate = { min = 30, max = 50 }
    values = { mem_pct = 85, sm_pct = 20, l2_hit_pct = 12 }

Derived quantities (``memory_bound``, ``arith_intensity_dram`` ...) are computed from the
values given, as on a real report.

A *capture case* names a real capture the project ships (a demo, whose captures are
``sample_reports/demos/<name>.{raw,details}.csv``, or one of :data:`CAPTURES`) and what the
rule must say on it, analyzed with the folder's rules::

    [[case]]
    capture = "coalescing"
    variant = "bad"             # bad | good: that demo variant's kernels; all: every launch
    expect = "fires"            # fires | silent
    severity = "high"           # optional, with fires: every finding of the rule has it
                                # (confidence, title and estimate as above, likewise)

Each finding of a capture case must also show its evidence with units and name a concrete
fix. Where the capture's files are not there (an installed wheel has no ``sample_reports/``),
the case is skipped, not failed.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..derive.quantities import add_derived, quantity_names
from ..errors import NcuAdviseError
from ..rules_engine.engine import evaluate
from ..rules_engine.findings import CONFIDENCE_STEPS, Finding
from ..rules_engine.loader import CASES_SUFFIX, check_rules
from ..rules_engine.schema import SEVERITIES, Rule, did_you_mean

OUTCOMES = ("fires", "silent", "not-evaluated")
# The keys a case may have; any other is a typo (``severty``), not silently ignored.
ASSERTED = ("severity", "confidence", "title", "estimate")
VALUES_KEYS = ("name", "expect", "values", *ASSERTED)
CAPTURE_KEYS = ("name", "expect", "capture", "variant", *ASSERTED)
ESTIMATE_TOLERANCE = 0.5  # percentage points
CAPTURE_OUTCOMES = ("fires", "silent")
VARIANTS = ("bad", "good", "all")

#: The captures a case may name besides the demos: their files, under the project root.
CAPTURES: dict[str, tuple[str, ...]] = {
    "forms_app": ("sample_reports/forms/forms_app.ncu-rep.gz",),
    "torch_mlp": ("docs/examples/torch_mlp/torch_mlp.raw.csv",
                  "docs/examples/torch_mlp/torch_mlp.details.csv"),
    "occ_sweep": ("sample_reports/occupancy/occ_sweep2.ncu-rep.gz",),
    # A dev capture of the evaluation corpus (never a sealed one): a transpose ladder, five
    # versions of one operation run back to back over the same arrays.
    "corpus_cuda_transpose": ("sample_reports/corpus/cuda_transpose.raw.csv.xz",),
    # A reduction ladder (dev): its first version tests `tid % (2 * s)` in the tree.
    "corpus_cuda_reduction": ("sample_reports/corpus/cuda_reduction.raw.csv.xz",),
    # An n-body step in double (dev), from the details page alone: the FP64 share comes from
    # ncu's FP roofline message (shares of the two peaks and their ratio).
    "corpus_cuda_nbody_details": ("sample_reports/corpus/cuda_nbody.details.csv.xz",),
    # A bilateral filter's double range weight (dev, batch 13), from either page: issue-bound
    # on FP64 sequences.
    "corpus_cuda_bilateral_video_raw": ("sample_reports/corpus/cuda_bilateral_video.raw.csv.xz",),
    "corpus_cuda_bilateral_video_details": (
        "sample_reports/corpus/cuda_bilateral_video.details.csv.xz",),
    # A RoPE/KV-cache Triton kernel (dev, batch 13): one four-warp program per (token, head).
    "corpus_triton_rope_kv_cache_raw": ("sample_reports/corpus/triton_rope_kv_cache.raw.csv.xz",),
    "corpus_triton_rope_kv_cache_details": (
        "sample_reports/corpus/triton_rope_kv_cache.details.csv.xz",),
    # An SGEMM ladder (dev): naive, shared-memory tiled, register-tiled, cuBLAS.
    "corpus_cuda_gemm": ("sample_reports/corpus/cuda_gemm.raw.csv.xz",),
    # A direct 3x3 convolution, one output per thread, beside cuDNN's (dev, batch 7).
    "corpus_cuda_conv2d_direct": ("sample_reports/corpus/cuda_conv2d_direct.raw.csv.xz",),
    # Triton kernels (dev): a 4096^3 fp16 GEMM with 32x32x32 tiles beside one with 128x128x64.
    "corpus_triton_ops": ("sample_reports/corpus/triton_ops.raw.csv.xz",),
    # Another dev capture: batch-1 decode, eager PyTorch, 67 launches of a few microseconds.
    "corpus_torch_decode_b1": ("sample_reports/corpus/torch_decode_b1.raw.csv.xz",),
    # The same model decoding a batch of 64: attention over the KV cache through cuBLAS GEMVs.
    "corpus_torch_decode_b64": ("sample_reports/corpus/torch_decode_b64.raw.csv.xz",),
    # A CNN training step in NCHW, and the same step after moving to channels_last.
    "corpus_torch_cnn_train": ("sample_reports/corpus/torch_cnn_train.raw.csv.xz",),
    "corpus_torch_cnn_train_channels_last": (
        "sample_reports/corpus/torch_cnn_train.channels_last.raw.csv.xz",),
    # Ten steps of a PyTorch training loop, every launch (AdamW on its foreach path).
    "census_torch_train_loop": ("sample_reports/census/torch_train_loop.all.raw.csv.gz",),
    # A decoder's training step with hand-written attention, and the same step with SDPA.
    "corpus_torch_decoder_train": ("sample_reports/corpus/torch_decoder_train.raw.csv.xz",),
    "corpus_torch_decoder_train_sdpa": (
        "sample_reports/corpus/torch_decoder_train.sdpa.raw.csv.xz",),
    # Batch-4 decoding over a 12K-token KV cache grown with torch.cat every step (dev).
    "corpus_torch_kv_decode": ("sample_reports/corpus/torch_kv_decode.raw.csv.xz",),
    # torch.compile'd prefill: cuBLAS fc1 GEMMs, each followed by inductor's GELU kernel (dev).
    "corpus_torch_prefill_compiled": ("sample_reports/corpus/torch_prefill_compiled.raw.csv.xz",),
    # A diffusion block's training step: its backward stacks the q, k, v gradients (dev).
    "corpus_torch_diffusion_block": ("sample_reports/corpus/torch_diffusion_block.raw.csv.xz",),
    # Mixture-of-experts inference (dev): a softmax router, then top-2 experts per token.
    "corpus_torch_moe_infer": ("sample_reports/corpus/torch_moe_infer.raw.csv.xz",),
    # Four W8A16 linear layers (dev, batch 8): a user Triton GEMM, cuBLAS, bias add, SiLU.
    "corpus_triton_int8_matmul": ("sample_reports/corpus/triton_int8_matmul.raw.csv.xz",),
    # A hand-written LSTM training step (dev): per-step GEMMs and gate math.
    "corpus_torch_lstm_train": ("sample_reports/corpus/torch_lstm_train.raw.csv.xz",),
    # Detection post-processing (dev, batch 7): sigmoid over every class score, then top-k.
    "corpus_torch_detection_post": ("sample_reports/corpus/torch_detection_post.raw.csv.xz",),
    # Batched Thomas solves of 3-D ADI heat diffusion (dev, batch 9): one thread per line,
    # 65536 lines, a quarter of one wave; the y and z sweeps coalesced, the x sweep strided.
    "corpus_cuda_adi_heat3d": ("sample_reports/corpus/cuda_adi_heat3d.raw.csv.xz",),
    # A Smith-Waterman wavefront (dev, batch 10): one launch per tile anti-diagonal.
    "corpus_cuda_smith_waterman": ("sample_reports/corpus/cuda_smith_waterman.raw.csv.xz",),
    # A top-2 MoE layer (dev, batch 10): one user Triton GEMM launch per expert, under a wave.
    "corpus_triton_moe_grouped": ("sample_reports/corpus/triton_moe_grouped.raw.csv.xz",),
    # Level-synchronous BFS (dev, batch 6): one launch per level, frontiers of 1 to 10^5.
    "corpus_cuda_bfs": ("sample_reports/corpus/cuda_bfs.raw.csv.xz",),
    # JPEG DCT of 8 frames (dev, batch 11): one kernel per plane, luma then two chroma planes,
    # int16 coefficients written that stay in L2 (DRAM writes a tenth of the reads).
    "corpus_cuda_jpeg_dct": ("sample_reports/corpus/cuda_jpeg_dct.raw.csv.xz",),
    # Checkerboard Ising (dev, batch 11): a measurement kernel after each sweep, 4 sites a
    # thread, a block reduction and two atomics per block, latency-bound at 18% of DRAM.
    "corpus_cuda_ising_metropolis": ("sample_reports/corpus/cuda_ising_metropolis.raw.csv.xz",),
    # A bf16 SASRec training step (dev, batch 11): 52001 items, so the output-layer GEMMs run
    # on cuBLAS's align1 tensor-core kernels.
    "corpus_torch_seqrec_train": ("sample_reports/corpus/torch_seqrec_train.raw.csv.xz",),
    # HiFi-GAN inference (dev, batch 11): cuDNN's legacy transposed-conv kernel on 64 blocks,
    # 40.8 ms of a 46.7 ms step.
    "corpus_torch_hifigan_infer": ("sample_reports/corpus/torch_hifigan_infer.raw.csv.xz",),
    # A compiled DiT step in FP32 with TF32 (dev, batch 11): SDPA on FP32 q/k/v, four
    # memory-efficient attention launches, 29% of the GPU time.
    "corpus_torch_dit_compiled": ("sample_reports/corpus/torch_dit_compiled.raw.csv.xz",),
    # A 3-D U-Net encoder in eval mode (dev, batch 4): native BatchNorm3d after each conv.
    "corpus_torch_conv3d_seg": ("sample_reports/corpus/torch_conv3d_seg.raw.csv.xz",),
    # DGCNN inference (dev, batch 9): kNN by topk, edge convolutions, a cuDNN inference BN.
    "corpus_torch_pointcloud_dgcnn": ("sample_reports/corpus/torch_pointcloud_dgcnn.raw.csv.xz",),
    # CuPy's built-in kernels (foreign set): a sort and an arg-max after plain copies and maps.
    "foreign_cupy_builtins": ("sample_reports/foreign/cupy_builtins.raw.csv.gz",),
}

Reader = Callable[[list[Path]], Any]


@dataclass
class CaseResult:
    """One case run: where it is, what went wrong (None when it passed), or why it was skipped."""

    path: Path
    rule: str
    name: str
    problem: str | None = None
    skipped: str | None = None

    def __str__(self) -> str:
        if self.problem is not None:
            status = f"FAILED: {self.problem}"
        else:
            status = "ok" if self.skipped is None else f"skipped ({self.skipped})"
        return f"{self.path.name} [{self.name}]: {status}"


@dataclass
class Case:
    """One ``[[case]]`` table of a cases file; ``rule`` is the id its file name gives."""

    path: Path
    rule: str
    name: str
    data: dict

    @property
    def kind(self) -> str:
        """``capture`` (the case names a capture) or ``values``."""
        return "capture" if "capture" in self.data else "values"

    @property
    def id(self) -> str:
        """``RULE-CAPTURE-VARIANT-EXPECT`` for a capture case, ``RULE-NAME`` otherwise."""
        d = self.data
        if self.kind == "capture":
            return f"{self.rule}-{d['capture']}-{d.get('variant', 'all')}-{d.get('expect')}"
        return f"{self.rule}-{self.name}"


def project_root() -> Path:
    """The checkout this package runs from; in an installed wheel it holds no captures."""
    return Path(__file__).resolve().parents[2]


def capture_names() -> set[str]:
    """Every capture a case may name: the demos and :data:`CAPTURES`."""
    from ..demos import list_demos

    try:
        return set(CAPTURES) | {d.name for d in list_demos()}
    except NcuAdviseError:
        return set(CAPTURES)


def capture_paths(name: str, root: Path | None = None) -> list[Path]:
    """The files of a named capture under ``root`` (default: :func:`project_root`)."""
    root = root or project_root()
    if name in CAPTURES:
        return [root / p for p in CAPTURES[name]]
    demos = root / "sample_reports" / "demos"
    return [demos / f"{name}.raw.csv", demos / f"{name}.details.csv"]


def _read_report(paths: list[Path]):
    from ..readers import read_report

    return read_report(paths)


_FINDINGS: dict[tuple, list[Finding]] = {}


def capture_findings(name: str, variant: str, rules: Sequence[Rule], root: Path | None = None,
                     read: Reader | None = None) -> list[Finding]:
    """The findings of ``rules`` on a named capture: one demo variant's kernels, or all.

    ``read`` reads a list of paths into a Report (default ``read_report``); the findings are
    kept for the next case on the same capture. Raises ValueError when the variant's kernels
    are not all in the capture.
    """
    from ..demos import get_demo
    from ..report import subset
    from .pipeline import analyze

    root = root or project_root()
    read = read or _read_report
    key = (name, variant, str(root), tuple(r.id for r in rules), read)
    if key not in _FINDINGS:
        report = read(capture_paths(name, root))
        if variant != "all":
            kernels = getattr(get_demo(name), variant).kernels
            ids = report.launches.loc[report.launches["short_name"].isin(kernels), "launch"]
            if len(ids) != len(kernels):
                raise ValueError(f"{name}/{variant}: kernels missing from the capture")
            report = subset(report, ids.tolist())
        _FINDINGS[key] = analyze(report, rules=list(rules)).findings
    return _FINDINGS[key]


def outcome(rule: Rule, values: dict[str, float]) -> tuple[str, str | None]:
    """What ``rule`` says on one launch with these quantity values: outcome and severity."""
    got, finding = judge(rule, values)
    return got, finding.severity if finding is not None else None


def judge(rule: Rule, values: dict[str, float]) -> tuple[str, Finding | None]:
    """What ``rule`` says on one launch with these quantity values, and its finding."""
    frame = add_derived(pd.DataFrame([{n: float(v) for n, v in values.items()}], index=[0]))
    duration = float(values.get("duration_ns", np.nan))
    launches = pd.DataFrame({"launch": [0], "duration_ns": [duration], "invocations": [1],
                             "short_name": ["case"], "id": [0]})
    findings, skipped = evaluate([rule], frame, launches)
    if findings:
        return "fires", findings[0]
    return ("not-evaluated" if skipped else "silent"), None


def _check_keys(case: dict, allowed: tuple[str, ...]) -> list[str]:
    return [f"unknown key {key!r}{did_you_mean(key, allowed)} (a case has: "
            f"{', '.join(allowed)})" for key in case if key not in allowed]


def _check_estimate(case: dict) -> list[str]:
    if "estimate" not in case:
        return []
    e = case["estimate"]
    number = (int, float)
    if isinstance(e, number) and not isinstance(e, bool):
        return []
    if isinstance(e, dict) and e and set(e) <= {"min", "max"} \
            and all(isinstance(v, number) and not isinstance(v, bool) for v in e.values()):
        return []
    return [f"estimate = {e!r}: a number (percent) or {{ min = X, max = Y }}"]


def _asserted_problem(case: dict, finding: Finding) -> str | None:
    """What the finding gets wrong of the case's severity, confidence, title and estimate."""
    for key in ("severity", "confidence"):
        value = getattr(finding, key, None)
        if key in case and value != case[key]:
            return f"expected {key} {case[key]}, got {value}"
    if "title" in case and str(case["title"]) not in finding.title:
        return f"expected a title containing {case['title']!r}, got {finding.title!r}"
    if "estimate" in case:
        got = finding.estimated_speedup_pct
        e = case["estimate"]
        low, high = ((e - ESTIMATE_TOLERANCE, e + ESTIMATE_TOLERANCE) if not isinstance(e, dict)
                     else (e.get("min", float("-inf")), e.get("max", float("inf"))))
        if got is None or not low <= got <= high:
            shown = "no estimate" if got is None else f"{got:.1f}%"
            want = f"{e}%" if not isinstance(e, dict) else f"{low:g}..{high:g}%"
            return f"expected estimate {want}, got {shown}"
    return None


def _check_levels(case: dict) -> list[str]:
    problems = _check_estimate(case)
    if "severity" in case and case["severity"] not in SEVERITIES:
        problems.append(f"severity = {case['severity']!r}: use one of {', '.join(SEVERITIES)}")
    if "confidence" in case and case["confidence"] not in CONFIDENCE_STEPS:
        problems.append(f"confidence = {case['confidence']!r}: use one of "
                        f"{', '.join(CONFIDENCE_STEPS)}")
    return problems


def _check_case(case: dict) -> list[str]:
    problems = []
    known = set(quantity_names())
    for name in case.get("values", {}):
        if name not in known:
            problems.append(f"unknown quantity {name!r}{did_you_mean(name, known)}")
    if case.get("expect") not in OUTCOMES:
        problems.append(f"expect = {case.get('expect')!r}: use one of {', '.join(OUTCOMES)}")
    return _check_keys(case, VALUES_KEYS) + problems + _check_levels(case)


def _check_capture_case(case: dict) -> list[str]:
    problems = []
    known = capture_names()
    capture, variant = case["capture"], case.get("variant", "all")
    if "values" in case:
        problems.append("a case gives values or names a capture, not both")
    if capture not in known:
        problems.append(f"unknown capture {capture!r}{did_you_mean(str(capture), known)} "
                        f"(known: {', '.join(sorted(known))})")
    if variant not in VARIANTS:
        problems.append(f"variant = {variant!r}: use one of {', '.join(VARIANTS)}")
    elif variant != "all" and capture in CAPTURES:
        problems.append(f"variant = {variant!r}: only a demo has bad and good kernels; use all")
    if case.get("expect") not in CAPTURE_OUTCOMES:
        problems.append(f"expect = {case.get('expect')!r}: use one of "
                        f"{', '.join(CAPTURE_OUTCOMES)}")
    return _check_keys(case, CAPTURE_KEYS) + problems + _check_levels(case)


def _capture_problem(case: dict, fired: list[Finding]) -> str | None:
    """What is wrong with the rule's findings on a capture case (None: nothing)."""
    if case["expect"] == "silent":
        if fired:
            return f"expected silent, got {'; '.join(f.title for f in fired)}"
        return None
    if not fired:
        return "expected fires, got silent"
    for key in ("severity", "confidence"):
        got = {getattr(f, key) for f in fired}
        if key in case and got != {case[key]}:
            return f"expected {key} {case[key]}, got {', '.join(sorted(got))}"
    for f in fired:
        problem = _asserted_problem({k: v for k, v in case.items()
                                     if k in ("title", "estimate")}, f)
        if problem is not None:
            return problem
    for f in fired:
        # Every finding states its evidence with units and names a concrete fix.
        if not (f.evidence and all("unit" in e and "value" in e for e in f.evidence.values())):
            return f"{f.title!r}: evidence without units"
        if len(f.advice) <= 40 or "{" in f.title + f.advice:
            return f"{f.title!r}: advice too short or a placeholder left unfilled"
    return None


def read_case_file(path: Path) -> tuple[list[Case], str | None]:
    """The cases of one cases file, or what makes the file unusable."""
    rule_id = path.name.removesuffix(CASES_SUFFIX)
    try:
        tables = tomllib.loads(path.read_text(encoding="utf-8")).get("case", [])
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return [], f"cannot read ({exc})"
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        return [], "`case` must be [[case]] tables"
    if not tables:
        return [], "no [[case]] tables"
    cases = []
    for i, t in enumerate(tables, 1):
        default = (f"{t['capture']}/{t.get('variant', 'all')}" if "capture" in t
                   else f"case {i}")
        cases.append(Case(path, rule_id, str(t.get("name", default)), t))
    return cases, None


def case_files(folder: Path) -> list[Path]:
    """The cases files of a rule folder, sorted; of one rule file, the one beside it."""
    if folder.is_file():
        beside = folder.with_name(folder.name.removesuffix(".toml") + CASES_SUFFIX)
        return [beside] if beside.is_file() else []
    return sorted(folder.glob(f"*{CASES_SUFFIX}"))


def run_case(case: Case, rules: Sequence[Rule], root: Path | None = None,
             read: Reader | None = None) -> CaseResult:
    """Run one case against its rule, one of ``rules`` (a capture case analyzes with all).

    ``root`` is where a capture case's files are looked for (default :func:`project_root`);
    ``read`` reads them (see :func:`capture_findings`).
    """
    result = CaseResult(case.path, case.rule, case.name)
    rule = next((r for r in rules if r.id == case.rule), None)
    if rule is None:
        result.problem = f"no rule {case.rule!r}"
        return result
    c = case.data
    if case.kind == "capture":
        problems = _check_capture_case(c)
        if problems:
            result.problem = "; ".join(problems)
            return result
        missing = [p for p in capture_paths(c["capture"], root) if not p.is_file()]
        if missing:
            result.skipped = f"capture {c['capture']!r} not available: {missing[0]} missing"
            return result
        try:
            found = capture_findings(c["capture"], c.get("variant", "all"), rules, root, read)
        except (NcuAdviseError, ValueError) as exc:
            result.problem = str(exc)
            return result
        result.problem = _capture_problem(c, [f for f in found if f.rule == case.rule])
        return result
    problems = _check_case(c)
    if problems:
        result.problem = "; ".join(problems)
        return result
    got, finding = judge(rule, c.get("values", {}))
    if got != c["expect"]:
        result.problem = f"expected {c['expect']}, got {got}"
        return result
    if finding is not None:
        result.problem = _asserted_problem(c, finding)
    elif any(key in c for key in ASSERTED):
        result.problem = f"{', '.join(k for k in ASSERTED if k in c)} given, but the case " \
                         f"expects {got}"
    return result


def run_cases(folder: Path, root: Path | None = None,
              read: Reader | None = None) -> tuple[list[CaseResult], list[str]]:
    """Check a rule folder and run the cases beside its rules, both kinds.

    Returns the case results and the folder's rule problems (when there are problems, no
    case runs). A cases file without its rule is a problem too. ``root`` and ``read`` are
    for capture cases (see :func:`run_case`).
    """
    rules, problems = check_rules([folder])
    if problems:
        return [], problems
    ids = {r.id for r in rules}
    results: list[CaseResult] = []
    for path in case_files(folder):
        rule_id = path.name.removesuffix(CASES_SUFFIX)
        if rule_id not in ids:
            problems.append(f"{path}: no rule {rule_id!r} beside it ({rule_id}.toml)")
            continue
        cases, problem = read_case_file(path)
        if problem is not None:
            results.append(CaseResult(path, rule_id, "(file)", problem))
            continue
        results += [run_case(case, rules, root, read) for case in cases]
    return results, problems
