"""Whose kernel it is, and ncu's rule messages as evidence, on real captures."""

from __future__ import annotations

from pathlib import Path

import pytest

from ncu_advisor import analyze, read_report
from ncu_advisor.cli import main
from ncu_advisor.derive.ncu_evidence import ncu_rule_category, ncu_rule_quantities
from ncu_advisor.derive.origin import origin_table

ROOT = Path(__file__).resolve().parent.parent
FOREIGN = ROOT / "sample_reports" / "foreign"
LINEINFO = ROOT / "sample_reports" / "demos_lineinfo"


@pytest.fixture(scope="module")
def torch_details():
    return read_report(FOREIGN / "torch_ops.details.csv.gz")


def test_origins_of_the_pytorch_step(torch_details):
    table = origin_table()
    got = [table.classify(n).id for n in torch_details.launches["name"]]
    assert got[0] == "cublas" and got[1] == "cublas"  # sm80_xmma_gemm, nvjet
    assert got[2:8] == ["pytorch"] * 6
    assert got[8:13] == ["cudnn"] * 5  # SDPA, layout conversions, convolutions
    assert set(got[15:23]) == {"cub"}
    assert table.role(torch_details.launches["name"][0]) == "matmul"
    assert table.classify("colsum_strided_kernel").id == "user"


def test_user_origins_file_is_tried_first(tmp_path):
    extra = tmp_path / "mine.toml"
    extra.write_text('[[origin]]\nid = "mylib"\nlabel = "MyLib"\npatterns = ["^colsum_"]\n')
    assert origin_table(str(extra)).classify("colsum_strided_kernel").label == "MyLib"
    bad = tmp_path / "bad.toml"
    bad.write_text('[[origin]]\nid = "x"\npatterns = ["("]\n')
    code = main(["analyze", str(FOREIGN / "triton_kernels.details.csv"), "--origins", str(bad)])
    assert code == 2


def test_rule_messages_state_the_numbers(torch_details):
    stated = ncu_rule_quantities(torch_details.ncu_rules, torch_details.launches["launch"],
                                 torch_details.metrics)
    # x.t().contiguous() and the strided view: 4 of 32 bytes per load sector, 78% excess.
    assert stated.loc[23, "global_ld_bytes_per_sector"] == 4.0
    assert stated.loc[24, "l2_excess_sectors_pct"] == 78.0
    # The FP32 GEMM's busiest pipe: ncu says 76.4% of the elapsed cycles; as a share of the
    # SM's active cycles (the quantity's definition) it is the raw page's 78.95%.
    assert stated.loc[0, "fma_pipe_pct"] == pytest.approx(78.95, abs=0.05)
    # Source Counters collected and no uncoalesced message: no excess at all.
    assert stated.loc[25, "l2_excess_sectors_pct"] == 0.0
    assert ncu_rule_category("MemoryCacheAccessPattern", "for local loads from L1TEX") == \
        "local-memory"


def test_a_details_page_states_the_fp64_work_as_the_raw_page_counts_it():
    """ncu's FP roofline message gives the FP64 share and the peak ratio; Hopper's "Shared"
    pipe dominated by FP64 is the FP64 pipe, not the tensor pipe."""
    corpus = ROOT / "sample_reports" / "corpus"
    raw = analyze(read_report(corpus / "cuda_compute_patterns.raw.csv.xz")).quantities
    details = analyze(read_report(corpus / "cuda_compute_patterns.details.csv.xz")).quantities
    f64 = 10  # cubic_root_f64: 93% of its FLOPs FP64, FP64 pipe 52%
    assert details.loc[f64, "fp32_over_fp64_peak"] == raw.loc[f64, "fp32_over_fp64_peak"] == 2.0
    assert details.loc[f64, "fp64_flop_share_pct"] == pytest.approx(
        raw.loc[f64, "fp64_flop_share_pct"], abs=1.5)
    assert details.loc[f64, "fp64_pipe_pct"] == pytest.approx(raw.loc[f64, "fp64_pipe_pct"],
                                                              abs=0.5)
    assert not details.loc[f64, "tensor_pipe_pct"] > 1.0  # NaN or idle, as on the raw page
    assert details.loc[f64, "fp64_saving_pct"] == pytest.approx(raw.loc[f64, "fp64_saving_pct"],
                                                                abs=1.0)


