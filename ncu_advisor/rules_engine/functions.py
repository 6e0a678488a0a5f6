"""Rules that need more than a condition over one launch: they look across launches.

Each function takes ``(rule, quantities, launches)`` and returns ``(findings, not_evaluated)``.
The rule file still holds the id, category, texts and severity; the function finds the cases.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pandas as pd

from ..derive.host_timeline import host_timeline
from ..derive.limiter import SHORT_LAUNCH_NS
from .findings import Finding, NotEvaluated, launch_times, make_finding, not_evaluated
from .schema import Rule

RuleResult = tuple[list[Finding], list[NotEvaluated]]
RuleFunction = Callable[[Rule, pd.DataFrame, pd.DataFrame], RuleResult]


def _missing(rule: Rule, quantities: pd.DataFrame) -> NotEvaluated | None:
    absent = [q for q in rule.needs if quantities.get(q, pd.Series(dtype=float)).isna().all()]
    return not_evaluated(rule, None, absent) if absent else None


def _same(a, b) -> bool:
    """Equality where two missing values (no stream in a summary, no PID in a .ncu-rep) agree."""
    if pd.isna(a) or pd.isna(b):
        return bool(pd.isna(a) and pd.isna(b))
    return bool(a == b)


def _same_stream(prev, row) -> bool:
    """Two launches ran back to back in one process and stream of one input file."""
    return (_same(prev.source, row.source) and _same(prev.stream, row.stream)
            and _same(prev.process_id, row.process_id))


def _runs(launches: pd.DataFrame, starts: Callable[[int], bool],
          continues: Callable[[list[int], int], bool]) -> list[list[int]]:
    """Runs of at least two back-to-back launches of one stream that a rule links together.

    ``starts(launch)`` says whether a launch can begin a run; ``continues(run, launch)``
    whether it extends the current one (only asked for launches on the same stream).
    """
    runs: list[list[int]] = []
    current: list[int] = []
    prev = None
    if "form" in launches:  # a per-kernel summary has no launch order to follow
        launches = launches[launches["form"] != "summary"]
    for row in launches.sort_values(["source", "launch"]).itertuples(index=False):
        launch = int(row.launch)
        if current and prev is not None and _same_stream(prev, row) and continues(current,
                                                                                  launch):
            current.append(launch)
        else:
            if len(current) >= 2:
                runs.append(current)
            current = [launch] if starts(launch) else []
        prev = row
    if len(current) >= 2:
        runs.append(current)
    return runs


def _summary_only(launches: pd.DataFrame) -> bool:
    """Every row a per-kernel summary: no launch order for a rule over sequences to follow."""
    return "form" in launches and bool((launches["form"] == "summary").all())


def _fusable(row) -> bool:
    """User code, or a library's elementwise kernel (PyTorch/CuPy eager ops, Inductor pointwise).

    A library's GEMM, sort pass or FFT is one step of an algorithm the caller cannot merge
    with its neighbours: never part of a fusion chain.
    """
    return not bool(getattr(row, "origin_library", False)) or getattr(row, "role", None) == \
        "elementwise"


def _eager(row) -> bool:
    """A launch of an eager framework's op (PyTorch, CuPy)."""
    return bool(getattr(row, "origin_eager", False))


# An elementwise product of two tensors: CuPy's ufunc names its operand dtypes (a Python
# scalar operand is `float`/`int`, unsized); PyTorch's binary functor takes two tensors (its
# scalar forms are the A/BUnaryFunctor wrappers).
_TENSOR_PRODUCT = re.compile(r"^cupy_multiply__[a-z]+\d+_[a-z]+\d+_|BinaryFunctor<.*MulFunctor")


def _tensor_product(row) -> bool:
    """An eager elementwise product of two tensors (not of a tensor and a scalar)."""
    return (_eager(row) and getattr(row, "role", None) == "elementwise"
            and bool(_TENSOR_PRODUCT.search(str(row.name))))


def _reads_about(traffic: dict[int, float], producer: int, consumer: int, most: float) -> bool:
    """Whether ``consumer`` moves a fifth to ``most`` times the L2 traffic ``producer`` did.

    A consumer of a producer's output reads about what it wrote; the producer also read its
    inputs, so a fifth is the least such a read can be (both known and positive).
    """
    made, read = traffic.get(producer, np.nan), traffic.get(consumer, np.nan)
    return bool(made > 0 and read > 0 and 0.2 <= read / made <= most)


def _user_range(nvtx: str) -> str:
    """An NVTX path without the ranges a library pushes inside the user's.

    Those are C++-qualified names (CUB's ``cub::DeviceReduce::Sum``), which user ranges are not.
    """
    parts = str(nvtx).split("/")
    while len(parts) > 1 and "::" in parts[-1]:
        parts.pop()
    return "/".join(parts)


def _same_region(a, b) -> bool | None:
    """Same NVTX range (True), different ones (False), or not known for both (None).

    A range a library pushes around its own launches is its caller's range.
    """
    na, nb = getattr(a, "nvtx", None), getattr(b, "nvtx", None)
    if pd.isna(na) or pd.isna(nb):
        return None
    return na == nb or _user_range(na) == _user_range(nb)


_SHAPE = ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z")


def _same_shape(a, b) -> bool:
    """The same grid and block (unknown sizes agree only with unknown ones)."""
    return all(_same(getattr(a, k, None), getattr(b, k, None)) for k in _SHAPE)


def _plausible_link(a, b) -> bool:
    """Whether user kernels a -> b look like producer and consumer, not two versions.

    Hand-written code that runs several versions of one operation back to back (a benchmark,
    an optimization ladder) shows the same traffic pattern as a producer-consumer chain. The
    steps of one computation over one array are launched over that array (one grid, one
    block); versions of an operation differ in exactly that. Library elementwise launches
    are sized by the library from the tensor and are linked by traffic alone.
    """
    if any(bool(getattr(row, "origin_library", False)) for row in (a, b)):
        return True
    return _same_shape(a, b) and not _versions(str(a.short_name), str(b.short_name))


def _busy_pct(q: pd.DataFrame) -> np.ndarray:
    """Each row's busier of memory and compute throughput (% of peak; NaN where unknown)."""
    def column(name: str) -> np.ndarray:
        return (q[name].to_numpy(dtype="float64") if name in q
                else np.full(len(q), np.nan))
    return np.fmax(column("mem_pct"), column("sm_pct"))


def _versions(a: str, b: str) -> bool:
    """Whether two kernel names read as versions of one operation, not two steps of one.

    The same kernel again (a repeat, an iteration: not a fusion); names that differ in one
    word only (``jacobi2d_naive``/``jacobi2d_smem``, ``transpose_padded``/``_unpadded``); or a
    second kernel that says it is the fused one. Steps of a computation are named by the step
    (``scale_shift`` -> ``relu`` -> ``add_residual``).
    """
    if a == b:
        return True
    words_a, words_b = _words(a), _words(b)
    if "fused" in words_b or "fuse" in words_b:
        return True
    return (len(words_a) == len(words_b) > 1
            and sum(x != y for x, y in zip(words_a, words_b, strict=True)) == 1)


def _words(name: str) -> list[str]:
    return [w for w in re.split(r"[_\W]+", name.lower()) if w]


def _reads_previous_output(read: float, written: float) -> bool:
    """Whether a launch reads about as many bytes as the previous one wrote (0.5x to 3x).

    Metrics cannot prove a data dependency; comparable traffic on one stream is the signal.
    """
    return bool(written > 0 and 0.5 * written <= read <= 3.0 * written)


