"""Level-synchronous breadth-first search on a power-law graph in a CuPy raw kernel.

The graph: 2^21 vertices and about 16.7M undirected edges (33M arcs in CSR, int32) drawn
Chung-Lu style from expected degrees that follow a power law (exponent 2.5, a few hubs of
tens of thousands of neighbours, vertex ids shuffled), self-loops and duplicates removed.
A BFS is one kernel launch per level: one thread per vertex of the current frontier walks
that vertex's adjacency list, skips neighbours already visited, claims new ones with
``atomicCAS`` on the distance array and appends them to the next frontier through a global
``atomicAdd`` on its length. The host reads that length back after every level to decide
whether to go on and how many threads to launch next (one synchronisation per level).
A step estimates the graph's diameter by repeated sweeps, as graph tools do: a BFS from a
vertex of median degree, then a BFS from the farthest vertex found (``cupy.argmax`` of the
distances, read back), three BFS in all. The last BFS's distances are checked against a
vectorised CuPy BFS.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from common import parser, run  # noqa: E402

BFS_SRC = r"""
extern "C" __global__ void bfs_expand(const int* __restrict__ indptr,
                                      const int* __restrict__ indices,
                                      const int* __restrict__ frontier, int frontier_size,
                                      int* __restrict__ dist, int* __restrict__ next_frontier,
                                      int* __restrict__ next_size, int level)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= frontier_size) return;
    int u = frontier[i];
    int begin = indptr[u], end = indptr[u + 1];
    for (int e = begin; e < end; ++e) {
        int v = indices[e];
        if (dist[v] != -1) continue;                          // already visited
        if (atomicCAS(&dist[v], -1, level + 1) == -1) {       // we discovered it
            int pos = atomicAdd(next_size, 1);
            next_frontier[pos] = v;
        }
    }
}
"""

N_VERT, AVG_DEGREE, GAMMA, BLOCK, MAX_LEVELS, SWEEPS = 1 << 21, 16, 2.5, 256, 30, 3


def power_law_csr(xp, n, avg_degree, gamma, seed):
    """Chung-Lu graph: endpoints drawn with probability proportional to i^(-1/(gamma-1)).

    Works with NumPy or CuPy as ``xp``. Returns (indptr, indices) of the symmetric graph,
    int32, without self-loops or duplicate arcs, neighbours sorted.
    """
    rng = xp.random.RandomState(seed)
    w = (xp.arange(n, dtype=xp.float64) + 1.0) ** (-1.0 / (gamma - 1.0))
    cdf = xp.cumsum(w)
    cdf /= cdf[-1]
    m = n * avg_degree // 2
    perm = rng.permutation(n)                                  # hubs scattered over ids
    src = perm[xp.minimum(xp.searchsorted(cdf, rng.random_sample(m)), n - 1)]
    dst = perm[xp.minimum(xp.searchsorted(cdf, rng.random_sample(m)), n - 1)]
    keep = src != dst
    src, dst = src[keep].astype(xp.int64), dst[keep].astype(xp.int64)
    key = xp.unique(xp.concatenate([src * n + dst, dst * n + src]))   # both directions
    rows, cols = key // n, key % n
    indptr = xp.searchsorted(rows, xp.arange(n + 1)).astype(xp.int32)
    return indptr, cols.astype(xp.int32)


def bfs_reference(xp, indptr, indices, source):
    """Vectorised level-synchronous BFS (array code, no custom kernels)."""
    n = indptr.size - 1
    dist = xp.full(n, -1, dtype=xp.int32)
    dist[source] = 0
    frontier = xp.asarray([source], dtype=xp.int64)
    level = 0
    while frontier.size:
        starts = indptr[frontier].astype(xp.int64)
        counts = indptr[frontier + 1].astype(xp.int64) - starts
        ends = xp.cumsum(counts)
        total = int(ends[-1])
        if total == 0:
            break
        pos = xp.arange(total, dtype=xp.int64)
        seg = xp.searchsorted(ends, pos, side="right")
        nbr = indices[starts[seg] + pos - (ends - counts)[seg]]
        nbr = xp.unique(nbr[dist[nbr] == -1])
        level += 1
        dist[nbr] = level
        frontier = nbr.astype(xp.int64)
    return dist


def main():
    args = parser(__doc__).parse_args()
    import cupy as cp

    k_expand = cp.RawModule(code=BFS_SRC).get_function("bfs_expand")
    indptr, indices = power_law_csr(cp, N_VERT, AVG_DEGREE, GAMMA, seed=11)
    degree = cp.diff(indptr)
    start = int(cp.argsort(degree)[N_VERT // 2])             # a vertex of median degree
    dist = cp.empty(N_VERT, dtype=cp.int32)
    frontier = cp.empty(N_VERT, dtype=cp.int32)
    next_frontier = cp.empty(N_VERT, dtype=cp.int32)
    next_size = cp.zeros(1, dtype=cp.int32)
    out = {}

    def bfs(src):
        cur, nxt = frontier, next_frontier
        dist.fill(-1)
        dist[src] = 0
        cur[0] = src
        size, level = 1, 0
        while size > 0 and level < MAX_LEVELS:
            next_size.fill(0)
            k_expand(((size + BLOCK - 1) // BLOCK,), (BLOCK,),
                     (indptr, indices, cur, np.int32(size), dist, nxt, next_size,
                      np.int32(level)))
            size = int(next_size[0])                          # sync: the host needs it
            cur, nxt = nxt, cur
            level += 1
        return level

    def step():
        src, eccentricity = start, []
        for sweep in range(SWEEPS):
            out["source"] = src
            eccentricity.append(bfs(src) - 1)
            if sweep + 1 < SWEEPS:
                src = int(cp.argmax(dist))                     # farthest vertex found
        out["eccentricity"] = eccentricity

    def check():
        ref = bfs_reference(cp, indptr, indices, out["source"])
        if not bool((dist == ref).all()):
            bad = int((dist != ref).sum())
            raise AssertionError(f"{bad} vertices get a different BFS distance")
        reached = int((dist >= 0).sum())
        if not reached > 0.9 * N_VERT:
            raise AssertionError(f"only {reached} of {N_VERT} vertices reached")
        print(f"cuda_bfs: {int(indices.size)} arcs, max degree {int(degree.max())}, "
              f"eccentricities {out['eccentricity']}, {reached} vertices reached", file=sys.stderr)

    run(step, name="cuda_bfs", backend="cupy", args=args, check=check)


if __name__ == "__main__":
    main()
