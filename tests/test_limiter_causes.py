"""Causes that explain a kernel's limiter on real corpus captures (dev split): library
kernels get the caller's lever at the severity their time earns, and launch-bound runs name
every launch a graph would touch."""

from pathlib import Path

from conftest import analysis_cached

CORPUS = Path(__file__).parent.parent / "sample_reports" / "corpus"


def _findings(capture: str, rule: str) -> list:
    analysis = analysis_cached(CORPUS / f"{capture}.raw.csv.xz")
    return [f for f in analysis.findings if f.rule == rule]


def _at(findings: list, launch: int) -> list:
    return [f for f in findings if f.launch == launch or launch in (f.launch_ids or [])]


def test_cudnn_ffma_convolution_gets_the_precision_lever():
    # cuDNN picked an FP32 FFMA implicit GEMM (FMA pipe 42%, issue-bound, tensor pipe idle)
    # for a strided 1x1 convolution: TF32 or bf16 is the caller's lever.
    found = _at(_findings("torch_cnn_train", "precision.fp32-without-tensor-cores"), 31)
    assert found and found[0].severity in ("medium", "high")
    assert "allow_tf32" in found[0].advice


def test_tensor_core_convolution_stays_silent():
    # The same program's TF32 dgrad runs on the tensor pipe (31%): nothing to switch on.
    assert not _at(_findings("torch_cnn_train", "precision.fp32-without-tensor-cores"), 74)


def test_user_fp32_matmul_below_fma_roof_is_not_a_precision_finding():
    # A hand-written tiled SGEMM at < 50% FMA: its own limiter's cause comes first.
    found = _findings("cuda_gemm", "precision.fp32-without-tensor-cores")
    analysis = analysis_cached(CORPUS / "cuda_gemm.raw.csv.xz")
    fma = analysis.quantities["fma_pipe_pct"]
    for f in found:
        assert fma[f.launch] >= 50


def test_cudnn_nchw_batch_norm_grid_gets_channels_last_at_its_time():
    # cuDNN's NCHW batch norm: one block per channel, 64 of 132 SMs, 378 us (8.5% of the step).
    found = _at(_findings("torch_cnn_train", "launch-config.small-grid"), 84)
    assert found and found[0].severity == "high"
    assert "channels_last" in found[0].advice


def test_library_grid_outside_norms_keeps_the_low_cap():
    # cuBLAS's small GEMV grids in a batch-1 decode step: the work per call is the problem.
    found = _findings("torch_decode_b1", "launch-config.small-grid")
    assert found and all(f.severity in ("low", "info") for f in found)


def test_launch_bound_step_touches_every_launch():
    # Batch-1 decode: 67 launches of 2-20 us issued ~15 us apart; the GPU idles most of the
    # step (measured: 1.99 ms a step against 0.25 ms as one CUDA graph), so a graph touches
    # every launch, the 20 us LM head included.
    found = _findings("torch_decode_b1", "launch-overhead.short-launches")
    assert len(found) == 1 and found[0].severity == "high"
    assert found[0].evidence["idle_ns"]["value"] > 0
    analysis = analysis_cached(CORPUS / "torch_decode_b1.raw.csv.xz")
    assert set(found[0].launch_ids) == set(analysis.report.launches["launch"])


def test_partly_launch_bound_step_touches_the_launches_shorter_than_their_wait():
    # BERT inference: the GEMMs keep the host ahead; the embedding and attention glue after
    # them drain the queue. The 60 us fc1 GEMM is no launch problem; the 4-6 us ops are.
    found = _findings("torch_bert_infer", "launch-overhead.short-launches")
    assert len(found) == 1 and found[0].severity == "medium"
    analysis = analysis_cached(CORPUS / "torch_bert_infer.raw.csv.xz")
    d = analysis.report.launches.set_index("launch")["duration_ns"]
    touched = set(found[0].launch_ids)
    assert touched and all(d[i] < 15_000 for i in touched)
    assert 23 not in touched and d[23] > 50_000


def test_short_launches_beside_long_kernels_are_not_a_launch_problem():
    # channels_last CNN step: 21 of 54 launches are short, but the convolutions around them
    # keep the host ahead of the GPU: no launch waits long enough to name.
    found = _findings("torch_cnn_train.channels_last", "launch-overhead.short-launches")
    assert all(f.severity in ("low", "info") for f in found)


def test_attention_over_a_kv_cache_spans_its_gemvs_not_the_output_projection():
    # Batch-64 decode, layer 0: head copies, q@K^T (cuBLAS GEMV), scale, softmax, p@V (GEMV);
    # the output projection GEMM after it is not attention (SDPA keeps it).
    found = _findings("torch_decode_b64", "fusion.unfused-attention")
    assert len(found) == 4 and all(f.severity == "high" for f in found)
    analysis = analysis_cached(CORPUS / "torch_decode_b64.raw.csv.xz")
    names = analysis.report.launches.set_index("launch")["name"]
    first = found[0].launch_ids
    assert sum("Gemv" in names[i] for i in first) == 2
    assert "nvjet" not in names[first[-1]] and "nvjet" in names[first[-1] + 1]