def fusion_chain(rule: Rule, quantities: pd.DataFrame,
                 launches: pd.DataFrame) -> tuple[list[Finding], list[NotEvaluated]]:
    """Find runs of consecutive memory-bound launches where each reads what the last wrote.

    Two launches chain when they run back to back in one process and stream, both are
    memory-bound with low arithmetic intensity, the second reads at least half as many DRAM
    bytes as the first wrote, and, for user kernels, both have one launch shape. Fusing a
    chain keeps the intermediates on chip: the ideal traffic is the first launch's reads plus
    the last one's writes.
    """
    skipped = _missing(rule, quantities)
    if skipped:
        return [], [skipped]
    q = quantities.reindex(launches["launch"])
    # Far below the H200 ridge (~14 FLOP/byte): the DRAM traffic, not the math, sets the time.
    low_intensity = q["arith_intensity_dram"].fillna(0.0) < 4.0
    # Not "memory-bound" (derive/bound.py: >= 60% of peak): a chain link only has to stream
    # memory, busier than compute at low intensity, from 30% of peak (short eager ops).
    streams_memory = (q["mem_pct"] >= q["sm_pct"]) & low_intensity & (q["mem_pct"] >= 30.0)
    # A details-page export has DRAM bytes but not the read/write split: take half each way.
    # That cannot tell a reduction (reads much, writes little) from a map, so without the split
    # only elementwise ops (which write what they read) or launches of one NVTX range link.
    split_known = (q["dram_read_bytes"].notna() & q["dram_write_bytes"].notna()).to_dict()
    rows = {int(r.launch): r for r in launches.itertuples(index=False)}
    # One range around the whole profiled step (a program's own) says nothing about which
    # launch feeds which; ranges count as evidence where there are several.
    ranges_tell = "nvtx" in launches and launches["nvtx"].dropna().nunique() > 1
    judgeable = {launch: bool(split_known.get(launch))
                 or getattr(r, "role", None) == "elementwise"
                 or (ranges_tell and not pd.isna(getattr(r, "nvtx", None)))
                 for launch, r in rows.items()}
    reads = q["dram_read_bytes"].fillna(0.5 * q["dram_bytes"]).to_dict()
    writes = q["dram_write_bytes"].fillna(0.5 * q["dram_bytes"]).to_dict()

    def candidate(launch: int) -> bool:
        # Eager framework ops (PyTorch, CuPy) are fusion.eager-chain's: their chains show in
        # op order, not DRAM round trips (a 60 MB L2 keeps the intermediates).
        return (bool(streams_memory.get(launch, False)) and _fusable(rows[launch])
                and not _eager(rows[launch]) and judgeable[launch])

    chains = _runs(
        launches,
        starts=candidate,
        # Evidence of a data dependence: the next launch reads about what the last one wrote,
        # and, where NVTX ranges are known, both run inside the same range (one framework op
        # or layer); a launch in another range starts a new chain.
        continues=lambda run, launch: candidate(launch)
        and _same_region(rows[run[-1]], rows[launch]) is not False
        and _plausible_link(rows[run[-1]], rows[launch])
        and _reads_previous_output(reads[launch], writes[run[-1]]),
    )

    findings = []
    # Per launch lookups as dicts: a .loc per chain was most of this rule's time.
    durations = launch_times(launches)
    names_of = dict(zip(launches["launch"].tolist(), launches["short_name"].tolist(),
                        strict=True))
    ids_of = dict(zip(launches["launch"].tolist(), launches["id"].tolist(), strict=True))
    position = {launch: i for i, launch in enumerate(q.index.tolist())}
    for chain in chains:
        # The rule file's confidence and severity steps read it: matching traffic alone
        # cannot prove one kernel consumes the other's output, a shared NVTX range can.
        in_one_range = all(_same_region(rows[chain[0]], rows[c]) for c in chain[1:])
        total = float(sum(reads[c] + writes[c] for c in chain))
        ideal = float(reads[chain[0]] + writes[chain[-1]])
        duration = float(np.nansum(np.array([durations[c] for c in chain], dtype="float64")))
        pct = max(0.0, 1.0 - ideal / total) * 100.0 if total > 0 else None
        values = {"chain_length": float(len(chain)), "saving_pct": pct or 0.0,
                  "traffic_ratio": total / ideal if ideal else np.nan,
                  "chain_in_one_range": float(in_one_range)}
        names = [names_of[c] for c in chain]
        # Severity and confidence steps read the first kernel.
        first = {**q.iloc[position[chain[0]]].to_dict(), **values}
        findings.append(make_finding(
            rule, first, speedup_pct=pct, duration_ns=duration,
            title_suffix=": " + " -> ".join(names),
            evidence={"dram_bytes_chain": {"value": total, "unit": "byte",
                                           "label": "DRAM bytes moved by the chain"},
                      "dram_bytes_fused": {"value": ideal, "unit": "byte",
                                           "label": "DRAM bytes if fused (first reads + last "
                                                    "writes)"}},
            kernel_ids=[int(ids_of[c]) for c in chain if not pd.isna(ids_of[c])],
            launch_ids=[int(c) for c in chain]))
    unjudged = [c for c, ok in judgeable.items() if not ok and streams_memory.get(c, False)]
    if unjudged:  # say so instead of staying silent about them
        return findings, [not_evaluated(rule, None, ["dram_read_bytes", "dram_write_bytes"])]
    return findings, []


def multi_pass(rule: Rule, quantities: pd.DataFrame,
               launches: pd.DataFrame) -> tuple[list[Finding], list[NotEvaluated]]:
    """Find consecutive memory-bound launches that each stream the same input again.

    A multi-pass algorithm (max pass, sum pass, normalize pass) shows up as back-to-back
    launches on one stream that read about the same number of DRAM bytes (within 25%), where
    at least two of them write little (under a tenth of what they read: per-row statistics; and,
    where the store share of L2 traffic is known, under 10% of it, since writes that stay in L2
    never reach DRAM).
    One pass that computes the statistics online reads the input once.
    """
    skipped = _missing(rule, quantities)
    if skipped:
        return [], [skipped]
    q = quantities.reindex(launches["launch"])
    mem, reads = q["mem_pct"].to_dict(), q["dram_read_bytes"].to_dict()
    library = (dict(zip(launches["launch"], launches["origin_library"], strict=True))
               if "origin_library" in launches else {})

    def streams(launch: int) -> bool:
        # The passes of a library's algorithm (CUB's radix sort) are its own design.
        return bool(mem[launch] >= 50 and reads[launch] > 0 and not library.get(launch, False))

    groups = _runs(
        launches, starts=streams,
        continues=lambda run, launch: streams(launch)
        and abs(reads[launch] / reads[run[0]] - 1) <= 0.25,
    )

    findings = []
    by_launch = launches.set_index("launch")
    times = launch_times(launches)
    for group in groups:
        sub = q.loc[group]
        # Writes that stay in the 60 MB L2 never reach DRAM: where the store share of L2
        # traffic is known, a pass that writes little must also store little there.
        stores = sub.get("global_st_traffic_pct", pd.Series(np.nan, index=sub.index))
        reducing = int(((sub["dram_write_bytes"] < 0.1 * sub["dram_read_bytes"])
                        & ~(stores >= 10)).sum())
        if reducing < 2:
            continue
        reads = float(sub["dram_read_bytes"].sum())
        writes = float(sub["dram_write_bytes"].sum())
        ideal = float(sub["dram_read_bytes"].max()) + writes
        pct = max(0.0, 1.0 - ideal / (reads + writes)) * 100.0
        duration = float(np.nansum([times[g] for g in group]))
        values = {"passes": float(len(group)), "saving_pct": pct,
                  "read_multiple": reads / float(sub["dram_read_bytes"].max())}
        names = by_launch.loc[group, "short_name"].tolist()
        findings.append(make_finding(
            rule, {**sub.iloc[0].to_dict(), **values}, speedup_pct=pct, duration_ns=duration,
            title_suffix=": " + " -> ".join(names),
            evidence={"dram_read_bytes_passes": {"value": reads, "unit": "byte",
                                                 "label": "DRAM bytes read by all passes"},
                      "dram_read_bytes_once": {"value": float(sub["dram_read_bytes"].max()),
                                               "unit": "byte",
                                               "label": "DRAM bytes of one pass over the input"}},
            kernel_ids=[int(by_launch.at[g, "id"]) for g in group
                        if not pd.isna(by_launch.at[g, "id"])],
            launch_ids=[int(g) for g in group]))
    return findings, []


