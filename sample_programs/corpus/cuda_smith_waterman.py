"""Smith-Waterman local alignment scores (affine gaps) of one protein query against a batch of
database sequences, with a tiled wavefront in a CuPy RawModule.

The query is 4096 residues and the batch 16 sequences of 4096 (20-letter alphabet, codes
0-19; each target carries a mutated copy of a piece of the query, so the best local
alignments score well above the background). Scoring is BLOSUM62 with gap open 11 and
extension 1 (Gotoh recurrences for H, E and F, int32).

Each (query, target) matrix is cut into 128 x 128 tiles; one kernel launch per tile
anti-diagonal (63 launches) runs every tile of that diagonal for all 16 targets (up to
512 blocks). A block of 128 threads owns a tile, one thread per query row; inside the tile
the threads sweep their own wavefront, 255 steps with a ``__syncthreads`` each, passing H and
F down through double-buffered shared memory. Tiles exchange their last row (H, F) and last
column (H, E) through global boundary arrays updated in place, and their bottom-right H
through a corner array. The substitution matrix sits in ``__constant__`` memory, so each
step's lookup ``blosum[q_i * 20 + t_j]`` is a different address for every thread of a warp.
Scores: per-thread maxima, a warp shuffle reduction and one ``atomicMax`` per warp.

``--shared-subst`` copies the 400-entry matrix into shared memory at the start of each
block and looks it up there.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from common import parser, run  # noqa: E402

QLEN, TLEN, N_TARGETS, TILE = 4096, 4096, 16, 128
GAP_OPEN, GAP_EXT = 11, 1
NEG = -(1 << 28)

# BLOSUM62 over A R N D C Q E G H I L K M F P S T W Y V
BLOSUM62 = np.array([
    [4, -1, -2, -2, 0, -1, -1, 0, -2, -1, -1, -1, -1, -2, -1, 1, 0, -3, -2, 0],
    [-1, 5, 0, -2, -3, 1, 0, -2, 0, -3, -2, 2, -1, -3, -2, -1, -1, -3, -2, -3],
    [-2, 0, 6, 1, -3, 0, 0, 0, 1, -3, -3, 0, -2, -3, -2, 1, 0, -4, -2, -3],
    [-2, -2, 1, 6, -3, 0, 2, -1, -1, -3, -4, -1, -3, -3, -1, 0, -1, -4, -3, -3],
    [0, -3, -3, -3, 9, -3, -4, -3, -3, -1, -1, -3, -1, -2, -3, -1, -1, -2, -2, -1],
    [-1, 1, 0, 0, -3, 5, 2, -2, 0, -3, -2, 1, 0, -3, -1, 0, -1, -2, -1, -2],
    [-1, 0, 0, 2, -4, 2, 5, -2, 0, -3, -3, 1, -2, -3, -1, 0, -1, -3, -2, -2],
    [0, -2, 0, -1, -3, -2, -2, 6, -2, -4, -4, -2, -3, -3, -2, 0, -2, -2, -3, -3],
    [-2, 0, 1, -1, -3, 0, 0, -2, 8, -3, -3, -1, -2, -1, -2, -1, -2, -2, 2, -3],
    [-1, -3, -3, -3, -1, -3, -3, -4, -3, 4, 2, -3, 1, 0, -3, -2, -1, -3, -1, 3],
    [-1, -2, -3, -4, -1, -2, -3, -4, -3, 2, 4, -2, 2, 0, -3, -2, -1, -2, -1, 1],
    [-1, 2, 0, -1, -3, 1, 1, -2, -1, -3, -2, 5, -1, -3, -1, 0, -1, -3, -2, -2],
    [-1, -1, -2, -3, -1, 0, -2, -3, -2, 1, 2, -1, 5, 0, -2, -1, -1, -1, -1, 1],
    [-2, -3, -3, -3, -2, -3, -3, -3, -1, 0, 0, -3, 0, 6, -4, -2, -2, 1, 3, -1],
    [-1, -2, -2, -1, -3, -1, -1, -2, -2, -3, -3, -1, -2, -4, 7, -1, -1, -4, -3, -2],
    [1, -1, 1, 0, -1, 0, 0, 0, -1, -2, -2, 0, -1, -2, -1, 4, 1, -3, -2, -2],
    [0, -1, 0, -1, -1, -1, -1, -2, -2, -1, -1, -1, -1, -2, -1, 1, 5, -2, -2, 0],
    [-3, -3, -4, -4, -2, -2, -3, -2, -2, -3, -2, -3, -1, 1, -4, -3, -2, 11, 2, -3],
    [-2, -2, -2, -3, -2, -1, -2, -3, 2, -1, -1, -2, -1, 3, -3, -2, -2, 2, 7, -1],
    [0, -3, -3, -3, -1, -2, -2, -3, -3, 3, 1, -2, 1, -1, -2, -2, 0, -3, -1, 4],
], dtype=np.int32)

SW_SRC = r"""
#define TILE 128
#define ALPHA 20
#define NEG (-(1 << 28))

