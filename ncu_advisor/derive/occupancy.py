"""A pure-Python CUDA occupancy calculator that reproduces Nsight Compute's Occupancy section.

The arithmetic follows NVIDIA's CUDA Occupancy Calculator (``cuda_occupancy.h``): a block's
resources are rounded up to their allocation units, each resource gives a block limit per SM,
and the smallest limit is the number of resident blocks.  What ``cuda_occupancy.h`` leaves out
is the shared-memory carveout the driver actually picks for a launch (Nsight Compute reports it
as ``launch__shared_mem_config_size`` and divides by it for ``Block Limit Shared Mem``); when
that is not known, :func:`predict_shared_mem_config` gives the driver's choice as measured on
an H200 (see ``docs/occupancy.md``).

Quantities (all per SM):

* ``registers`` limit = warps that fit in one sub-partition's register file
  (``registers_per_sm / sub_partitions`` over the registers a warp is allocated, rounded down)
  x ``sub_partitions`` / warps per block.
* ``shared_mem`` limit = carveout / (static + dynamic + driver-reserved shared memory per
  block, rounded up to the allocation unit).
* ``warps`` limit = max warps per SM / warps per block.
* ``blocks`` limit = max resident blocks per SM.
* theoretical occupancy % = resident blocks x warps per block / max warps per SM x 100.

This module is the calculator alone (numbers in, numbers out; no Report). Reading its inputs
from a report and running it on every launch is :mod:`.occupancy_report`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from ..errors import NcuAdviseError
from .gpu_specs import KIB, ArchSpec, arch_spec

LIMIT_NAMES = ("registers", "shared_mem", "warps", "blocks")
# The Nsight Compute metric behind each block limit.
NCU_LIMIT_METRICS = {name: f"launch__occupancy_limit_{name}" for name in LIMIT_NAMES}
NCU_THEORETICAL_PCT = "sm__maximum_warps_per_active_cycle_pct"
NCU_ACHIEVED_PCT = "sm__warps_active.avg.pct_of_peak_sustained_active"
NCU_CONFIG_SIZE = "launch__shared_mem_config_size"
# The ncu metric each calculator input is read from (derive/occupancy_report.py reads them).
INPUT_METRICS = {
    "block_size": "launch__block_size",
    "registers_per_thread": "launch__registers_per_thread",
    "shared_mem_static": "launch__shared_mem_per_block_static",
    "shared_mem_dynamic": "launch__shared_mem_per_block_dynamic",
    "shared_mem_config": NCU_CONFIG_SIZE,
}

# On the H200 the driver never chose more than this carveout just to leave room for extra
# blocks (it goes higher only when the kernel's own occupancy needs it); see docs/occupancy.md.
_DRIVER_ROOM_CAP = 132 * KIB
# Warps per block at which the driver's carveout for kernels without shared memory steps down
# (H200, driver 580): below 16 warps 32 KiB, below 24 warps 16 KiB, else 8 KiB.
_NO_SMEM_STEPS = ((16, 32 * KIB), (24, 16 * KIB), (None, 8 * KIB))


@dataclass(frozen=True)
class OccupancyResult:
    """Theoretical occupancy of one launch shape on one compute capability.

    Attributes:
        cc: compute capability.
        block_size: threads per block.
        registers_per_thread: registers per thread as compiled (or as ncu reports them).
        shared_mem_per_block: static + dynamic shared memory per block requested, bytes.
        warps_per_block: warps per block (block size rounded up to whole warps).
        registers_per_warp: registers allocated per warp (rounded up to the allocation unit).
        registers_per_block: registers allocated per block.
        shared_mem_per_block_allocated: shared memory one block occupies, bytes: requested +
            driver-reserved, rounded up to the allocation unit.
        shared_mem_config: the SM's shared-memory carveout the limits were computed with.
        shared_mem_config_source: ``"given"`` (passed in, e.g. ncu's measured value) or
            ``"predicted"`` (the driver's choice as :func:`predict_shared_mem_config` models it).
        limits: block limit per resource: ``registers``, ``shared_mem``, ``warps``,
            ``blocks`` (ncu's ``launch__occupancy_limit_*``).
        limiters: the resources whose limit equals the resident blocks (ties listed).
        active_blocks_per_sm: resident blocks per SM.
        active_warps_per_sm: resident warps per SM.
        max_warps_per_sm: the architecture's warp slots per SM.
        theoretical_pct: resident warps / warp slots x 100 (ncu's Theoretical Occupancy).

    """

    cc: str
    block_size: int
    registers_per_thread: int
    shared_mem_per_block: int
    warps_per_block: int
    registers_per_warp: int
    registers_per_block: int
    shared_mem_per_block_allocated: int
    shared_mem_config: int
    shared_mem_config_source: str
    limits: dict[str, int]
    limiters: tuple[str, ...]
    active_blocks_per_sm: int
    active_warps_per_sm: int
    max_warps_per_sm: int
    theoretical_pct: float
    warnings: tuple[str, ...] = field(default=())

    @property
    def limiter(self) -> str:
        """The limiting resource(s) joined with ``+`` (``"registers+warps"`` on a tie)."""
        return "+".join(self.limiters)

    @property
    def can_launch(self) -> bool:
        """Whether at least one block fits on an SM."""
        return self.active_blocks_per_sm > 0

    def to_dict(self) -> dict:
        """Return a JSON-ready dict (``limiter`` included, tuples as lists)."""
        d = asdict(self)
        d["limiters"] = list(self.limiters)
        d["warnings"] = list(self.warnings)
        d["limiter"] = self.limiter
        return d


@dataclass(frozen=True)
class BlockSizeSuggestion:
    """What :func:`best_block_size` recommends.

    Attributes:
        block_size: the block size with the highest occupancy (the largest one on ties).
        blocks_per_sm: resident blocks per SM at that size.
        theoretical_pct: theoretical occupancy at that size.
        min_grid_size: blocks needed to fill every SM once (``blocks_per_sm x sm_count``);
            ``None`` when no SM count was given.

    """

    block_size: int
    blocks_per_sm: int
    theoretical_pct: float
    min_grid_size: int | None

    def to_dict(self) -> dict:
        """Return a JSON-ready dict."""
        return asdict(self)


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def align_carveout(spec: ArchSpec, size: int) -> int:
    """Return the smallest supported carveout that holds ``size`` bytes (the largest if none)."""
    for c in spec.shared_mem_carveouts:
        if c >= size:
            return c
    return spec.shared_mem_carveouts[-1]


def snap_carveout(spec: ArchSpec, size: float, rel_tol: float = 0.005) -> int:
    """Return ``size`` as a supported carveout when it is one up to export rounding.

    CSV exports in auto units print the config size as e.g. ``32.77 Kbyte`` (32,770 bytes);
    that is 32 KiB.  A size not near any carveout is returned unchanged (rounded to bytes).
    """
    for c in spec.shared_mem_carveouts:
        if abs(size - c) <= rel_tol * max(c, 1):
            return c
    return int(round(size))


def _registers_limit(spec: ArchSpec, warps: int, regs_per_warp: int, regs: int) -> int:
    """Blocks per SM allowed by the register file (``cuda_occupancy.h`` logic)."""
    if regs > spec.max_registers_per_thread:
        return 0
    # The hardware checks a block's registers as if its warps were spread over every
    # sub-partition, so the warp count is rounded up to the sub-partition count first.
    assumed = regs_per_warp * _round_up(warps, spec.sub_partitions)
    allocated = regs_per_warp * warps
    if max(assumed, allocated) > spec.max_registers_per_block:
        return 0
    if regs_per_warp == 0:
        return spec.max_blocks_per_sm
    warps_per_sub = (spec.registers_per_sm // spec.sub_partitions) // regs_per_warp
    return warps_per_sub * spec.sub_partitions // warps


def _shared_limit(spec: ArchSpec, smem_alloc: int, config: int, smem_requested: int) -> int:
    """Blocks per SM allowed by the shared-memory carveout."""
    per_block_max = spec.max_shared_mem_per_block_optin + spec.reserved_shared_mem_per_block
    if smem_requested > spec.max_shared_mem_per_block_optin or smem_alloc > per_block_max:
        return 0
    if smem_alloc == 0:
        # Nothing to divide: shared memory does not limit (cc 7.x without shared memory).
        return spec.max_blocks_per_sm
    return config // smem_alloc


def predict_shared_mem_config(
    spec: ArchSpec,
    block_size: int,
    blocks_other: int,
    shared_mem_per_block: int,
    preferred_carveout_pct: int | None = None,
) -> int:
    """Predict the shared-memory carveout the CUDA driver configures for a launch.

    The driver's choice is not documented; this reproduces what Nsight Compute reported for
    every launch of two probes on an H200 with driver 580 (see ``docs/occupancy.md``).  Without
    a carveout preference:

    * it never lowers occupancy: the carveout holds at least the blocks the other limits allow
      (or as many as the largest carveout holds);
    * with shared memory in use it leaves room for twice those blocks, but grows past
      132 KiB only when the occupancy itself needs it; a kernel with one block per SM gets no
      extra room, and blocks of more than 28 warps get less (``32 - warps`` blocks in all);
    * without shared memory (only the driver's reserved 1 KiB) it steps by warps per block:
      32 KiB below 16 warps, 16 KiB below 24, else 8 KiB (8 KiB too for one block per SM).

    With a preference ``p`` % (``cudaFuncAttributePreferredSharedMemoryCarveout``; the cache
    configs PreferL1 / PreferEqual / PreferShared act as 0 / 50 / 100), the driver takes
    ``p`` % of the SM's maximum, counts the blocks whose requested shared memory fits in it
    (at least one), and configures room for that many whole blocks (driver reserve included),
    or the preference aligned up, whichever is larger.  A kernel without shared memory gets
    the larger of the aligned preference and the default choice.

    Args:
        spec: the architecture.
        block_size: threads per block.
        blocks_other: blocks per SM allowed by registers, warps and the block slots.
        shared_mem_per_block: static + dynamic shared memory per block requested, bytes
            (without the driver's reserved part).
        preferred_carveout_pct: the kernel's carveout preference (0-100), ``None`` for none.

    Returns:
        The carveout in bytes, one of ``spec.shared_mem_carveouts``.

    Raises:
        NcuAdviseError: a preference outside 0-100.

    """
    largest = spec.shared_mem_carveouts[-1]
    smem_alloc = _round_up(shared_mem_per_block + spec.reserved_shared_mem_per_block,
                           spec.shared_mem_alloc_unit)
    warps = -(-block_size // spec.warp_size)
    default = _default_config(spec, warps, blocks_other, smem_alloc, shared_mem_per_block)
    if preferred_carveout_pct is None:
        return default
    if not 0 <= preferred_carveout_pct <= 100:
        raise NcuAdviseError(f"carveout preference must be 0-100 %, got {preferred_carveout_pct}")
    wanted = spec.shared_mem_per_sm * preferred_carveout_pct // 100
    if shared_mem_per_block == 0:
        return max(align_carveout(spec, wanted), default)
    # The driver counts blocks by their requested shared memory, then adds its reserve.
    blocks = max(1, wanted // shared_mem_per_block)
    return max(align_carveout(spec, wanted), align_carveout(spec, min(blocks * smem_alloc,
                                                                     largest)))


def _default_config(spec: ArchSpec, warps: int, blocks_other: int, smem_alloc: int,
                    smem_requested: int) -> int:
    """Return the driver's carveout without a preference (:func:`predict_shared_mem_config`)."""
    largest = spec.shared_mem_carveouts[-1]
    if smem_alloc <= 0 or blocks_other <= 0:
        return align_carveout(spec, max(smem_alloc, 1))
    fit = min(blocks_other, largest // smem_alloc)
    floor = align_carveout(spec, fit * smem_alloc)
    if smem_requested == 0:
        if blocks_other <= 1:
            return floor
        size = next(size for limit, size in _NO_SMEM_STEPS if limit is None or warps < limit)
        return max(floor, align_carveout(spec, size))
    room = blocks_other
    if blocks_other > 1:
        biggest_block = spec.max_threads_per_block // spec.warp_size
        room = min(2 * blocks_other, spec.max_blocks_per_sm,
                   max(blocks_other, biggest_block - warps))
    cap = min(_DRIVER_ROOM_CAP, largest)
    wanted = room * smem_alloc
    return max(floor, align_carveout(spec, wanted) if wanted <= cap else cap)


def occupancy(
    cc: str | float | tuple[int, int],
    block_size: int,
    registers_per_thread: int,
    shared_mem_per_block: int = 0,
    carveout: int | None = None,
    preferred_carveout_pct: int | None = None,
) -> OccupancyResult:
    """Compute the theoretical occupancy of a launch.

    Args:
        cc: compute capability (``"9.0"``, ``"sm_90"``, ``(9, 0)``).
        block_size: threads per block (x*y*z).
        registers_per_thread: registers per thread (``launch__registers_per_thread``).
        shared_mem_per_block: static + dynamic shared memory per block, bytes, without the
            driver's reserved part (``launch__shared_mem_per_block_static`` + ``_dynamic``).
        carveout: the SM's shared-memory configuration size in bytes when known (ncu's
            ``launch__shared_mem_config_size``); ``None`` predicts the driver's choice.
        preferred_carveout_pct: the kernel's ``cudaFuncAttributePreferredSharedMemoryCarveout``
            (0-100; PreferL1 / PreferEqual / PreferShared cache configs are 0 / 50 / 100),
            used for the prediction when ``carveout`` is ``None``.

    Returns:
        The limits, the limiter(s) and the theoretical occupancy.

    Raises:
        NcuAdviseError: unknown compute capability or a negative input.

    """
    spec = arch_spec(cc)
    block_size = int(block_size)
    regs = int(registers_per_thread)
    smem = int(shared_mem_per_block)
    if block_size <= 0 or regs < 0 or smem < 0:
        raise NcuAdviseError(
            f"block size must be > 0 and registers/shared memory >= 0 (got block size "
            f"{block_size}, {regs} registers, {smem} bytes)")
    warnings: list[str] = []
    warps = -(-block_size // spec.warp_size)
    regs_per_warp = _round_up(regs * spec.warp_size, spec.register_alloc_unit)
    smem_alloc = _round_up(smem + spec.reserved_shared_mem_per_block, spec.shared_mem_alloc_unit)

    warps_limit = spec.max_warps_per_sm // warps if block_size <= spec.max_threads_per_block else 0
    regs_limit = _registers_limit(spec, warps, regs_per_warp, regs)
    blocks_limit = spec.max_blocks_per_sm
    if block_size > spec.max_threads_per_block:
        warnings.append(f"block size {block_size} exceeds {spec.max_threads_per_block} threads")
    if regs_limit == 0:
        warnings.append(f"{regs} registers x {block_size} threads do not fit one SM")

    if carveout is None:
        other = min(regs_limit, warps_limit, blocks_limit)
        config = predict_shared_mem_config(spec, block_size, other, smem,
                                           preferred_carveout_pct)
        source = "predicted"
    else:
        config = snap_carveout(spec, float(carveout))
        source = "given"
    smem_limit = _shared_limit(spec, smem_alloc, config, smem)
    if smem_limit == 0:
        warnings.append(f"{smem_alloc} bytes of shared memory per block do not fit the "
                        f"{config}-byte carveout")

    limits = {"registers": regs_limit, "shared_mem": smem_limit, "warps": warps_limit,
              "blocks": blocks_limit}
    active = min(limits.values())
    # A resource the kernel does not use is never reported as the limiter.
    unused = {"registers"} if regs == 0 else set()
    if smem_alloc == 0:
        unused.add("shared_mem")
    limiters = tuple(k for k in LIMIT_NAMES if limits[k] == active and k not in unused)
    active_warps = active * warps
    return OccupancyResult(
        cc=spec.cc, block_size=block_size, registers_per_thread=regs,
        shared_mem_per_block=smem, warps_per_block=warps, registers_per_warp=regs_per_warp,
        registers_per_block=regs_per_warp * warps, shared_mem_per_block_allocated=smem_alloc,
        shared_mem_config=config, shared_mem_config_source=source, limits=limits,
        limiters=limiters or ("blocks",), active_blocks_per_sm=active,
        active_warps_per_sm=active_warps, max_warps_per_sm=spec.max_warps_per_sm,
        theoretical_pct=100.0 * active_warps / spec.max_warps_per_sm,
        warnings=tuple(warnings),
    )


SharedMemSpec = int | Callable[[int], int]


def best_block_size(
    cc: str | float | tuple[int, int],
    registers_per_thread: int,
    shared_mem_per_block: SharedMemSpec = 0,
    max_block: int | None = None,
    sm_count: int | None = None,
) -> BlockSizeSuggestion:
    """Suggest the block size with the highest occupancy (``cudaOccupancyMaxPotentialBlockSize``).

    Block sizes are tried from the largest down in whole warps; occupancy is compared in
    resident threads per SM and only a strictly higher value replaces the best so far, so on
    a tie the larger block wins.  The search stops early once an SM is full.

    Args:
        cc: compute capability.
        registers_per_thread: registers per thread.
        shared_mem_per_block: static + dynamic shared memory per block in bytes, or a function
            of the block size returning it (``cudaOccupancyMaxPotentialBlockSizeVariableSMem``).
        max_block: largest block size to consider (the kernel's ``maxThreadsPerBlock``);
            default: the architecture's limit.
        sm_count: SMs on the device, for ``min_grid_size``.

    Returns:
        The suggestion; ``block_size`` 0 when no block size can run.

    """
    spec = arch_spec(cc)
    limit = spec.max_threads_per_block if max_block is None else min(max_block,
                                                                     spec.max_threads_per_block)
    if limit <= 0:
        raise NcuAdviseError(f"max_block must be > 0, got {max_block}")
    best = (0, 0, 0.0)  # block size, blocks per SM, occupancy %
    best_threads = 0
    for aligned in range(_round_up(limit, spec.warp_size), 0, -spec.warp_size):
        size = min(limit, aligned)
        smem = shared_mem_per_block(size) if callable(shared_mem_per_block) else \
            shared_mem_per_block
        result = occupancy(spec.cc, size, registers_per_thread, int(smem))
        threads = size * result.active_blocks_per_sm
        if threads > best_threads:
            best_threads = threads
            best = (size, result.active_blocks_per_sm, result.theoretical_pct)
        if best_threads == spec.max_threads_per_sm:
            break
    size, blocks, pct = best
    min_grid = blocks * sm_count if sm_count is not None else None
    return BlockSizeSuggestion(block_size=size, blocks_per_sm=blocks, theoretical_pct=pct,
                               min_grid_size=min_grid)


def what_if(base: OccupancyResult, *, block_size: int | None = None,
            registers_per_thread: int | None = None, shared_mem_per_block: int | None = None,
            carveout: int | None = None) -> OccupancyResult:
    """Recompute ``base`` with some inputs changed (the driver re-picks the carveout).

    Example: ``what_if(r, registers_per_thread=r.registers_per_thread - 8)``.
    """
    return occupancy(
        base.cc,
        base.block_size if block_size is None else block_size,
        base.registers_per_thread if registers_per_thread is None else max(registers_per_thread,
                                                                           0),
        base.shared_mem_per_block if shared_mem_per_block is None else max(shared_mem_per_block,
                                                                           0),
        carveout=carveout,
    )


def fewer_registers(base: OccupancyResult, n: int = 8) -> OccupancyResult:
    """Occupancy with ``n`` fewer registers per thread (e.g. after ``__launch_bounds__``)."""
    return what_if(base, registers_per_thread=base.registers_per_thread - n)


def registers_for_more_blocks(base: OccupancyResult) -> int | None:
    """Return the largest register count that lets one more block per SM reside.

    ``None`` when registers are not what stops the next block (another limit is as low),
    or when no register count would help.
    """
    if "registers" not in base.limiters:
        return None
    target = base.active_blocks_per_sm + 1
    others = min(v for k, v in base.limits.items() if k != "registers")
    if others < target:
        return None
    for regs in range(base.registers_per_thread - 1, -1, -1):
        if what_if(base, registers_per_thread=regs).limits["registers"] >= target:
            return regs
    return None


def shared_mem_for_more_blocks(base: OccupancyResult) -> int | None:
    """Return the largest shared memory per block (bytes) that lets one more block reside.

    Uses the largest carveout (what the driver would move to).  ``None`` when shared memory
    is not what stops the next block.
    """
    if "shared_mem" not in base.limiters:
        return None
    spec = arch_spec(base.cc)
    target = base.active_blocks_per_sm + 1
    others = min(v for k, v in base.limits.items() if k != "shared_mem")
    if others < target:
        return None
    per_block = spec.shared_mem_carveouts[-1] // target
    per_block -= per_block % spec.shared_mem_alloc_unit
    usable = per_block - spec.reserved_shared_mem_per_block
    return usable if usable >= 0 else None


def check_launch_inputs(cc: str | float | tuple[int, int], block_size: int,
                        registers_per_thread: int, shared_mem_per_block: int = 0) -> ArchSpec:
    """Validate a launch description typed by a user; return the architecture's limits.

    Raises:
        NcuAdviseError: unknown compute capability, a block size outside 1..max threads per
            block, registers outside 0..max per thread, or shared memory outside 0..the
            per-block opt-in maximum.  The message is one line.

    """
    spec = arch_spec(cc)
    if not 0 < block_size <= spec.max_threads_per_block:
        raise NcuAdviseError(f"block size must be 1..{spec.max_threads_per_block} threads on "
                             f"cc {spec.cc}, got {block_size}")
    if not 0 <= registers_per_thread <= spec.max_registers_per_thread:
        raise NcuAdviseError(f"registers per thread must be 0..{spec.max_registers_per_thread}, "
                             f"got {registers_per_thread}")
    if not 0 <= shared_mem_per_block <= spec.max_shared_mem_per_block_optin:
        raise NcuAdviseError(
            f"shared memory per block must be 0..{spec.max_shared_mem_per_block_optin} bytes "
            f"on cc {spec.cc}, got {shared_mem_per_block}")
    return spec


def calculator_summary(cc: str | float | tuple[int, int], block_size: int,
                       registers_per_thread: int, shared_mem_per_block: int = 0,
                       fewer_regs: int = 8, sm_count: int | None = None) -> dict:
    """Everything the ``occupancy`` command shows, as one JSON-ready dict.

    Validates the inputs (:func:`check_launch_inputs`), computes the occupancy, the
    recommended block size for the same registers and shared memory, and the effect of
    ``fewer_regs`` fewer registers per thread.

    Returns:
        ``theoretical_pct``, ``limits``, ``limiter`` (``+``-joined), ``limiters``,
        ``recommended_block_size``, ``recommended``, ``what_if``, ``next_block`` and the
        full result under ``result``.

    """
    spec = check_launch_inputs(cc, block_size, registers_per_thread, shared_mem_per_block)
    res = occupancy(spec.cc, block_size, registers_per_thread, shared_mem_per_block)
    best = best_block_size(spec.cc, registers_per_thread, shared_mem_per_block,
                           sm_count=sm_count)
    fewer = fewer_registers(res, fewer_regs)
    return {
        "cc": spec.cc,
        "architecture": spec.architecture,
        "block_size": res.block_size,
        "registers_per_thread": res.registers_per_thread,
        "shared_mem_per_block": res.shared_mem_per_block,
        "theoretical_pct": res.theoretical_pct,
        "active_blocks_per_sm": res.active_blocks_per_sm,
        "active_warps_per_sm": res.active_warps_per_sm,
        "max_warps_per_sm": res.max_warps_per_sm,
        "limits": dict(res.limits),
        "limiter": res.limiter,
        "limiters": list(res.limiters),
        "shared_mem_config": res.shared_mem_config,
        "shared_mem_per_block_allocated": res.shared_mem_per_block_allocated,
        "registers_per_warp": res.registers_per_warp,
        "recommended_block_size": best.block_size,
        "recommended": best.to_dict(),
        "what_if": {
            "registers_per_thread": fewer.registers_per_thread,
            "theoretical_pct": fewer.theoretical_pct,
            "active_blocks_per_sm": fewer.active_blocks_per_sm,
            "limiter": fewer.limiter,
        },
        "next_block": {
            "registers_per_thread": registers_for_more_blocks(res),
            "shared_mem_per_block": shared_mem_for_more_blocks(res),
        },
        "warnings": list(res.warnings),
        "result": res.to_dict(),
    }


__all__ = [
    "LIMIT_NAMES", "NCU_LIMIT_METRICS", "BlockSizeSuggestion", "OccupancyResult",
    "align_carveout", "best_block_size", "calculator_summary", "check_launch_inputs",
    "fewer_registers", "occupancy", "predict_shared_mem_config", "registers_for_more_blocks",
    "shared_mem_for_more_blocks", "snap_carveout", "what_if",
]