# Roles of framework launches a compiler does not fuse away: library GEMMs/convolutions and
# the passes of a sort or scan.
_NOT_FUSED = {"matmul", "multi-pass"}
# A launch that does next to no work (a fill of a few KB, an index setup) is launch overhead,
# not a pass over data: it neither makes nor breaks a chain.
_IDLE_PCT = 5.0


def eager_chain(rule: Rule, quantities: pd.DataFrame,
                launches: pd.DataFrame) -> tuple[list[Finding], list[NotEvaluated]]:
    """Find runs of back-to-back eager framework ops that a compiler would fuse.

    The ops: elementwise maps, norms, softmax, dropout, reductions, casts, copies.
    Each eager op is its own launch and its own pass over its tensors, whatever limits it
    (issue-bound casts, memory-bound adds); fused, the run costs about its longest member
    plus one launch. The evidence is the op order on one stream, not DRAM traffic: on a GPU
    with a 50-60 MB L2 the intermediates of a chain need not reach DRAM. A GEMM, a
    convolution or a sort ends a run; so does another NVTX range where ranges are known.
    """
    skipped = _missing(rule, quantities)
    if skipped:
        return [], [skipped]
    q = quantities.reindex(launches["launch"])
    busy = _busy_pct(q)
    busy_of = dict(zip(q.index.tolist(), busy.tolist(), strict=True))
    share_of = q["time_share_pct"].to_dict()
    rows = {int(r.launch): r for r in launches.itertuples(index=False)}

    # Where launching binds the step, a tiny op is a launch that fusion removes: a member.
    timeline = host_timeline(launches)
    launch_bound = set(timeline.launch_bound()) if timeline is not None else set()

    def tiny(launch: int) -> bool:  # next to no work: a launch more than a pass over data
        # Never a GEMM or a multi-pass algorithm's kernel, however idle: a CTC loss's serial
        # recursion (265 us at 3% of the SM) ends a run, it is not a scalar op inside it.
        row = rows[launch]
        return (_eager(row) and busy_of.get(launch, 0.0) < _IDLE_PCT
                and getattr(row, "role", None) not in _NOT_FUSED)

    def idle(launch: int) -> bool:  # skipped over: it does not end a run
        return tiny(launch) and launch not in launch_bound

    eager_program = any(_eager(r) for r in rows.values())

    # Launches other rules own, whose change is not a compiler's: an unfused optimizer's
    # (fused=True) and a growing concatenation's (preallocate the tensor).
    claimed = {c for run in _optimizer_launches(launches) for c in run}
    claimed |= {c for run in growing_concats(q, launches) for c in run}

    def member(launch: int) -> bool:
        row = rows[launch]
        if launch in claimed:
            return False
        # A library's normalization kernel (cuDNN's batch norm) inside an eager program is
        # an op like the others to a compiler: inductor generates the norm and fuses the
        # ReLU or residual add that follows it. A library reduction (CUB's, under CuPy's
        # dot and sum) joins only a dot product it ends (`reduction_of`).
        return ((_eager(row) or (eager_program and getattr(row, "role", None) == "norm"))
                and getattr(row, "role", None) not in _NOT_FUSED and not idle(launch))

    traffic = _traffic_bytes(q)

    def reduction_of(run: list[int], launch: int) -> bool:
        # A dot product written as `(p * q).sum()` (or CuPy's dot of two vectors): the
        # product of two tensors, then a library reduction reading about its output (between
        # a fifth and about all of the product's L2 traffic). The launch order alone cannot
        # tell `(p * q).sum()` from a sum of an unrelated array after a map (`c = a * b + 1;
        # s = a.sum()`); the product of two tensors right before a full reduction is the
        # dot-product idiom, so only it continues into one.
        row, last = rows[launch], run[-1]
        return (eager_program and getattr(row, "role", None) == "reduction"
                and not _eager(row) and _tensor_product(rows[last])
                and _reads_about(traffic, last, launch, 1.1))

    def comparable(a: int, b: int) -> bool:
        # Ops of one computation move tensors of one size class through L2; two unrelated
        # ops next to each other usually do not (where the bytes are known).
        ta, tb = traffic.get(a, np.nan), traffic.get(b, np.nan)
        if pd.isna(ta) or pd.isna(tb) or ta <= 0 or tb <= 0:
            return True
        return 0.25 <= tb / ta <= 4.0

    busy_launches = launches.loc[~launches["launch"].map(idle)]
    order = busy_launches.sort_values(["source", "launch"])["launch"].astype(int).tolist()
    after = dict(zip(order, order[1:], strict=False))

    def size_class(run: list[int]) -> int:
        # The run's size is set by its larger recent members: a small side input (a
        # position embedding, a bias) joins a run without resetting it, and a tiny op (a
        # launch the step is bound by) does not size it.
        sized_members = [c for c in run if not tiny(c)] or run
        return max(sized_members[-2:], key=lambda c: traffic.get(c, 0.0) or 0.0)

    def sized(run: list[int], launch: int) -> bool:
        anchor = size_class(run)
        if tiny(launch) or tiny(anchor) or comparable(anchor, launch):
            return True
        # A much smaller op is a side input when the op after it is of the run's size again
        # (gather, small gather, add of the two); a much larger one starts something else.
        following = after.get(launch)
        smaller = (traffic.get(launch, np.nan) or 0.0) < (traffic.get(anchor, np.nan) or 0.0)
        return (smaller and following is not None and member(following)
                and comparable(anchor, following))

    chains = _runs(
        busy_launches,
        starts=member,
        continues=lambda run, launch: (member(launch) or reduction_of(run, launch))
        and _same_region(rows[run[-1]], rows[launch]) is not False
        and not _forward_then_backward(rows[run[-1]], rows[launch])
        and sized(run, launch),
    )
    chains = _with_scalar_ops(chains, launches, rows, lambda c: idle(c) and c not in claimed)
    findings = []
    times = launch_times(launches)
    ops_of = {c: str(getattr(rows[c], "op", rows[c].short_name)) for chain in chains
              for c in chain}

    def share(chain: list[int]) -> float:
        return float(np.nansum([share_of.get(c, np.nan) for c in chain]))

    pattern_share = _pattern_shares(chains, ops_of, share_of)
    for chain in chains:
        total, saving = _fused_saving(chain, times)
        if not total > 0:
            continue
        ops = [ops_of[c] for c in chain]
        values = {"chain_length": float(len(chain)), "saving_pct": 100.0 * saving / total,
                  "chain_time_share_pct": share(chain),
                  "pattern_time_share_pct": pattern_share[tuple(ops)],
                  "distinct_ops": float(len(set(ops)))}
        first = {**q.loc[chain[0]].to_dict(), **values}
        findings.append(make_finding(
            rule, first, speedup_pct=values["saving_pct"], duration_ns=total,
            title_suffix=": " + _op_list(ops),
            evidence={"chain_time_ns": {"value": total, "unit": "ns",
                                        "label": "GPU time of the run of eager ops"},
                      "longest_op_ns": {"value": total - saving, "unit": "ns",
                                        "label": "its longest op (about a fused kernel's time)"}},
            kernel_ids=[int(rows[c].id) for c in chain if not pd.isna(rows[c].id)],
            launch_ids=[int(c) for c in chain]))
    return findings, []


# Kernels that name their pass: a forward op's (PyTorch's LayerNorm forward kernel says only
# layer_norm) and a backward op's.
_FORWARD = re.compile(r"forward|Forward|_fwd|_fw_|^vectorized_layer_norm_kernel|RowwiseMoments")
_BACKWARD = re.compile(r"backward|Backward|_bwd|_bw_|grad_input|GammaBeta|ComputeInternalGradients")