def test_library_findings_speak_to_the_caller(torch_details):
    a = analyze(read_report([FOREIGN / "torch_ops.details.csv.gz",
                             FOREIGN / "torch_ops.raw.csv.gz"]))
    by = {(f.launch, f.category): f for f in a.findings if f.launch is not None}
    gemm = by[(0, "precision")]
    assert gemm.severity == "high" and "allow_tf32" in gemm.advice and gemm.origin == "cublas"
    # A transposing copy's strided loads: the caller's change is the layout upstream.
    transpose = by[(23, "layout")]
    assert transpose.rule == "coalescing.global-loads" and transpose.severity == "high"
    assert "layout its consumer reads" in transpose.advice and "contiguous" in transpose.advice
    # cuDNN's bf16 convolution: occupancy and conflicts are the library's own design (info);
    # its small grid becomes caller advice capped at low.
    conv = {cat: f.severity for (launch, cat), f in by.items() if launch == 12}
    # (No occupancy finding at all: a tensor-core matrix product keeps few warps by design.)
    assert "occupancy" not in conv and conv["bank-conflicts"] == "info"
    assert conv["launch-config"] == "low"
    # PyTorch's eager ops are the eager-chain rule's, not the DRAM round-trip rule's.
    assert not [f for f in a.findings if f.rule == "fusion.memory-bound-chain"]
    chain = [f for f in a.findings if f.rule == "fusion.eager-chain"]
    assert [2, 3, 4, 5] in [f.launch_ids[:4] for f in chain]
    assert all("torch.compile" in f.advice for f in chain)


def test_a_library_reduction_on_a_few_blocks_gets_the_callers_reshape():
    """CuPy's column mean and variance of a [104857, 512] matrix on 16 blocks (2.5 ms each,
    1.8% of DRAM): the reduction's shape is the caller's, and its time earns its severity."""
    from conftest import analysis_cached

    a = analysis_cached(CORPUS / "cupy_graph_ridge.raw.csv.xz")
    ids = dict(zip(a.report.launches["launch"], a.report.launches["id"], strict=True))
    grids = {ids[f.launch]: f for f in a.findings if f.rule == "launch-config.small-grid"}
    for launch_id in (31, 32, 34):
        finding = grids[launch_id]
        assert finding.severity == "high"
        assert "two steps" in finding.advice and "matrix product" in finding.advice
    # A GEMM on a small grid keeps the general caller advice, capped at low.
    assert grids[16].severity == "low" and "work per call is too small" in grids[16].advice


def test_the_native_ctc_loss_on_a_few_blocks_gets_the_cudnn_switch():
    """ATen's CTC recursions on 8 blocks, 49% of an ASR step's first 60 launches."""
    from conftest import analysis_cached

    a = analysis_cached(CORPUS / "torch_ctc_asr.details.csv.xz")
    ids = dict(zip(a.report.launches["launch"], a.report.launches["id"], strict=True))
    grids = {ids[f.launch]: f for f in a.findings if f.rule == "launch-config.small-grid"}
    for launch_id in (29, 43):
        assert grids[launch_id].severity == "high" and "cuDNN's CTC" in grids[launch_id].advice
    assert a.actions[0].category == "launch-config"


def test_details_page_evidence_is_marked_and_less_sure():
    a = analyze(read_report(LINEINFO / "coalescing.details.csv"))
    f = next(f for f in a.findings if f.rule == "coalescing.global-loads")
    assert f.evidence_source == "ncu-rule" and f.confidence == "medium" and f.severity == "high"
    both = analyze(read_report([LINEINFO / "coalescing.details.csv",
                                LINEINFO / "coalescing.raw.csv.gz"]))
    g = next(f for f in both.findings if f.rule == "coalescing.global-loads")
    assert g.evidence_source == "both" and g.confidence == "high"


def test_ncu_rep_rule_types_match_the_csv_export():
    def kinds(path):
        rules = read_report(path).ncu_rules.dropna(subset=["type"])
        return sorted(zip(rules["rule"], rules["type"], strict=True))

    assert kinds(FOREIGN / "triton_kernels.ncu-rep.gz") == kinds(
        FOREIGN / "triton_kernels.details.csv")


CORPUS = ROOT / "sample_reports" / "corpus"
# Library kernels of the corpus' dev captures that the origin table missed: their demangled
# names start with a return type and namespaces, and cuSOLVER/cuSPARSE had no entry.
LIBRARY_KERNELS = {
    "cupy_libraries": {7: "cusolver", 38: "cusolver", 40: "cublas", 44: "cusparse"},
    "torch_cnn_train": {4: "cudnn", 11: "cudnn", 54: "cudnn"},
}
INTERNALS = {"bank-conflicts", "coalescing", "launch-config", "occupancy", "fusion"}