def _chains(path: Path) -> list[list[str]]:
    analysis = analysis_cached(path)
    names = analysis.report.launches.set_index("launch")["short_name"]
    return [[names[i] for i in f.launch_ids] for f in analysis.findings
            if f.rule == "fusion.memory-bound-chain"]


def test_versions_of_one_operation_are_not_a_chain():
    # Two versions run back to back on the same array (naive then shared-memory Jacobi, the
    # same copy from two alignments, local vs shared bins): same shape and traffic, no
    # producer and consumer.
    for capture in ("cuda_stencil", "cuda_memory_access", "cuda_compute_patterns"):
        assert _chains(CORPUS / f"{capture}.raw.csv.xz") == [], capture
    demos = Path(__file__).parent.parent / "sample_reports" / "demos"
    assert _chains(demos / "bank-conflicts.raw.csv") == []


def test_steps_of_one_computation_still_chain_and_the_fused_version_does_not_join():
    demos = Path(__file__).parent.parent / "sample_reports" / "demos"
    assert _chains(demos / "fusion.raw.csv") == [
        ["fusion_scale_shift", "fusion_relu", "fusion_add_residual"]]


def test_no_chain_links_two_variants_of_a_demo_in_the_readme_run():
    # The README's first command analyzes every demo at once. Each variant runs in its own
    # NVTX range (DEMO/ROLE:FUNCTION); a chain or multi-pass finding that spans two ranges would
    # tell a teacher to fuse the bad kernel with its own fix (math-rewrite's row_normalize ->
    # online_softmax was one, medium, before the ranges).
    demos = Path(__file__).parent.parent / "sample_reports" / "demos"
    analysis = analysis_cached(demos)
    ranges = analysis.report.launches.set_index("launch")["nvtx"]
    assert ranges.notna().all()
    spans = {f.rule: [] for f in analysis.findings}
    for f in analysis.findings:
        if f.rule in ("fusion.memory-bound-chain", "math-rewrite.multi-pass"):
            spans[f.rule].append({ranges[i] for i in f.launch_ids})
    assert spans["fusion.memory-bound-chain"] == [{"fusion/bad:run_bad"}]
    assert spans["math-rewrite.multi-pass"] == [{"math-rewrite/bad:run_bad"}]


def test_batch_norm_and_the_relu_after_it_are_one_eager_chain():
    # Eager CNN step: cuDNN's batch norm writes 67 MB that the next ReLU re-reads; inductor
    # generates the norm and fuses the ReLU into it (the saving is the ReLU, not the norm).
    analysis = analysis_cached(CORPUS / "torch_cnn_train.raw.csv.xz")
    chains = {tuple(f.launch_ids): f for f in analysis.findings if f.rule == "fusion.eager-chain"}
    assert (2, 3) in chains
    relu = analysis.report.launches.set_index("launch").at[3, "duration_ns"]
    assert abs(chains[(2, 3)].estimated_saving_ns - relu) < 0.05 * relu



def test_the_scalar_ops_of_an_iteration_go_with_the_run_that_uses_them():
    # CG in CuPy: alpha = rr / pAp is a one-thread copy and divide (2 us each) right before
    # the vector updates that read alpha; fused, they go away with the run. BatchNorm's
    # num_batches_tracked += 1 (int64) ahead of the norm is bookkeeping, not part of it.
    chains = [f.launch_ids for f in _findings("cupy_cg_poisson", "fusion.eager-chain")]
    assert [10, 11, 12, 13, 14, 15, 16, 17] in chains
    cnn = _findings("torch_cnn_train", "fusion.eager-chain")
    assert not _at(cnn, 1) and _at(cnn, 2)


def test_a_dot_product_ends_its_chain_in_the_library_reduction():
    # CG's p . Ap is cupy_multiply of two vectors, then CUB's device reduction of the product
    # (#7 -> #8): a dot product, one pass when fused. On the foreign set, cp.sum(a) after
    # c = a * b + 1.0 (an add of a scalar, #1 -> #2) sums another array: no chain into it.
    chains = [f.launch_ids for f in _findings("cupy_cg_poisson", "fusion.eager-chain")]
    assert [7, 8] in chains
    builtins = analysis_cached(CORPUS.parent / "foreign" / "cupy_builtins.raw.csv.gz")
    assert not any(2 in f.launch_ids for f in builtins.findings
                   if f.rule == "fusion.eager-chain")


def test_a_serial_library_kernel_ends_an_eager_chain_however_idle_it_is():
    # F.ctc_loss's forward and backward recursions (265 and 287 us at 3% of the SM: an 8-block
    # grid walking 400 frames) are not scalar ops inside the log_softmax -> loss chain: no
    # compiler fuses them, so no chain holds them.
    analysis = analysis_cached(CORPUS / "torch_ctc_asr.raw.csv.xz")
    ids = analysis.report.launches.set_index("launch")["id"]
    recursions = {29, 43}
    for f in analysis.findings:
        if f.rule == "fusion.eager-chain":
            assert not recursions & {int(ids[n]) for n in f.launch_ids}, f.launch_ids