def _forward_then_backward(before, after) -> bool:
    """An op's forward kernel right before a backward kernel: autograd's boundary.

    The backward starts once the forward's output has a gradient; a compiler builds the two
    as separate graphs (AOTAutograd's forward and backward), so nothing fuses across.
    """
    return (bool(_FORWARD.search(str(before.short_name)))
            and not _BACKWARD.search(str(before.short_name))
            and bool(_BACKWARD.search(str(after.short_name))))


def _fill(row) -> bool:
    """A launch that writes a constant (zeros, ones, autograd's seed): it consumes nothing."""
    return "fill" in str(getattr(row, "op", "") or row.short_name).lower()


# An op on integers (PyTorch's functor<long>, CuPy's cupy_add__int64_...): a counter or an
# index setup (BatchNorm's num_batches_tracked += 1), bookkeeping beside the computation.
_INTEGER_OP = re.compile(r"Functor\w*<(?:long|int|short|bool|unsigned|int64_t|int32_t)\b"
                         r"|^cupy_\w*?__(?:u?int\d+|bool)")


def _with_scalar_ops(chains: list[list[int]], launches: pd.DataFrame, rows: dict,
                     skipped: Callable[[int], bool]) -> list[list[int]]:
    """Give each run the tiny eager ops inside it and right before it, in the same range.

    A launch with next to no work is skipped while runs are found (it neither makes nor
    breaks one), but the scalar ops of a computation (``alpha = rr / pAp``, a copy of the
    dot product's result, an index setup) sit inside or just ahead of the run that uses them
    and go away with it once it is fused. A fill consumes nothing and stays out.
    """
    if not chains:
        return chains
    order = launches.sort_values(["source", "launch"])["launch"].astype(int).tolist()
    at = {launch: i for i, launch in enumerate(order)}

    def scalar(launch: int, anchor: int) -> bool:
        row = rows[launch]
        return (skipped(launch) and not _fill(row) and not _INTEGER_OP.search(str(row.name))
                and _same_stream(rows[anchor], row)
                and _same_region(rows[anchor], row) is not False)

    out = []
    for chain in chains:
        first, last = at[chain[0]], at[chain[-1]]
        inside = [c for c in order[first + 1:last] if c not in chain and scalar(c, chain[0])]
        before = []
        i = first - 1
        # Ahead of a run only a map (a scalar's divide or copy): a reduction there ends
        # the work before it (a bias gradient's sum after its GEMM).
        while (i >= 0 and scalar(order[i], chain[0])
               and getattr(rows[order[i]], "role", None) == "elementwise"):
            before.insert(0, order[i])
            i -= 1
        out.append(sorted(before + inside + chain, key=at.__getitem__))
    return out


def _traffic_bytes(q: pd.DataFrame) -> dict[int, float]:
    """Each launch's traffic through L2, in units of the L2's peak-nanoseconds.

    The L2 throughput share times the duration: every export form has both (a details page
    lacks the L2 byte counters), so the raw page and the details page of one capture size
    the ops alike. Within one GPU it is proportional to the bytes (on the H200's corpus,
    l2_bytes / (l2_pct x duration) is within 20% of its median for half the launches),
    which is all a ratio of two launches needs.
    """
    if "l2_pct" not in q or "duration_ns" not in q:
        return {}
    return (q["l2_pct"] * q["duration_ns"]).to_dict()


def _fused_saving(run: list[int], times: dict[int, float]) -> tuple[float, float]:
    """A run's GPU time, and what fusing it saves: all but its longest launch's time."""
    durations = np.array([times[c] for c in run], dtype="float64")
    total = float(np.nansum(durations))
    return total, (total - float(np.nanmax(durations)) if total > 0 else 0.0)


def _pattern_shares(runs: list[list[int]], ops_of: dict[int, str],
                    share_of: dict) -> dict[tuple[str, ...], float]:
    """The summed time share of each distinct op sequence among the runs.

    The same run of ops again (one per layer, time step or training step) is one pattern to
    the change that removes it: its repeats' time is at stake together.
    """
    out: dict[tuple[str, ...], float] = {}
    for run in runs:
        key = tuple(ops_of[c] for c in run)
        out[key] = out.get(key, 0.0) + float(np.nansum([share_of.get(c, np.nan) for c in run]))
    return out


def _op_list(ops: list[str], most: int = 6) -> str:
    """'add -> Mul -> bfloat16_copy ...' with repeats kept in order, long lists cut."""
    shown = " -> ".join(ops[:most])
    return shown + (f" ... ({len(ops) - most} more)" if len(ops) > most else "")


MIN_WAITED_LAUNCHES = 10  # fewer cost too little to be worth a change of how work is launched


def short_launches(rule: Rule, quantities: pd.DataFrame,
                   launches: pd.DataFrame) -> tuple[list[Finding], list[NotEvaluated]]:
    """Name the launches the GPU waits for because the host issues them slower than they run.

    ncu serializes launches and cannot show the gaps; the launch order and durations can,
    through a queue model of the host (:mod:`~ncu_advisor.derive.host_timeline`): long kernels
    let the host run ahead, a stretch of short ones drains the queue and the GPU waits. CUDA
    graphs (or torch.compile's reduce-overhead mode, which uses them) launch the sequence at
    once; fewer, larger launches (batching, fusion) do it by hand.
    """
    timeline = host_timeline(launches)
    if timeline is None:  # a per-kernel summary: no launch order to model
        return [], []
    calls = launches["invocations"].fillna(1).to_numpy(dtype="float64")
    known = ~launches["duration_ns"].isna().to_numpy()
    count = float(calls[known].sum())
    bound = timeline.bound.reindex(launches["launch"].astype(int)).fillna(0).to_numpy()
    waited_count = float(bound.sum())
    if count == 0 or waited_count < MIN_WAITED_LAUNCHES:
        return [], []
    gpu, idle = timeline.gpu_ns, timeline.idle_ns
    values = {"waited_launches": waited_count, "launch_count": count,
              "idle_pct": timeline.idle_pct, "host_launch_us": timeline.launch_ns / 1e3}
    ids = launches["id"].to_numpy()
    touched = bound > 0
    # The saving is the GPU's idle time: a share of the step's modelled time (GPU + idle).
    findings = [make_finding(
        rule, values, duration_ns=gpu + idle,
        speedup_pct=100.0 * idle / (gpu + idle) if gpu + idle else None,
        evidence={"waited_launches": {"value": waited_count, "unit": "",
                                      "label": "launches bound by launching"},
                  "launch_count": {"value": count, "unit": "", "label": "launches"},
                  "idle_ns": {"value": idle, "unit": "ns",
                              "label": "GPU idle while the host launches (model)"}},
        kernel_ids=[int(i) for i, s in zip(ids, touched, strict=True) if s and not pd.isna(i)],
        launch_ids=[int(n) for n, s in zip(launches["launch"], touched, strict=True) if s])]
    return findings, []


def layout_conversions(rule: Rule, quantities: pd.DataFrame,
                       launches: pd.DataFrame) -> tuple[list[Finding], list[NotEvaluated]]:
    """Name the memory-format conversions a library runs around its kernels.

    cuDNN computes convolutions in NHWC: given NCHW tensors it converts them before and
    after (``nchwToNhwcKernel``, ``nhwcToNchwKernel``), a full pass over each activation,
    every call. Keeping the model in channels_last removes them.
    """
    rows = [r for r in launches.itertuples(index=False)
            if getattr(r, "role", None) == "layout" and bool(getattr(r, "origin_library", False))]
    if len(rows) < 2:
        return [], []
    share_of = quantities["time_share_pct"].to_dict()
    calls = [float(getattr(r, "invocations", 1) or 1) for r in rows]
    total = float(np.nansum([r.duration_ns * c for r, c in zip(rows, calls, strict=True)]))
    values = {"conversions": float(sum(calls)),
              "conversion_time_share_pct": float(np.nansum([share_of.get(int(r.launch), np.nan)
                                                            for r in rows]))}
    return [make_finding(
        rule, values, duration_ns=total, speedup_pct=100.0,
        evidence={"conversion_ns": {"value": total, "unit": "ns",
                                    "label": "GPU time of the layout conversions"}},
        kernel_ids=[int(r.id) for r in rows if not pd.isna(r.id)],
        launch_ids=[int(r.launch) for r in rows])], []


