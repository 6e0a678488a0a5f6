"""Per compute capability limits that decide occupancy (no device data: SM counts, clocks).

Sources (see ``docs/occupancy.md`` for the table and what each number is checked against):

* CUDA C++ Programming Guide, "Features and Technical Specifications", table "Technical
  Specifications per Compute Capability": warps, blocks and threads per SM, registers,
  shared memory per SM and per block (opt-in), and the shared-memory capacities each
  architecture's unified L1/shared memory can be configured to (sections "Compute
  Capability 7.x / 8.x / 9.0 / 10.x / 11.0 / 12.x", "Shared Memory"). Compute
  capability 10.3 has the limits of 10.0 and 12.1 those of 12.0 (one column of the table
  each); 11.0 has 10.0's shared memory with 48 warps and 24 blocks per SM. Nsight Compute
  2025.x-2026.x profiles all of them.
* NVIDIA CCCL's ``cuda::arch_traits`` (``libcudacxx/include/cuda/__device/arch_traits.h``,
  2026): warps, blocks and shared memory per SM and the per-block opt-in of 10.0 to 12.1,
  checked against this table by ``tests/test_occupancy.py``.
* The CUDA Occupancy Calculator header ``cuda_occupancy.h`` (CUDA 13.0): register
  allocation unit and granularity, sub-partitions per SM, shared-memory allocation unit,
  the per-block shared memory the driver reserves (from CUDA 11 on, compute capability
  8.0 and later), and the carveout sizes its ``cudaOccAlignUpShmemSizeVoltaPlus`` rounds to.
* Checked against the device attributes Nsight Compute records on an H200 (cc 9.0).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ..errors import NcuAdviseError

KIB = 1024


@dataclass(frozen=True)
class ArchSpec:
    """Occupancy-relevant limits of one compute capability.

    All sizes are in bytes, all counts per SM unless the name says otherwise.

    Attributes:
        cc: compute capability, ``"major.minor"``.
        architecture: marketing name of the architecture family.
        max_warps_per_sm: resident warps per SM.
        max_blocks_per_sm: resident thread blocks per SM.
        max_threads_per_block: largest block a kernel can be launched with.
        registers_per_sm: 32-bit registers in one SM's register file.
        max_registers_per_block: registers one block may use in total.
        max_registers_per_thread: registers one thread may use (ptxas limit).
        register_alloc_unit: registers are handed out in chunks of this many per warp.
        register_alloc_granularity: the unit registers are allocated to (``"warp"``).
        sub_partitions: SM sub-partitions (SMSPs); each holds a quarter of the register
            file, so the warps that fit by registers are counted per sub-partition.
        warp_alloc_granularity: warp slots are counted in groups of this many when checking
            registers (the Occupancy Calculator spreadsheet's "warp allocation granularity").
        shared_mem_per_sm: largest shared-memory carveout of one SM.
        max_shared_mem_per_block: per-block limit without opting in (48 KiB).
        max_shared_mem_per_block_optin: per-block limit after
            ``cudaFuncSetAttribute(..., cudaFuncAttributeMaxDynamicSharedMemorySize, ...)``.
        shared_mem_alloc_unit: a block's shared memory is rounded up to a multiple of this.
        reserved_shared_mem_per_block: shared memory the CUDA driver adds to every block.
        shared_mem_carveouts: the shared-memory sizes the unified L1/shared array of an SM
            can be configured to, smallest first.
        warp_size: threads per warp.

    """

    cc: str
    architecture: str
    max_warps_per_sm: int
    max_blocks_per_sm: int
    shared_mem_per_sm: int
    max_shared_mem_per_block_optin: int
    shared_mem_alloc_unit: int
    reserved_shared_mem_per_block: int
    shared_mem_carveouts: tuple[int, ...]
    max_threads_per_block: int = 1024
    registers_per_sm: int = 64 * KIB
    max_registers_per_block: int = 64 * KIB
    max_registers_per_thread: int = 255
    register_alloc_unit: int = 256
    register_alloc_granularity: str = "warp"
    sub_partitions: int = 4
    warp_alloc_granularity: int = 4
    max_shared_mem_per_block: int = 48 * KIB
    warp_size: int = 32

    @property
    def max_threads_per_sm(self) -> int:
        """Resident threads per SM (warps x warp size)."""
        return self.max_warps_per_sm * self.warp_size

    def to_dict(self) -> dict:
        """Return the limits as a plain dict (carveouts as a list)."""
        d = asdict(self)
        d["shared_mem_carveouts"] = list(self.shared_mem_carveouts)
        d["max_threads_per_sm"] = self.max_threads_per_sm
        return d


def _kib(*sizes: int) -> tuple[int, ...]:
    return tuple(s * KIB for s in sizes)


# Carveout lists: Programming Guide, "Shared Memory" of each compute capability section;
# identical to the sizes cuda_occupancy.h (CUDA 13.0) aligns a carveout request up to.
_VOLTA_CARVEOUTS = _kib(0, 8, 16, 32, 64, 96)
_GA100_CARVEOUTS = _kib(0, 8, 16, 32, 64, 100, 132, 164)
_GA10X_CARVEOUTS = _kib(0, 8, 16, 32, 64, 100)
_HOPPER_CARVEOUTS = _kib(0, 8, 16, 32, 64, 100, 132, 164, 196, 228)

ARCH_SPECS: dict[str, ArchSpec] = {
    s.cc: s
    for s in (
        # Volta and Turing: 256-byte shared-memory unit, no driver-reserved shared memory.
        ArchSpec("7.0", "Volta", 64, 32, 96 * KIB, 96 * KIB, 256, 0, _VOLTA_CARVEOUTS),
        ArchSpec("7.2", "Volta (Xavier)", 64, 32, 96 * KIB, 96 * KIB, 256, 0,
                 _VOLTA_CARVEOUTS),
        # Turing's L1/shared array only splits 32/64 KiB of shared memory.
        ArchSpec("7.5", "Turing", 32, 16, 64 * KIB, 64 * KIB, 256, 0, _kib(32, 64)),
        # From Ampere on: 128-byte unit, 1 KiB reserved per block, per-block limit = SM - 1 KiB.
        ArchSpec("8.0", "Ampere (GA100)", 64, 32, 164 * KIB, 163 * KIB, 128, KIB,
                 _GA100_CARVEOUTS),
        ArchSpec("8.6", "Ampere (GA10x)", 48, 16, 100 * KIB, 99 * KIB, 128, KIB,
                 _GA10X_CARVEOUTS),
        ArchSpec("8.7", "Ampere (Orin)", 48, 16, 164 * KIB, 163 * KIB, 128, KIB,
                 _GA100_CARVEOUTS),
        ArchSpec("8.9", "Ada Lovelace", 48, 24, 100 * KIB, 99 * KIB, 128, KIB,
                 _GA10X_CARVEOUTS),
        ArchSpec("9.0", "Hopper", 64, 32, 228 * KIB, 227 * KIB, 128, KIB, _HOPPER_CARVEOUTS),
        ArchSpec("10.0", "Blackwell (datacenter)", 64, 32, 228 * KIB, 227 * KIB, 128, KIB,
                 _HOPPER_CARVEOUTS),
        # Blackwell Ultra (B300, GB300) shares 10.0's column of the Programming Guide's table.
        ArchSpec("10.3", "Blackwell Ultra", 64, 32, 228 * KIB, 227 * KIB, 128, KIB,
                 _HOPPER_CARVEOUTS),
        # Thor (10.1 before CUDA 13.0): 10.0's shared memory, but 1,536 threads (48 warps)
        # and 24 blocks per SM (NVIDIA CCCL's cuda::arch_traits<sm_110>, fixed in #6185).
        ArchSpec("11.0", "Blackwell (Thor)", 48, 24, 228 * KIB, 227 * KIB, 128, KIB,
                 _HOPPER_CARVEOUTS),
        # cuda_occupancy.h (CUDA 13.0) gives 24 resident blocks per SM for every 12.x part.
        ArchSpec("12.0", "Blackwell (GeForce)", 48, 24, 100 * KIB, 99 * KIB, 128, KIB,
                 _GA10X_CARVEOUTS),
        # GB10 (DGX Spark): the 12.x column, as 12.0.
        ArchSpec("12.1", "Blackwell (GB10)", 48, 24, 100 * KIB, 99 * KIB, 128, KIB,
                 _GA10X_CARVEOUTS),
    )
}


def normalize_cc(cc: str | float | int | tuple[int, int]) -> str:
    """Return a compute capability as ``"major.minor"``.

    Accepts ``"9.0"``, ``"9"``, ``"sm_90"``, ``"90"``, ``9.0``, ``(9, 0)`` and ``"12.0"``.

    Raises:
        NcuAdviseError: the text is not a compute capability.

    """
    if isinstance(cc, tuple):
        return f"{int(cc[0])}.{int(cc[1])}"
    text = str(cc).strip().lower().removeprefix("sm_").removeprefix("sm").removeprefix("compute_")
    if "." in text:
        major, _, minor = text.partition(".")
        if major.isdigit() and minor.isdigit():
            return f"{int(major)}.{int(minor)}"
    elif text.isdigit():
        # "90" / "120" are the sm_XY spellings; a lone digit is a major version.
        if len(text) == 1:
            return f"{text}.0"
        return f"{int(text[:-1])}.{text[-1]}"
    raise NcuAdviseError(f"not a compute capability: {cc!r} (expected e.g. 9.0 or sm_90)")


def arch_spec(cc: str | float | int | tuple[int, int]) -> ArchSpec:
    """Return the limits of a compute capability.

    Raises:
        NcuAdviseError: the compute capability is not in the table.

    """
    key = normalize_cc(cc)
    try:
        return ARCH_SPECS[key]
    except KeyError:
        known = ", ".join(ARCH_SPECS)
        raise NcuAdviseError(f"unknown compute capability {key} (known: {known})") from None