__constant__ int blosum[ALPHA * ALPHA];

template <bool SHARED_SUBST>
__device__ void sw_tile(const signed char* __restrict__ query,
                        const signed char* __restrict__ targets,
                        int* row_h, int* row_f, int* col_h, int* col_e, int* corner,
                        int* best, int qlen, int tlen, int diag, int tiles_i, int tiles_j,
                        int gap_open, int gap_ext)
{
    __shared__ int s_sub[ALPHA * ALPHA];
    __shared__ int s_h[2][TILE];
    __shared__ int s_f[2][TILE];
    int tgt = blockIdx.y;
    int ti_lo = max(0, diag - (tiles_j - 1));
    int ti = ti_lo + blockIdx.x;
    int tj = diag - ti;
    if (ti >= tiles_i || tj < 0) return;
    int t = threadIdx.x;
    if (SHARED_SUBST) {
        for (int k = t; k < ALPHA * ALPHA; k += TILE) s_sub[k] = blosum[k];
        __syncthreads();
    }
    const int* sub = SHARED_SUBST ? s_sub : blosum;

    int i = ti * TILE + t;                      // this thread's query row
    int j0 = tj * TILE;
    const signed char* tseq = targets + (size_t)tgt * tlen;
    int* rh = row_h + (size_t)tgt * tlen;
    int* rf = row_f + (size_t)tgt * tlen;
    int* ch = col_h + (size_t)tgt * qlen;
    int* ce = col_e + (size_t)tgt * qlen;
    int* cn = corner + (size_t)tgt * tiles_i * tiles_j;
    int qrow = query[i] * ALPHA;

    int h_left = ch[i];                         // H[i][j0 - 1], E[i][j0 - 1]
    int e_left = ce[i];
    int h_diag;                                 // H[i - 1][j - 1]
    if (t == 0) h_diag = (ti > 0 && tj > 0) ? cn[(ti - 1) * tiles_j + (tj - 1)] : 0;
    else h_diag = ch[i - 1];
    int h_best = 0;
    int h = 0;

    for (int s = 0; s < 2 * TILE - 1; ++s) {
        int j = s - t;
        int buf = s & 1;
        if (j >= 0 && j < TILE) {
            int h_up, f_up;
            if (t == 0) { h_up = rh[j0 + j]; f_up = rf[j0 + j]; }
            else { h_up = s_h[buf ^ 1][t - 1]; f_up = s_f[buf ^ 1][t - 1]; }
            int e = max(e_left - gap_ext, h_left - gap_open - gap_ext);
            int f = max(f_up - gap_ext, h_up - gap_open - gap_ext);
            h = h_diag + sub[qrow + tseq[j0 + j]];
            h = max(max(h, 0), max(e, f));
            h_best = max(h_best, h);
            s_h[buf][t] = h;
            s_f[buf][t] = f;
            if (t == TILE - 1) { rh[j0 + j] = h; rf[j0 + j] = f; }
            h_diag = h_up;
            h_left = h;
            e_left = e;
        }
        __syncthreads();
    }
    ch[i] = h_left;                             // last column of the tile
    ce[i] = e_left;
    if (t == TILE - 1) cn[ti * tiles_j + tj] = h_left;
    for (int o = 16; o > 0; o >>= 1) h_best = max(h_best, __shfl_xor_sync(0xffffffff, h_best, o));
    if ((t & 31) == 0) atomicMax(&best[tgt], h_best);
}

extern "C" __global__ void __launch_bounds__(TILE)
sw_diag(const signed char* query, const signed char* targets, int* row_h, int* row_f,
        int* col_h, int* col_e, int* corner, int* best, int qlen, int tlen, int diag,
        int tiles_i, int tiles_j, int gap_open, int gap_ext)
{
    sw_tile<false>(query, targets, row_h, row_f, col_h, col_e, corner, best, qlen, tlen, diag,
                   tiles_i, tiles_j, gap_open, gap_ext);
}