def test_cupyx_special_functions_are_cupy_ops_of_the_chain():
    # Black-Scholes as 27 CuPy float64 expressions, four of them cupyx.scipy.special.ndtr:
    # one eager run (the program's own ElementwiseKernel is the fused version).
    chains = [f.launch_ids for f in _findings("cupy_black_scholes", "fusion.eager-chain")]
    assert chains == [list(range(2, 29))]


def test_a_forward_kernel_and_the_backward_right_after_it_are_no_chain():
    # F.layer_norm forward, then its backward at once: autograd's boundary, two graphs.
    chains = [f.launch_ids for f in _findings("triton_layernorm_bwd", "fusion.eager-chain")]
    assert all(4 not in c for c in chains)


def test_hand_written_attention_is_found_forward_and_backward_and_not_after_sdpa():
    found = _findings("torch_decoder_train", "fusion.unfused-attention")
    spans = sorted(tuple(f.launch_ids) for f in found)
    # Forward: q/k copies, q @ k^T, scale, mask, softmax, dropout, cast, v copy, @ v, merge copy.
    assert spans[0] == tuple(range(9, 22))
    assert len(spans) == 2 and 86 in spans[1] and 81 in spans[1] and 91 in spans[1]
    # The loss's log-softmax between the LM head GEMM and its backward is no attention.
    assert all(43 not in s and 48 not in s for s in spans)
    assert not _findings("torch_decoder_train.sdpa", "fusion.unfused-attention")


def test_attention_with_a_user_triton_softmax_between_library_matmuls_is_unfused():
    # triton_attention (dev since 2026-12-03): torch.matmul -> the user's Triton softmax over a
    # 1 GB score matrix -> torch.matmul, beside the user's own Triton flash kernel, whose bare
    # name (`flash_fwd_kernel`, no template arguments) is the user's code, not FlashAttention.
    analysis = analysis_cached(CORPUS / "triton_attention.raw.csv.xz")
    found = [f for f in analysis.findings if f.rule == "fusion.unfused-attention"]
    assert len(found) == 1 and found[0].severity == "high"
    assert sorted(found[0].launch_ids) == [2, 3, 4]
    origins = analysis.origins_by_launch()
    assert origins[0]["origin"] == "user" and origins[3]["origin"] == "user"
    assert origins[2]["origin"] == "cublas"


def test_a_range_a_library_pushes_is_its_callers_region():
    from types import SimpleNamespace

    from ncu_advisor.rules_engine.functions import _same_region

    def launch(nvtx):
        return SimpleNamespace(nvtx=nvtx)

    # CUB pushes cub::DeviceReduce::Sum inside the user's range (cupy_cg_poisson's captures).
    assert _same_region(launch("cg"), launch("cg/cub::DeviceReduce::Sum"))
    assert _same_region(launch("cg/cub::DeviceReduce::Sum"), launch("cg"))
    # Two user ranges stay two regions; unknown ranges are unknown.
    assert _same_region(launch("model/block0"), launch("model/block1")) is False
    assert _same_region(launch("model"), launch("model/block0")) is False
    assert _same_region(launch(float("nan")), launch("model")) is None


def test_a_small_level_of_a_kernel_is_low_where_its_large_levels_are_high():
    # BFS: the same bfs_expand kernel runs levels of 36 ms and of 10-40 us; the time at stake
    # is in the large ones (severity per launch, not inherited from the kernel).
    found = _findings("cuda_bfs", "divergence.warp-divergence")
    assert _at(found, 18)[0].severity == "high"
    assert _at(found, 7)[0].severity == "low" and _at(found, 16)[0].severity == "low"


def test_scattered_atomics_are_not_a_privatization_problem():
    # A BFS's atomicCAS claims on a 2M-entry visited array leave L2's atomic units idle (the
    # busiest slice under 25%): not the limiter. Contended counters keep it at 45-83%.
    bfs = _findings("cuda_bfs", "privatization.global-atomics")
    assert bfs and all(f.severity == "low" for f in bfs)
    hist = _findings("cuda_histogram_scan", "privatization.global-atomics")
    assert _at(hist, 0)[0].severity == "high"
    radix = _findings("cuda_radix_sort", "privatization.global-atomics")
    assert _at(radix, 0)[0].severity == "high"


def test_a_reduction_over_a_column_view_gets_the_callers_layout_advice():
    # torch.std_mean of one column of a [4M, 16] float32 matrix: PyTorch's reduce_kernel reads
    # 4 of every 32 bytes. The stride is the caller's view, not the library's design.
    found = _at(_findings("torch_tabular_prep", "coalescing.global-loads"), 0)
    assert found and found[0].severity in ("medium", "high")
    assert "column" in found[0].advice
