"""GPU feature preparation for a 4M-row transactions table held as PyTorch tensors.

The table: 16 numeric columns in one float32 matrix of shape [rows, 16] (as it arrives from
a NumPy array), an ``age`` column, an int64 ``merchant_id`` with about 300k distinct raw ids
(sparse 40-bit values), an int64 ``channel`` (0..5) and a 0/1 ``is_fraud`` label. One step
builds the model's input matrix:

- each numeric column standardised in a Python loop over the columns (``torch.std_mean`` of
  the column view, then ``(col - mean) / std`` written into the output column);
- ``age`` bucketized into 7 bands and one-hot encoded; the log of the first numeric column
  (the amount) bucketized into 12 log-spaced bins;
- ``merchant_id`` turned into dense codes with ``torch.unique(return_inverse=True)``, then a
  group-by over the codes with ``scatter_add_`` (transaction count and fraud count per
  merchant) for a smoothed target encoding and a frequency encoding, gathered back per row;
- ``channel`` one-hot encoded;
- everything concatenated into one float32 [rows, 32] matrix.

``--batched`` standardises the 16 columns as one ``torch.std_mean(dim=0)`` and one broadcast
expression on the whole matrix instead of the per-column loop.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from common import DEV, parser, run  # noqa: E402

p = parser(__doc__)
p.add_argument("--batched", action="store_true",
               help="standardise all numeric columns in one operation")
args = p.parse_args()
torch.manual_seed(0)
dev = DEV
ROWS, N_NUM, N_MERCHANTS, N_CHANNELS = 1 << 22, 16, 300_000, 6
AGE_EDGES = torch.tensor([25.0, 35.0, 45.0, 55.0, 65.0, 75.0], device=dev)
AMOUNT_EDGES = torch.linspace(0.0, 9.0, 11, device=dev)          # log(amount) bins
PRIOR_WEIGHT = 20.0

# --- the table (built once, like a loaded dataset) ---
scale = torch.logspace(-1, 3, N_NUM, device=dev)
num = torch.randn(ROWS, N_NUM, device=dev) * scale + scale * 0.5
num[:, 0] = torch.exp(torch.randn(ROWS, device=dev) * 1.2 + 3.5)   # amount, log-normal
age = (torch.rand(ROWS, device=dev) * 70 + 18).floor()
merchant_pool = torch.randint(0, 1 << 40, (N_MERCHANTS,), device=dev)
pick = (torch.rand(ROWS, device=dev) ** 3 * N_MERCHANTS).long()      # a few busy merchants
merchant_id = merchant_pool[pick]
channel = torch.randint(0, N_CHANNELS, (ROWS,), device=dev)
is_fraud = (torch.rand(ROWS, device=dev) < 0.02).float()
out = {}


def standardise_loop(x):
    z = torch.empty_like(x)
    for j in range(x.shape[1]):
        col = x[:, j]
        std, mean = torch.std_mean(col)
        z[:, j] = (col - mean) / std
    return z


def standardise_batched(x):
    std, mean = torch.std_mean(x, dim=0)
    return (x - mean) / std


def prepare():
    z = standardise_batched(num) if args.batched else standardise_loop(num)

    age_band = torch.bucketize(age, AGE_EDGES)                       # 0..6
    age_onehot = F.one_hot(age_band, AGE_EDGES.numel() + 1).float()
    amount_bin = torch.bucketize(torch.log1p(num[:, 0]), AMOUNT_EDGES).float()

    uniq, codes = torch.unique(merchant_id, return_inverse=True)
    k = uniq.numel()
    tx_count = torch.zeros(k, device=dev).scatter_add_(0, codes, torch.ones_like(is_fraud))
    fraud_count = torch.zeros(k, device=dev).scatter_add_(0, codes, is_fraud)
    prior = is_fraud.mean()
    target_enc = (fraud_count + PRIOR_WEIGHT * prior) / (tx_count + PRIOR_WEIGHT)
    freq_enc = tx_count / ROWS

    channel_onehot = F.one_hot(channel, N_CHANNELS).float()
    return torch.cat([z, age_onehot, amount_bin[:, None], target_enc[codes][:, None],
                      freq_enc[codes][:, None], channel_onehot], dim=1)


def step():
    out["features"] = prepare()


def check():
    feats = out["features"]
    if feats.shape != (ROWS, N_NUM + 7 + 1 + 2 + N_CHANNELS):
        raise AssertionError(f"feature matrix shape {tuple(feats.shape)}")
    if not torch.isfinite(feats).all():
        raise AssertionError("non-finite features")
    x = num.double()
    zref = (x - x.mean(0)) / x.std(0)
    err = float((feats[:, :N_NUM].double() - zref).abs().max())
    if not err < 1e-3:
        raise AssertionError(f"standardised columns off by {err:.3g}")
    # target encoding: recompute the per-merchant fraud rate with a sort-based group-by
    order = torch.argsort(merchant_id)
    ids, fr = merchant_id[order], is_fraud.double()[order]
    start = torch.ones_like(ids, dtype=torch.bool)
    start[1:] = ids[1:] != ids[:-1]
    group = torch.cumsum(start.long(), 0) - 1
    cnt = torch.zeros(int(group[-1]) + 1, dtype=torch.float64, device=dev).index_add_(
        0, group, torch.ones_like(fr))
    frd = torch.zeros_like(cnt).index_add_(0, group, fr)
    prior = float(is_fraud.double().mean())
    te = ((frd + PRIOR_WEIGHT * prior) / (cnt + PRIOR_WEIGHT))[group]
    err = float((feats[order, N_NUM + 8].double() - te).abs().max())
    if not err < 1e-5:
        raise AssertionError(f"target encoding off by {err:.3g}")
    if not torch.equal(feats[:, N_NUM:N_NUM + 7].sum(1), torch.ones(ROWS, device=dev)):
        raise AssertionError("age one-hot rows do not sum to 1")


run(step, name="torch_tabular_prep", backend="torch", args=args,
    variant="batched" if args.batched else "baseline", check=check)