_CONCAT = re.compile(r"CatArrayBatchedCopy|concatenate", re.IGNORECASE)
# A concatenation that moves this many times the traffic of the launch that made its new part
# mostly copies what was already there: a tensor grown by one piece per call.
_GROWTH = 10.0


def growing_concats(quantities: pd.DataFrame, launches: pd.DataFrame) -> list[list[int]]:
    """The concatenations that grow a tensor, as runs (a KV cache's K and V cats together).

    ``torch.cat([cache, new])`` copies the whole cache to append ``new``: its traffic dwarfs
    that of the op that produced ``new`` (a projection GEMM), where a concatenation of parts
    of one size (a U-Net skip, q/k/v stacking) moves about what its producer moved. A
    concatenation right after a growing one, of about its size, is the same update.
    """
    if _summary_only(launches):
        return []
    traffic = _traffic_bytes(quantities)
    if not traffic:
        return []
    runs: list[list[int]] = []
    producer = previous = None  # the last launch that was not a concatenation; the last one
    for r in launches.sort_values(["source", "launch"]).itertuples(index=False):
        launch = int(r.launch)
        if not _CONCAT.search(str(r.name)):
            producer = previous = launch
            continue
        mine = traffic.get(launch, np.nan)
        if runs and runs[-1][-1] == previous and 0.5 <= mine / traffic[previous] <= 2.0:
            runs[-1].append(launch)
        elif producer is not None and mine >= _GROWTH * (traffic.get(producer) or np.inf):
            runs.append([launch])
        previous = launch
    return runs


def growing_concat(rule: Rule, quantities: pd.DataFrame,
                   launches: pd.DataFrame) -> tuple[list[Finding], list[NotEvaluated]]:
    """One finding for the concatenations that copy a growing tensor (see growing_concats)."""
    members = [c for run in growing_concats(quantities, launches) for c in run]
    # Written in place, each update moves only its new part: nearly all of the time goes.
    return _one_finding_over(rule, quantities, launches, members, ("concatenations",
                             "concat_time_share_pct"), 90.0,
                             ("concat_ns", "GPU time of the growing concatenations")), []


def _one_finding_over(rule: Rule, quantities: pd.DataFrame, launches: pd.DataFrame,
                      members: list[int], names: tuple[str, str], speedup_pct: float,
                      evidence: tuple[str, str]) -> list[Finding]:
    """One finding for a set of launches one change removes (none for an empty set).

    ``names``: the values for the member count and their share of the GPU time; ``evidence``:
    the name and label of their summed time.
    """
    if not members:
        return []
    times = launch_times(launches)
    share_of = quantities["time_share_pct"].to_dict()
    ids_of = dict(zip(launches["launch"].astype(int), launches["id"], strict=True))
    total = float(np.nansum([times.get(c, np.nan) for c in members]))
    values = {names[0]: float(len(members)),
              names[1]: float(np.nansum([share_of.get(c, np.nan) for c in members]))}
    return [make_finding(
        rule, values, duration_ns=total, speedup_pct=speedup_pct,
        evidence={evidence[0]: {"value": total, "unit": "ns", "label": evidence[1]}},
        kernel_ids=[int(ids_of[c]) for c in members if not pd.isna(ids_of[c])],
        launch_ids=members)]


# Pointwise maps that keep the order of their inputs (strictly increasing): a selection of
# their output is a selection of their input. PyTorch's functor names and CuPy's ufuncs.
_MONOTONIC = re.compile(r"^(sigmoid|exp|exp2|expm1|tanh|log|log2|log10|log1p|sqrt|erf"
                        r"|launch_log_sigmoid_forward)$"
                        r"|^cupy_(exp|exp2|expm1|tanh|log|log2|log10|log1p|sqrt)__"
                        r"|^cupyx_scipy_special_(expit|ndtr|erf)__", re.IGNORECASE)
# Row-wise maps that keep each row's order: only a row's arg-max or max survives them cheaply.
_ROW_MONOTONIC = re.compile(r"softmax_warp_forward|cunn_SoftMaxForward|log_softmax|softmax",
                            re.IGNORECASE)
# Selections: top-k (PyTorch's radix select, its block and segmented sorts), sorts, and
# arg-max / max reductions.
_SELECTION = re.compile(r"mbtopk::|sbtopk::|gatherTopK|computeBlockDigitCounts|radixSelect"
                        r"|SortKVInPlace|DeviceRadixSort|DeviceSegmentedRadixSort")
_ARG_MAX = re.compile(r"ArgMaxOps|ArgMinOps|MaxOps|MinOps|cupy_(cub_)?arg(max|min)")
_SET_UP = re.compile(r"^fill|Fill|InitKernel")


def _selection_after(rows: list, at: int) -> tuple | None:
    """The selection that reads launch ``at``'s output, if the next real launch is one.

    Top-k's counter fills and CUB's scan set-up kernels (a few microseconds, no pass over the
    data) may sit in between.
    """
    for row in rows[at + 1:at + 4]:
        if _SET_UP.search(str(row.short_name)):
            continue
        name = str(row.name)
        return row if _SELECTION.search(name) or _ARG_MAX.search(name) else None
    return None


def monotonic_selections(quantities: pd.DataFrame,
                         launches: pd.DataFrame) -> list[tuple[int, int]]:
    """(map, selection) pairs: an order-keeping map whose output only feeds a selection.

    ``scores = logits.sigmoid(); scores.topk(k)`` computes the map over every element to keep
    k of them: ``logits.topk(k)`` picks the same elements, and the map of the k picks costs
    nothing. The selection must read about what the map wrote (its L2 traffic a fifth to one
    and a half times the map's, which read and wrote the tensor), so that an unrelated top-k
    after a map is not taken for one.
    """
    if _summary_only(launches):
        return []
    traffic = _traffic_bytes(quantities)
    rows = list(launches.sort_values(["source", "launch"]).itertuples(index=False))
    pairs = []
    for at, row in enumerate(rows):
        op = str(getattr(row, "op", "") or row.short_name)
        elementwise = getattr(row, "role", None) == "elementwise" and _MONOTONIC.search(op)
        row_wise = getattr(row, "role", None) in ("softmax", None) and _ROW_MONOTONIC.search(
            str(row.short_name)) and not _BACKWARD.search(str(row.name))
        if not (_eager(row) and (elementwise or row_wise)):
            continue
        chosen = _selection_after(rows, at)
        if chosen is None or (row_wise and not _ARG_MAX.search(str(chosen.name))):
            continue  # (top-k of a softmax still needs each row's normalizer)
        if (_same_stream(row, chosen) and _same_region(row, chosen) is not False
                and _reads_about(traffic, int(row.launch), int(chosen.launch), 1.5)):
            pairs.append((int(row.launch), int(chosen.launch)))
    return pairs


def monotonic_before_selection(rule: Rule, quantities: pd.DataFrame,
                               launches: pd.DataFrame) -> tuple[list[Finding], list[NotEvaluated]]:
    """One finding for the order-keeping maps computed only to select (see monotonic_selections)."""
    maps = [m for m, _ in monotonic_selections(quantities, launches)]
    # Selecting on the input removes the whole pass; the k picks' map is negligible.
    return _one_finding_over(rule, quantities, launches, maps, ("maps", "map_time_share_pct"),
                             100.0, ("map_ns", "GPU time of the maps before a selection")), []