extern "C" __global__ void __launch_bounds__(TILE)
sw_diag_shared(const signed char* query, const signed char* targets, int* row_h, int* row_f,
               int* col_h, int* col_e, int* corner, int* best, int qlen, int tlen, int diag,
               int tiles_i, int tiles_j, int gap_open, int gap_ext)
{
    sw_tile<true>(query, targets, row_h, row_f, col_h, col_e, corner, best, qlen, tlen, diag,
                  tiles_i, tiles_j, gap_open, gap_ext);
}
"""


def make_sequences(gen):
    """A query and targets that each hold a mutated copy of a piece of the query."""
    freq = gen.dirichlet(np.full(20, 5.0))
    query = gen.choice(20, QLEN, p=freq).astype(np.int8)
    targets = gen.choice(20, (N_TARGETS, TLEN), p=freq).astype(np.int8)
    for k in range(N_TARGETS):
        n = int(gen.integers(100, 1500))
        qs = int(gen.integers(0, QLEN - n))
        ts = int(gen.integers(0, TLEN - n))
        piece = query[qs:qs + n].copy()
        mut = gen.random(n) < gen.uniform(0.1, 0.5)
        piece[mut] = gen.choice(20, int(mut.sum()), p=freq)
        targets[k, ts:ts + n] = piece
    return query, targets


def host_sw(q, t):
    """Best local score by anti-diagonals in NumPy (int64), the same recurrences."""
    m, n = len(q), len(t)
    go, ge = GAP_OPEN + GAP_EXT, GAP_EXT
    big = NEG
    # arrays indexed by row i (0..m) on each anti-diagonal d = i + j of the (m+1) x (n+1) grid
    h2 = np.zeros(m + 1, np.int64)                  # diagonal d - 2
    h1 = np.zeros(m + 1, np.int64)                  # diagonal d - 1
    e1 = np.full(m + 1, big, np.int64)
    f1 = np.full(m + 1, big, np.int64)
    best = 0
    sub = BLOSUM62.astype(np.int64)
    for d in range(2, m + n + 1):
        i = np.arange(max(1, d - n), min(m, d - 1) + 1)
        j = d - i
        h = np.zeros(m + 1, np.int64)
        e = np.full(m + 1, big, np.int64)
        f = np.full(m + 1, big, np.int64)
        e[i] = np.maximum(e1[i] - ge, h1[i] - go)                   # from (i, j - 1)
        f[i] = np.maximum(f1[i - 1] - ge, h1[i - 1] - go)           # from (i - 1, j)
        hv = h2[i - 1] + sub[q[i - 1], t[j - 1]]
        h[i] = np.maximum(np.maximum(hv, 0), np.maximum(e[i], f[i]))
        best = max(best, int(h[i].max()))
        h2, h1, e1, f1 = h1, h, e, f
    return best


def main():
    p = parser(__doc__)
    p.add_argument("--shared-subst", action="store_true",
                   help="substitution matrix in shared memory instead of constant memory")
    args = p.parse_args()

    import cupy as cp

    mod = cp.RawModule(code=SW_SRC, options=("-std=c++17",))
    kern = mod.get_function("sw_diag_shared" if args.shared_subst else "sw_diag")
    cp.ndarray((400,), cp.int32, mod.get_global("blosum")).set(BLOSUM62.ravel())

    query_h, targets_h = make_sequences(np.random.default_rng(0))
    query = cp.asarray(query_h)
    targets = cp.asarray(targets_h)
    tiles_i, tiles_j = QLEN // TILE, TLEN // TILE
    row_h = cp.empty((N_TARGETS, TLEN), cp.int32)
    row_f = cp.empty_like(row_h)
    col_h = cp.empty((N_TARGETS, QLEN), cp.int32)
    col_e = cp.empty_like(col_h)
    corner = cp.zeros((N_TARGETS, tiles_i, tiles_j), cp.int32)
    best = cp.empty(N_TARGETS, cp.int32)
    i32 = np.int32

    def step():
        row_h.fill(0)
        row_f.fill(NEG)
        col_h.fill(0)
        col_e.fill(NEG)
        best.fill(0)
        for d in range(tiles_i + tiles_j - 1):
            n_tiles = min(d, tiles_i - 1) - max(0, d - (tiles_j - 1)) + 1
            kern((n_tiles, N_TARGETS), (TILE,),
                 (query, targets, row_h, row_f, col_h, col_e, corner, best, i32(QLEN),
                  i32(TLEN), i32(d), i32(tiles_i), i32(tiles_j), i32(GAP_OPEN), i32(GAP_EXT)))

    def check():
        got = cp.asnumpy(best)
        for k in (0, 5):
            want = host_sw(query_h, targets_h[k])
            if got[k] != want:
                raise AssertionError(f"target {k}: score {got[k]}, NumPy {want}")
        if not (got > 100).all():
            raise AssertionError(f"planted alignments not found: {got.tolist()}")

    run(step, name="cuda_smith_waterman", backend="cupy", args=args,
        variant="shared_subst" if args.shared_subst else "baseline", check=check)


if __name__ == "__main__":
    main()