@pytest.mark.parametrize("capture", sorted(LIBRARY_KERNELS))
def test_library_kernels_get_no_advice_about_their_internals(capture):
    """cuSOLVER's potrf, cuBLAS' trsv, cuSPARSE's SpMV and cuDNN's layout conversion and
    dgrad engine are library code: no medium/high finding on how they are written."""
    from conftest import analysis_cached

    analysis = analysis_cached(CORPUS / f"{capture}.details.csv.xz")
    launches = analysis.report.launches
    by_id = launches.set_index("id")
    id_of = dict(zip(launches["launch"], launches["id"], strict=True))
    table = origin_table()
    for launch_id, origin in LIBRARY_KERNELS[capture].items():
        assert table.classify(by_id.loc[launch_id, "name"]).id == origin, launch_id
    seen = 0
    for f in analysis.findings:
        ids = set(f.kernel_ids) if f.launch is None else {id_of[f.launch]}
        seen += bool(ids & set(LIBRARY_KERNELS[capture]))
        if f.severity in ("high", "medium") and f.category in INTERNALS:
            assert not ids & set(LIBRARY_KERNELS[capture]), (f.rule, sorted(ids))
    assert seen  # the kernels do get findings (at info/low, or caller advice)


def test_anchored_patterns_match_the_bare_function_name():
    from ncu_advisor.derive.origin import name_forms

    name = ("void engines_precompiled::nchwToNhwcKernel<float, float, float, 0, 1, 0>"
            "(engines_precompiled::nchw2nhwc_params_t<T3>, const T1 *, T2 *)")
    assert name_forms(name)[-1] == "nchwToNhwcKernel"
    assert name_forms("transpose_naive") == ("transpose_naive",)
    assert origin_table().role(name) == "layout"
    # CuPy's scan helpers are passes of one algorithm, not elementwise maps.
    assert origin_table().role("cupy_bsum_shfl") == "multi-pass"


def test_a_gemv_over_a_transposed_cache_gets_the_layout_advice_a_gemm_does_not():
    from conftest import analysis_cached

    # Batch-64 decode (dev corpus): q @ K.transpose(-2, -1) over the KV cache runs cuBLAS's
    # GEMV with 2 of 32 bytes used per sector, four layers at ~6% of the step each.
    a = analysis_cached(ROOT / "sample_reports" / "corpus" / "torch_decode_b64.raw.csv.xz")
    ids = a.report.launches.set_index("launch")["id"]
    gemv = [f for f in a.findings if f.category == "coalescing" and f.launch is not None
            and int(ids[f.launch]) in (6, 23, 40, 57)]
    assert len(gemv) == 4
    assert all(f.severity in ("high", "medium") and "GEMV" in f.advice for f in gemv)
    # A cuDNN implicit-GEMM convolution's sector use is the library's own design.
    cl = analysis_cached(ROOT / "sample_reports" / "corpus"
                         / "torch_cnn_train.channels_last.raw.csv.xz")
    conv = [f for f in cl.findings if f.category == "coalescing" and f.launch == 2]
    assert conv and all(f.severity == "info" for f in conv)


def test_a_column_major_spmm_operand_gets_the_call_site_layout_advice():
    from conftest import analysis_cached

    # Graph ridge (dev corpus): three cuSPARSE SpMM hops over an F-ordered dense operand (its
    # loads use a few bytes of each sector): the storage order is the caller's to change.
    a = analysis_cached(ROOT / "sample_reports" / "corpus" / "cupy_graph_ridge.raw.csv.xz")
    ids = a.report.launches.set_index("launch")["id"]
    spmm = [f for f in a.findings if f.rule == "coalescing.global-loads"
            and int(ids[f.launch]) in (19, 22, 25)]
    assert len(spmm) == 3
    assert all(f.severity == "high" and "row-major" in f.advice for f in spmm)
    # cuSPARSE's own internals (its bank conflicts, atomics) stay information only.
    inside = [f for f in a.findings if f.launch is not None and int(ids[f.launch]) == 19
              and f.category in ("bank-conflicts", "privatization", "divergence")]
    assert inside and all(f.severity == "info" for f in inside)


def test_a_contended_framework_scatter_add_gets_the_call_site_privatization_advice():
    from conftest import analysis_cached

    # PIC deposition (dev corpus, batch 10): four cupyx.scatter_add calls into a 4 MB density,
    # 273 atomic sectors per 1000 instructions, the busiest L2 atomic unit at 60%.
    a = analysis_cached(ROOT / "sample_reports" / "corpus" / "cupy_pic2d.raw.csv.xz")
    ids = a.report.launches.set_index("launch")["id"]
    scatter = [f for f in a.findings if f.rule == "privatization.global-atomics"
               and int(ids[f.launch]) in (29, 31, 33, 35)]
    assert len(scatter) == 4
    assert all(f.severity == "high" and "Sort the updates" in f.advice for f in scatter)
    # A library's own atomics (CUB's radix-sort digit counts) stay information only.
    b = analysis_cached(ROOT / "sample_reports" / "corpus" / "cuda_radix_sort.raw.csv.xz")
    cub = [f for f in b.findings if f.rule == "privatization.global-atomics"
           and "RadixSort" in b.report.launches.set_index("launch").loc[f.launch, "name"]]
    assert cub and all(f.severity == "info" for f in cub)