# A bias add's L2 traffic over the activation's after it, at most (measured 1.14-1.15 on the
# corpus' Linear + bias + SiLU; 4.7-5.2 for an LSTM's gate add before a chunk's sigmoid).
_BIAS_TRAFFIC = 1.5
# Activations a GEMM's epilogue applies (PyTorch's ReLU is clamp_min, inductor names the op).
_ACTIVATION = re.compile(r"gelu|relu|silu|swish|clamp|sigmoid|tanh|mish|elu", re.IGNORECASE)


def _pointwise_after(row, other) -> bool:
    """``other`` is an eager (or inductor) pointwise forward op on ``row``'s stream and region."""
    return ((_eager(other) or getattr(other, "origin", None) == "triton-inductor")
            and getattr(other, "role", None) == "elementwise"
            and not _BACKWARD.search(str(other.name))
            and _same_stream(row, other) and _same_region(row, other) is not False)


def _calls(row) -> float:
    """How many launches a launch row stands for (1 unless a census weighed it)."""
    calls = getattr(row, "invocations", 1)
    return 1.0 if calls is None or pd.isna(calls) else float(calls)


def _epilogue_ops(gemm, following: list) -> list:
    """The launches right after a GEMM that its epilogue would apply (none if not so).

    An activation, or a bias add and then an activation: ``F.silu(x @ w + b)`` written out.
    """
    ops = []
    for row in following[:2]:
        # Rows that stand for several launches (a census-weighted profile) follow each other
        # in shape order, not launch order: only one standing for as many launches as the
        # GEMM's can be its epilogue.
        if not _pointwise_after(gemm, row) or _calls(row) != _calls(gemm):
            break
        op = str(getattr(row, "op", "") or row.short_name)
        if _ACTIVATION.search(op):
            return [*ops, row]
        if ops or op.lower() != "add":  # only a first, bias add may come before it
            break
        ops.append(row)
    return []


def gemm_epilogue(rule: Rule, quantities: pd.DataFrame,
                  launches: pd.DataFrame) -> tuple[list[Finding], list[NotEvaluated]]:
    """Find a GEMM whose output the next launches only pass through a bias add or activation.

    ``F.gelu(linear(x))`` eagerly is two passes: the GEMM writes its output and a pointwise
    kernel reads it back to write the activation; ``F.silu(x @ w + b)`` is three. In the
    GEMM's epilogue (cuBLASLt's BIAS/GELU/RELU epilogues, a Triton GEMM template under
    ``torch.compile(mode="max-autotune")``, the user's own GEMM kernel) they cost next to
    nothing: the saving is their launches. Passes under 5 us together are launch overhead, not
    passes (the launch-overhead rule's), and backward kernels are no epilogue. A bias add alone
    is left to the eager-chain rule (it may be a residual add, which inductor fuses too).
    """
    if _summary_only(launches):
        return [], []
    rows = list(launches.sort_values(["source", "launch"]).itertuples(index=False))
    times = launch_times(launches)
    share_of = quantities["time_share_pct"].to_dict()
    traffic = _traffic_bytes(quantities)
    groups = []
    for at, gemm in enumerate(rows):
        if getattr(gemm, "role", None) != "matmul":
            continue
        ops = [int(r.launch) for r in _epilogue_ops(gemm, rows[at + 1:at + 3])]
        if not ops:
            continue
        # A bias add moves what the activation after it moves (reads and writes one tensor);
        # an add of two full tensors (an LSTM's input and recurrent projections, then a
        # sigmoid of one gate's chunk) moves several times more: not a bias.
        if len(ops) == 2 and not (traffic.get(ops[0], np.nan)
                                  <= _BIAS_TRAFFIC * traffic.get(ops[1], np.nan)):
            continue
        if float(np.nansum([times.get(o, np.nan) for o in ops])) >= SHORT_LAUNCH_NS:
            groups.append((int(gemm.launch), ops))
    if not groups:
        return [], []
    # One change (an epilogue) for every such GEMM: their passes' time is at stake together.
    at_stake = float(np.nansum([share_of.get(o, np.nan) for _, ops in groups for o in ops]))
    ids_of = dict(zip(launches["launch"].astype(int), launches["id"], strict=True))
    findings = []
    for g, ops in groups:
        passes = float(np.nansum([times.get(o, np.nan) for o in ops]))
        total = passes + float(times.get(g, 0.0) or 0.0)
        values = {"activation_time_share_pct": float(np.nansum([share_of.get(o, np.nan)
                                                                for o in ops])),
                  "epilogue_time_share_pct": at_stake}
        findings.append(make_finding(
            rule, values, duration_ns=total,
            speedup_pct=100.0 * passes / total if total > 0 else None,
            evidence={"activation_ns": {"value": passes, "unit": "ns",
                                        "label": "GPU time of the separate bias/activation "
                                                 "passes"}},
            kernel_ids=[int(ids_of[c]) for c in (g, *ops) if not pd.isna(ids_of[c])],
            launch_ids=[g, *ops]))
    return findings, []


_SOFTMAX = re.compile(r"softmax", re.IGNORECASE)
_COPY_OPS = {"direct_copy", "copy", "contiguous"}
_ATTENTION_REACH = 8  # launches between a GEMM and the softmax: scale, mask, dropout, casts


def unfused_attention(rule: Rule, quantities: pd.DataFrame,
                      launches: pd.DataFrame) -> tuple[list[Finding], list[NotEvaluated]]:
    """Find attention written out as matmul -> scale/mask -> softmax -> dropout -> matmul.

    The signature is in the op order of one stream: a softmax (or its backward; an eager
    framework's, or the user's own kernel between library matmuls) with library GEMMs on both
    sides and only eager elementwise ops (scale, mask, dropout, casts, copies)
    between them; the layout copies that feed the first GEMMs and follow the last are part of
    it (the head split and merge). Fused attention (F.scaled_dot_product_attention) runs the
    same GEMMs without materializing the T x T scores: the estimate is the pattern's time
    minus its GEMMs'.
    """
    if _summary_only(launches):
        return [], []
    ordered = launches.sort_values(["source", "launch"])
    rows = list(ordered.itertuples(index=False))

    def softmax(r) -> bool:  # an eager framework's softmax, or the user's own (a Triton one)
        return ((_eager(r) or getattr(r, "origin", None) == "user")
                and bool(_SOFTMAX.search(str(r.short_name))))

    if not any(softmax(r) for r in rows):
        return [], []

    def gemm(r) -> bool:
        return getattr(r, "role", None) == "matmul" and bool(getattr(r, "origin_library", False))

    def between(r) -> bool:  # what eager attention runs between its GEMMs and the softmax
        return _eager(r) and (getattr(r, "role", None) == "elementwise"
                              or "dropout" in str(r.short_name).lower())

    def copy(r) -> bool:
        return _eager(r) and str(getattr(r, "op", "")) in _COPY_OPS

    def linked(a, b) -> bool:
        return _same_stream(a, b) and _same_region(a, b) is not False

    def reach(i: int, step: int) -> int | None:
        """The GEMM nearest to the softmax at i going one way, over elementwise ops only."""
        j = i + step
        for _ in range(_ATTENTION_REACH):
            if not 0 <= j < len(rows) or not linked(rows[j - step], rows[j]):
                return None
            if gemm(rows[j]):
                return j
            if not between(rows[j]):
                return None
            j += step
        return None

    def extend(j: int, step: int, test, most: int) -> int:
        for _ in range(most):
            k = j + step
            if not 0 <= k < len(rows) or not linked(rows[j], rows[k]) or not test(rows[k]):
                break
            j = k
        return j

    spans: list[tuple[int, int]] = []
    for i, r in enumerate(rows):
        if not softmax(r):
            continue
        first, last = reach(i, -1), reach(i, +1)
        if first is None or last is None:
            continue
        # The backward runs two GEMMs on each side (grads of both operands); the forward
        # runs one, and the GEMM after it is the output projection, not attention.
        if "backward" in str(r.short_name).lower():
            first, last = extend(first, -1, gemm, 1), extend(last, +1, gemm, 1)
        first, last = extend(first, -1, copy, 3), extend(last, +1, copy, 3)
        if spans and first <= spans[-1][1]:
            continue
        spans.append((first, last))

    findings = []
    times = launch_times(launches)
    share_of = quantities["time_share_pct"].to_dict()
    for first, last in spans:
        members = rows[first:last + 1]
        ids = [int(m.launch) for m in members]
        total = float(np.nansum([times[n] for n in ids]))
        gemms = float(np.nansum([times[int(m.launch)] for m in members if gemm(m)]))
        if not total > 0:
            continue
        values = {"attention_ops": float(len(ids)),
                  "attention_time_share_pct": float(np.nansum([share_of.get(n, np.nan)
                                                               for n in ids])),
                  "saving_pct": 100.0 * (total - gemms) / total}
        findings.append(make_finding(
            rule, values, duration_ns=total, speedup_pct=values["saving_pct"],
            title_suffix=": " + _op_list(
                ["matmul" if gemm(m) else str(getattr(m, "op", m.short_name)) for m in members],
                most=12),
            evidence={"attention_ns": {"value": total, "unit": "ns",
                                       "label": "GPU time of the unfused attention"},
                      "gemm_ns": {"value": gemms, "unit": "ns",
                                  "label": "its GEMMs (about what fused attention keeps)"}},
            kernel_ids=[int(m.id) for m in members if not pd.isna(m.id)],
            launch_ids=ids))
    return findings, []


