"""Node classification by propagated features and a ridge classifier (SGC/SIGN-style) in CuPy.

A homophilous random graph of 2^20 nodes, 40 classes, about 8M undirected edges drawn with
a skewed degree distribution (60 % of them between nodes of the same class), plus self
loops, as a ``cupyx.scipy.sparse`` CSR matrix normalised once at set up to
D^-1/2 (A + I) D^-1/2 with two products by ``diags``. Every node has 128 float32 features
(a noisy class centroid, too noisy to classify on their own); 10 % of the nodes are
labelled for training and 10 % held out.

One step, the whole fit (as run once per hyper-parameter setting):

- three propagation hops ``h = A_hat @ h`` (cuSPARSE SpMM through the sparse matrix's
  ``@``), the input and the three hops concatenated into [nodes, 512] features;
- the training rows gathered, standardised with their column mean and standard deviation,
  the normal equations Z^T Z + lambda I and Z^T Y (one-hot targets) with cuBLAS, solved by
  ``cupy.linalg.cholesky`` and two ``cupyx.scipy.linalg.solve_triangular`` (cuSOLVER and
  cuBLAS TRSM);
- class scores for all nodes from the standardised features, ``argmax``, and the accuracy
  on the held-out nodes.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from common import parser, run  # noqa: E402

N_NODES, N_EDGES, F_IN, CLASSES, HOPS = 1 << 20, 8 << 20, 128, 40, 3
HOMOPHILY, TRAIN_FRAC, VAL_FRAC, LAM = 0.6, 0.1, 0.1, 1e-2


def make_graph(cp, sparse):
    """Labels and the normalised adjacency D^-1/2 (A + I) D^-1/2 (CSR, float32)."""
    cp.random.seed(0)
    labels = cp.random.randint(0, CLASSES, N_NODES).astype(cp.int32)
    by_class = cp.argsort(labels)
    class_size = cp.bincount(labels, minlength=CLASSES)
    class_start = cp.cumsum(class_size) - class_size
    # skewed source degrees: cube of a uniform through a fixed random relabelling
    relabel = cp.random.permutation(N_NODES)
    src = relabel[(N_NODES * cp.random.random(N_EDGES) ** 3).astype(cp.int64)]
    same = cp.random.random(N_EDGES) < HOMOPHILY
    c = labels[src]
    pick = (cp.random.random(N_EDGES) * class_size[c]).astype(cp.int64)
    dst = cp.where(same, by_class[class_start[c] + pick],
                   cp.random.randint(0, N_NODES, N_EDGES))
    loops = cp.arange(N_NODES)
    rows = cp.concatenate([src, dst, loops])
    cols = cp.concatenate([dst, src, loops])
    ones = cp.ones(rows.size, dtype=cp.float32)
    adj = sparse.coo_matrix((ones, (rows, cols)), shape=(N_NODES, N_NODES)).tocsr()
    adj.data[:] = 1.0                                  # duplicate edges count once
    deg = cp.asarray(adj.sum(axis=1)).ravel()
    d_inv_sqrt = sparse.diags(1.0 / cp.sqrt(deg)).astype(cp.float32)
    a_hat = (d_inv_sqrt @ adj @ d_inv_sqrt).tocsr()
    return labels, a_hat


def make_features(cp, labels):
    centroids = cp.random.standard_normal((CLASSES, F_IN), dtype=cp.float32)
    noise = cp.random.standard_normal((N_NODES, F_IN), dtype=cp.float32)
    return centroids[labels] + 8.0 * noise


def main():
    args = parser(__doc__).parse_args()

    import cupy as cp
    import cupyx.scipy.sparse as sparse
    from cupyx.scipy.linalg import solve_triangular

    labels, a_hat = make_graph(cp, sparse)
    x = make_features(cp, labels)
    order = cp.random.permutation(N_NODES)
    n_train, n_val = int(TRAIN_FRAC * N_NODES), int(VAL_FRAC * N_NODES)
    train_idx = cp.sort(order[:n_train])
    val_idx = cp.sort(order[n_train:n_train + n_val])
    y_train = cp.zeros((n_train, CLASSES), dtype=cp.float32)
    y_train[cp.arange(n_train), labels[train_idx]] = 1.0
    y_val = labels[val_idx]
    out = {}

    def step():
        feats = [x]
        h = x
        for _ in range(HOPS):
            h = a_hat @ h
            feats.append(h)
        feat = cp.concatenate(feats, axis=1)                      # [nodes, 512]

        z = feat[train_idx]
        mu = z.mean(axis=0)
        sd = z.std(axis=0) + 1e-6
        z = (z - mu) / sd
        gram = z.T @ z + LAM * n_train * cp.eye(z.shape[1], dtype=cp.float32)
        rhs = z.T @ y_train
        chol = cp.linalg.cholesky(gram)
        w = solve_triangular(chol.T, solve_triangular(chol, rhs, lower=True), lower=False)

        scores = ((feat - mu) / sd) @ w
        pred = scores.argmax(axis=1)
        acc = (pred[val_idx] == y_val).mean()
        out.update(hop1=feats[1], gram=gram, rhs=rhs, w=w, acc=acc, feat=feat)

    def check():
        # one hop on 2000 rows against SciPy on the host
        import scipy.sparse as host_sparse

        a_host = host_sparse.csr_matrix((cp.asnumpy(a_hat.data), cp.asnumpy(a_hat.indices),
                                         cp.asnumpy(a_hat.indptr)), shape=a_hat.shape)
        rows = np.random.default_rng(1).choice(N_NODES, 2000, replace=False)
        want = a_host[rows] @ cp.asnumpy(x).astype(np.float64)
        got = cp.asnumpy(out["hop1"][rows])
        err = np.abs(got - want).max() / np.abs(want).max()
        if not err < 1e-4:
            raise AssertionError(f"first hop differs from SciPy by {err:.3g}")
        row_sums = np.asarray(a_host[rows].sum(axis=1)).ravel()
        if not (row_sums.min() > 0.0 and np.isfinite(row_sums).all()):
            raise AssertionError("normalised adjacency has empty or non-finite rows")
        # the ridge solution satisfies its normal equations
        gram, rhs, w = (cp.asnumpy(out[k]).astype(np.float64) for k in ("gram", "rhs", "w"))
        res = np.abs(gram @ w - rhs).max() / np.abs(rhs).max()
        if not res < 1e-3:
            raise AssertionError(f"ridge normal equations: relative residual {res:.3g}")
        acc = float(out["acc"])
        if not acc > 0.5:
            raise AssertionError(f"held-out accuracy {acc:.3f} (chance {1 / CLASSES:.3f})")

    run(step, name="cupy_graph_ridge", backend="cupy", args=args, check=check)


if __name__ == "__main__":
    main()