def test_cudnn_format_conversions_get_layout_advice_not_coalescing():
    from conftest import analysis_cached

    # wav2vec 2.0 features (dev, batch 12): cuDNN converts each conv weight NCHW -> NHWC on
    # every call; the strided side of the copy is the conversion, which channels_last removes.
    a = analysis_cached(ROOT / "sample_reports" / "corpus" / "torch_wav2vec_features.raw.csv.xz")
    names = a.report.launches.set_index("launch")["name"]
    conversions = [f for f in a.findings if f.launch is not None and f.severity != "info"
                   and "nchwToNhwc" in names[f.launch] and f.rule.startswith("coalescing")]
    assert conversions
    assert all(f.category == "layout" and "channels_last" in f.advice for f in conversions)


def test_a_bincount_bound_on_its_atomics_gets_the_privatization_advice():
    from conftest import analysis_cached

    # A star join (dev, batch 12): cupy.bincount with weights, 12M float64 atomic adds.
    a = analysis_cached(ROOT / "sample_reports" / "corpus" / "cupy_star_join.raw.csv.xz")
    names = a.report.launches.set_index("launch")["name"]
    counts = [f for f in a.findings if f.rule == "privatization.global-atomics"
              and "bincount" in names[f.launch]]
    assert counts and any(f.severity in ("medium", "high") for f in counts)


def test_kernels_of_unseen_libraries_are_unknown_not_user():
    # No origin names them, and their names sit in a C++ namespace of their own: more likely a
    # library the table does not know than the user's code. Source lines make them the user's.
    table = origin_table()
    for name in ("void vllm::paged_attention_v1_kernel<float, 128>(float *, const float *)",
                 "void tensorrt_llm::kernels::topk_stage1<float>(const float *, int)"):
        assert table.classify(name).id == "unknown"
        assert table.classify(name, has_source=True).id == "user"
    for name in ("sgemm_smem_tiled", "void transpose_naive<32>(float *, const float *)",
                 "void <unnamed>::softmax_rows(float *)", "cross_entropy_fwd_kernel"):
        assert table.classify(name).id == "user", name
    # Libraries the labelled corpus showed unnamed before: cuBLAS's legacy SGEMM, cuSOLVER's
    # LU helpers, PyTorch's gathers and jiterator kernels, cupyx.scipy's filters.
    assert table.classify("void sgemm_largek_lds64<1, 0, 5, 5>(float *)").id == "cublas"
    assert table.classify("xxtrf4_set_info_ker(int, int *)").id == "cusolver"
    assert table.classify("void vectorized_gather_kernel<16, long>(char *)").id == "pytorch"
    assert table.classify("abs_kernel_vectorized2_kernel").id == "pytorch"
    assert table.classify("cupyx_scipy_ndimage_correlate_3d_reflect_w1_1_11").id == "cupyx"
    # cuFFT's Bluestein path (a size with a large prime factor) and its real-to-complex steps.
    assert table.classify("void regular_bluestein_fft<2187, EPT<9>, 1, 3, 14, 0, 2, 0, unsigned "
                          "int, float>(kernel_arguments_blu_t<T9>)").id == "cufft"
    assert table.classify("void postprocess_kernel<float, unsigned int, 2>"
                          "(real_complex_args_t<T2>)").id == "cufft"


def test_an_unknown_kernel_gets_its_findings_at_low_with_the_reason():
    # generated_: the SGEMM ladder's capture with its naive kernel renamed into a namespace.
    report = read_report(ROOT / "sample_reports" / "corpus" / "cuda_gemm.raw.csv.xz")
    naive = report.launches["short_name"].eq("sgemm_naive_row")
    assert naive.sum() == 1
    before = analyze(report)
    report.launches.loc[naive, "name"] = "void vendorlib::sgemm_naive_row(float *, float *)"
    after = analyze(report)
    launches = set(report.launches.loc[naive, "launch"])

    def counted(a):
        return {(f.launch, f.rule) for f in a.findings
                if f.launch in launches and f.severity in ("high", "medium")}
    assert counted(before) and not counted(after)
    capped = {(f.launch, f.rule) for f in after.findings
              if f.launch in launches and f.severity == "low" and f.origin == "unknown"
              and "not known" in (f.note or "")}
    assert capped >= counted(before)  # coalescing and tiling on the naive SGEMM