# What an optimizer step launches when it is not fused: PyTorch's multi-tensor kernels (the
# foreach path, one launch per operation over all parameters) or, per parameter, the update's
# eager ops (Adam: lerp/mul, addcmul, sqrt, add, addcdiv). fused=True runs one kernel.
_FOREACH = re.compile(r"multi_tensor_apply_kernel")
_FUSED_OPTIMIZER = re.compile(r"Fused\w*(Adam|Optimizer|SGD|Adagrad)|fused_adam", re.IGNORECASE)
_UPDATE_OPS = {"lerp_scalar", "lerp", "addcmul", "addcdiv"}
# The per-parameter update needs these ops at least this many times to be told from one
# addcmul in a model's forward pass.
_MIN_UPDATE_OPS = 4


def _optimizer_launches(launches: pd.DataFrame) -> list[list[int]]:
    """The launches of unfused optimizer steps, as runs in launch order (one per step).

    A run starts at the first update op (or multi-tensor kernel) and ends at the last one
    before a launch that is neither an eager elementwise op nor an update (a GEMM: the next
    forward pass); the eager ops in between (mul, sqrt, add) belong to the update.
    """
    if _summary_only(launches):
        return []
    runs: list[list[int]] = []
    current: list[int] = []
    updates = 0
    prev = None

    def close():
        nonlocal current, updates
        while current and not update(rows[current[-1]]):
            current.pop()  # trailing ops after the last update are the next step's
        if current and updates >= _MIN_UPDATE_OPS:
            runs.append(current)
        current, updates = [], 0

    def update(row) -> bool:
        name = str(row.name)
        return ((_FOREACH.search(name) is not None and _FUSED_OPTIMIZER.search(name) is None)
                or str(getattr(row, "op", "")) in _UPDATE_OPS)

    ordered = launches.sort_values(["source", "launch"])
    rows = {int(r.launch): r for r in ordered.itertuples(index=False)}
    for launch, row in rows.items():
        same = prev is not None and _same_stream(prev, row)
        if update(row) and _eager(row):
            if not same:
                close()
            current.append(launch)
            updates += 1
        elif current and same and _eager(row) and getattr(row, "role", None) == "elementwise":
            current.append(launch)
        else:
            close()
        prev = row
    close()
    return runs


def unfused_optimizer(rule: Rule, quantities: pd.DataFrame,
                      launches: pd.DataFrame) -> tuple[list[Finding], list[NotEvaluated]]:
    """Find optimizer steps run as many launches: per-parameter eager ops or foreach kernels.

    Each unfused update is a pass over parameters, gradients and optimizer state; the fused
    optimizer (``fused=True``) reads and writes each once in one kernel per parameter group.
    The estimate is the run's time minus its longest launch.
    """
    runs = _optimizer_launches(launches)
    if not runs:
        return [], []
    times = launch_times(launches)
    share_of = quantities["time_share_pct"].to_dict()
    ids_of = dict(zip(launches["launch"].astype(int), launches["id"], strict=True))
    ops_of = dict(zip(launches["launch"].astype(int),
                      launches["op"] if "op" in launches else launches["short_name"],
                      strict=True))
    pattern_share = _pattern_shares(runs, ops_of, share_of)
    findings = []
    for run in runs:
        total, saving = _fused_saving(run, times)
        if not total > 0:
            continue
        values = {"update_launches": float(len(run)), "saving_pct": 100.0 * saving / total,
                  "optimizer_time_share_pct": float(np.nansum([share_of.get(c, np.nan)
                                                               for c in run])),
                  "pattern_time_share_pct": pattern_share[tuple(ops_of[c] for c in run)]}
        findings.append(make_finding(
            rule, values, speedup_pct=values["saving_pct"], duration_ns=total,
            evidence={"optimizer_ns": {"value": total, "unit": "ns",
                                       "label": "GPU time of the optimizer's launches"},
                      "update_launches": {"value": float(len(run)), "unit": "",
                                          "label": "launches of the update"}},
            kernel_ids=[int(ids_of[c]) for c in run if not pd.isna(ids_of[c])],
            launch_ids=[int(c) for c in run]))
    return findings, []


def hot_spots(rule: Rule, quantities: pd.DataFrame,
              launches: pd.DataFrame) -> tuple[list[Finding], list[NotEvaluated]]:
    """Name the kernels (grouped by name) that take at least 20% of the GPU time."""
    if launches["short_name"].nunique() < 2:
        return [], []
    share_of = quantities["time_share_pct"].reindex(launches["launch"]).to_numpy()
    by_name = launches.assign(share=share_of).groupby("short_name", sort=False).agg(
        share=("share", "sum"), ids=("id", list), launch_ids=("launch", list),
        count=("launch", "size"))
    findings = []
    for name, row in by_name.sort_values("share", ascending=False).iterrows():
        share = float(row["share"])
        if share < 20.0:
            break
        values = {"time_share_pct": share, "launch_count": float(row["count"])}
        findings.append(make_finding(
            rule, values, title_prefix=f"{name}: ",
            evidence={"time_share_pct": {"value": share, "unit": "%",
                                         "label": "share of total GPU time"},
                      "launches": {"value": float(row["count"]), "unit": "",
                                   "label": "launches of this kernel"}},
            kernel_ids=[int(i) for i in row["ids"] if not pd.isna(i)],
            launch_ids=[int(i) for i in row["launch_ids"]]))
    return findings, []


# A user kernel launched at least this many times, each launch on under PIECE_WAVES waves,
# runs its work piece by piece (one launch per expert, head, chunk or tile row).
MIN_PIECES = 4
PIECE_WAVES = 2.0
# The pieces' time per wave within this factor: the same job cut in pieces, each bound by its
# waves. Launches whose time does not follow their waves (a BFS level that walks one hub's
# edges for milliseconds on one block) are limited by something else.
PIECE_SPREAD = 3.0


def piecewise_launches(rule: Rule, quantities: pd.DataFrame,
                       launches: pd.DataFrame) -> tuple[list[Finding], list[NotEvaluated]]:
    """Name a user kernel that runs its work as many launches of a wave or two each.

    Each launch ends on a partly filled last wave (or never fills one), so the GPU idles for
    part of every launch; one launch over all the pieces (a grouped GEMM with a device-side
    tile schedule, a batched grid, a persistent kernel walking a work list) fills the waves
    of all of them together: its time is about the pieces' summed waves, rounded up once, at
    their time per wave.
    """
    if _summary_only(launches) or "waves_per_sm" not in quantities or "short_name" not in launches:
        return [], []
    waves_of = quantities["waves_per_sm"].to_dict()
    share_of = quantities["time_share_pct"].to_dict()
    user = launches[launches["origin"].eq("user")] if "origin" in launches else launches.iloc[:0]
    findings = []
    for _, rows in user.groupby("short_name", sort=False):
        members = [int(c) for c in rows["launch"]]
        waves = np.array([waves_of.get(c, np.nan) for c in members], dtype="float64")
        ns = rows["duration_ns"].to_numpy(dtype="float64")
        piece = (waves > 0) & (waves < PIECE_WAVES) & (ns > 0)
        if piece.sum() < MIN_PIECES:
            continue
        members = [c for c, k in zip(members, piece, strict=True) if k]
        waves, ns = waves[piece], ns[piece]
        per_wave = ns / np.ceil(waves)
        if per_wave.max() > PIECE_SPREAD * per_wave.min():
            continue
        together = np.ceil(waves.sum()) * float(np.median(per_wave))
        saving = float(ns.sum()) - together
        if saving <= 0:
            continue
        # The run's share of the pieces, as every rule counts it (invocations, unprofiled time).
        share = float(np.nansum([share_of.get(c, np.nan) for c in members]))
        values = {"pieces": float(len(members)), "piece_waves_min": float(waves.min()),
                  "piece_waves_max": float(waves.max()), "pieces_time_share_pct": share,
                  "saving_share_pct": share * saving / float(ns.sum()),
                  "together_waves": float(np.ceil(waves.sum()))}
        ids_of = dict(zip(rows["launch"].astype(int), rows["id"], strict=True))
        findings.append(make_finding(
            rule, values, duration_ns=float(ns.sum()), speedup_pct=100.0 * saving / ns.sum(),
            title_prefix=f"{rows['short_name'].iloc[0]}: ",
            evidence={"pieces_ns": {"value": float(ns.sum()), "unit": "ns",
                                    "label": "GPU time of the pieces"},
                      "together_ns": {"value": together, "unit": "ns",
                                      "label": "one launch over all pieces (model)"}},
            kernel_ids=[int(ids_of[c]) for c in members if not pd.isna(ids_of[c])],
            launch_ids=members))
    return findings, []


# Inference BatchNorm by name: cuDNN's inference kernel, or PyTorch's native path, which
# computes 1/sqrt(running_var + eps) in its own launch before the transform (training
# computes batch statistics there instead: batch_norm_collect_statistics).
_BN_INFERENCE = re.compile(r"bn_fw_inf")
_BN_INVSTD = re.compile(r"batch_norm_calc_invstd")
_BN_TRANSFORM = re.compile(r"batch_norm_transform_input")
_BN_REACH = 4  # launches between the convolution or GEMM and its BatchNorm (layout copies)
_BN_PREP_NS = SHORT_LAUNCH_NS  # a prep launch of the native path: a one-block copy or cast


def _eval_batchnorms(launches: pd.DataFrame) -> list[list[int]]:
    """Each inference BatchNorm's launches (prep, inverse std, transform), in launch order.

    Only where a convolution or GEMM runs just before it: the layer it folds into.
    """
    rows = launches.to_dict("records")
    names = [str(r.get("name", "")) for r in rows]
    roles = [r.get("role") for r in rows]
    runs = []
    for i, name in enumerate(names):
        if _BN_INFERENCE.search(name):
            run = [i]
        elif _BN_TRANSFORM.search(name) and i > 0 and _BN_INVSTD.search(names[i - 1]):
            run = [i - 1, i]
            before = i - 2  # the native path's one-block copy of the statistics, if any
            if (before >= 0 and roles[before] == "elementwise"
                    and rows[before].get("duration_ns", np.inf) < _BN_PREP_NS
                    and rows[before].get("grid_x", 0) * rows[before].get("grid_y", 1) <= 4):
                run.insert(0, before)
        else:
            continue
        start = run[0]
        if any(roles[j] == "matmul" for j in range(max(0, start - _BN_REACH), start)):
            runs.append([int(rows[j]["launch"]) for j in run])
    return runs


def eval_batchnorm(rule: Rule, quantities: pd.DataFrame,
                   launches: pd.DataFrame) -> tuple[list[Finding], list[NotEvaluated]]:
    """Name inference BatchNorms that run as their own passes after a convolution or GEMM.

    In eval mode a BatchNorm is a fixed per-channel scale and shift: folded into the weights
    and bias of the layer before it, it costs nothing. Each one left in reads and writes the
    whole activation once more (and the native path adds small launches of its own); the
    saving is all of their time.
    """
    if _summary_only(launches) or "role" not in launches:
        return [], []
    runs = _eval_batchnorms(launches)
    if not runs:
        return [], []
    times = launch_times(launches)
    share_of = quantities["time_share_pct"].to_dict()
    members = [c for run in runs for c in run]
    total = float(np.nansum([times.get(c, np.nan) for c in members]))
    if not total > 0:
        return [], []
    ids_of = dict(zip(launches["launch"].astype(int), launches["id"], strict=True))
    share = float(np.nansum([share_of.get(c, np.nan) for c in members]))
    values = {"batchnorms": float(len(runs)), "batchnorm_time_share_pct": share,
              "batchnorm_launches": float(len(members))}
    finding = make_finding(
        rule, values, speedup_pct=100.0, duration_ns=total,
        evidence={"batchnorm_ns": {"value": total, "unit": "ns",
                                   "label": "GPU time of the inference BatchNorms"}},
        kernel_ids=[int(ids_of[c]) for c in members if not pd.isna(ids_of[c])],
        launch_ids=members)
    return [finding], []


# The values each function gives a rule's title and texts besides the quantities.
FUNCTION_VALUES: dict[str, set[str]] = {
    # chain_in_one_range: 1 when every kernel of the chain runs inside one NVTX range.
    "fusion_chain": {"chain_length", "saving_pct", "traffic_ratio", "chain_in_one_range"},
    "multi_pass": {"passes", "saving_pct", "read_multiple"},
    "hot_spots": {"time_share_pct", "launch_count"},
    "eager_chain": {"chain_length", "saving_pct", "chain_time_share_pct",
                    "pattern_time_share_pct", "distinct_ops"},
    "short_launches": {"waited_launches", "launch_count", "idle_pct", "host_launch_us"},
    "layout_conversions": {"conversions", "conversion_time_share_pct"},
    "unfused_attention": {"attention_ops", "attention_time_share_pct", "saving_pct"},
    "growing_concat": {"concatenations", "concat_time_share_pct"},
    "gemm_epilogue": {"activation_time_share_pct", "epilogue_time_share_pct"},
    "monotonic_before_selection": {"maps", "map_time_share_pct"},
    "eval_batchnorm": {"batchnorms", "batchnorm_time_share_pct", "batchnorm_launches"},
    "unfused_optimizer": {"update_launches", "saving_pct", "optimizer_time_share_pct",
                          "pattern_time_share_pct"},
    "piecewise_launches": {"pieces", "piece_waves_min", "piece_waves_max",
                           "pieces_time_share_pct", "saving_share_pct", "together_waves"},
}
FUNCTIONS: dict[str, RuleFunction] = {
    "fusion_chain": fusion_chain,
    "multi_pass": multi_pass,
    "hot_spots": hot_spots,
    "eager_chain": eager_chain,
    "short_launches": short_launches,
    "layout_conversions": layout_conversions,
    "unfused_attention": unfused_attention,
    "growing_concat": growing_concat,
    "gemm_epilogue": gemm_epilogue,
    "monotonic_before_selection": monotonic_before_selection,
    "eval_batchnorm": eval_batchnorm,
    "unfused_optimizer": unfused_optimizer,
    "piecewise_launches": piecewise_launches,
}
