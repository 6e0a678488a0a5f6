"""Parsing a CSV sensor log on the GPU: CuPy for the line index, a RawModule parser, CuPy
aggregates.

A 6M-row CSV export of an IoT sensor fleet (about 200 MB of text, uploaded as raw bytes):
a header line, then ``timestamp_ms,sensor_id,temp_c,humidity,status`` rows such as
``1717200000123,4711,-3.25,87.5,OK`` (13-digit millisecond timestamps, sensor ids 0-49999
with a skewed popularity, temperatures with two decimals and an optional sign, humidity with
one decimal, status OK / WARN / FAIL). One step ingests the whole buffer:

- the line index as ``cupy.flatnonzero(buf == ord("\\n"))`` (a compare, CuPy's scan and
  scatter for ``nonzero``, one host read of the count);
- the parser kernel: one thread per row, which walks its row's bytes from the newline
  before it to the newline that ends it, accumulating the integer fields digit by digit and
  the decimals as an integer mantissa and a count of fraction digits (converted with one
  double division by a power of ten from ``__constant__``), the status from its first
  letter, and a global error counter for malformed rows; columns out as int64, int32,
  float32, float32, uint8;
- per-sensor aggregates with CuPy: row counts and temperature sums by ``cupy.bincount``
  (with and without weights), the mean, the FAIL count per sensor (a boolean mask, the
  masked sensor ids, another ``bincount``), and the time span of the log (min and max).

About 20 launches and several host synchronisations (``flatnonzero``, boolean indexing,
``bincount``). Not planted with anything: a row per thread is how such a parser is first
written; rows are 30-40 bytes long, so the 32 threads of a warp read bytes from 32 rows
a row-length apart, one byte per load.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from common import parser, run  # noqa: E402

ROWS = 6_000_000
SENSORS = 50_000
HEADER = b"timestamp_ms,sensor_id,temp_c,humidity,status\n"
STATUS = (b"OK", b"WARN", b"FAIL")
BLOCK = 256

PARSE_SRC = r"""
__constant__ double c_pow10[8] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7};

__device__ __forceinline__ long long parse_int(const unsigned char* __restrict__ buf,
                                               long long& p, long long end, int& ok)
{
    long long v = 0;
    int digits = 0;
    while (p < end) {
        const unsigned char c = buf[p];
        if (c == ',') break;
        const int d = c - '0';
        if (d < 0 || d > 9) ok = 0;
        v = v * 10 + d;
        ++digits;
        ++p;
    }
    if (digits == 0) ok = 0;
    ++p;                                   // the comma
    return v;
}

__device__ __forceinline__ float parse_decimal(const unsigned char* __restrict__ buf,
                                               long long& p, long long end, int& ok)
{
    bool neg = false;
    if (p < end && buf[p] == '-') {
        neg = true;
        ++p;
    }
    long long mant = 0;
    int frac = -1, digits = 0;
    while (p < end) {
        const unsigned char c = buf[p];
        if (c == ',') break;
        if (c == '.') {
            if (frac >= 0) ok = 0;
            frac = 0;
        } else {
            const int d = c - '0';
            if (d < 0 || d > 9) ok = 0;
            mant = mant * 10 + d;
            ++digits;
            if (frac >= 0) ++frac;
        }
        ++p;
    }
    if (digits == 0 || frac > 7) ok = 0;
    ++p;
    const double v = (double)mant / c_pow10[frac > 0 ? min(frac, 7) : 0];
    return (float)(neg ? -v : v);
}

// one thread per data row; row r spans (nl[r], nl[r + 1]) (nl[0] ends the header)
extern "C" __global__ void __launch_bounds__(256)
parse_sensor_rows(const unsigned char* __restrict__ buf, const long long* __restrict__ nl,
                  int n_rows, long long* __restrict__ ts, int* __restrict__ sensor,
                  float* __restrict__ temp, float* __restrict__ hum,
                  unsigned char* __restrict__ status, unsigned int* __restrict__ bad)
{
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n_rows) return;
    long long p = nl[r] + 1;
    const long long end = nl[r + 1];
    int ok = 1;
    ts[r] = parse_int(buf, p, end, ok);
    sensor[r] = (int)parse_int(buf, p, end, ok);
    temp[r] = parse_decimal(buf, p, end, ok);
    hum[r] = parse_decimal(buf, p, end, ok);
    unsigned char st = 255;
    if (p < end) {
        const unsigned char c = buf[p];
        st = c == 'O' ? 0 : c == 'W' ? 1 : c == 'F' ? 2 : 255;
    }
    if (st == 255) ok = 0;
    status[r] = st;
    if (!ok) atomicAdd(bad, 1u);
}
"""


def _digits(v):
    """Number of decimal digits of non-negative ints (0 has one)."""
    out = np.ones(v.shape, np.int64)
    t = v.copy()
    while True:
        t //= 10
        more = t > 0
        if not more.any():
            return out
        out += more


class _Rows:
    """Assembles variable-length rows in a [rows, width] byte matrix, field by field."""

    def __init__(self, n, width):
        self.mat = np.zeros((n, width), np.uint8)
        self.pos = np.zeros(n, np.int64)
        self.r = np.arange(n)

    def put_int(self, v, min_digits=1):
        nd = np.maximum(_digits(v), min_digits)
        for k in range(int(nd.max())):
            sel = k < nd
            digit = (v[sel] // 10 ** (nd[sel] - 1 - k)) % 10
            self.mat[self.r[sel], self.pos[sel] + k] = 48 + digit
        self.pos += nd

    def put_bytes(self, table, which):
        lens = np.array([len(t) for t in table])[which]
        for k in range(max(len(t) for t in table)):
            col = np.array([t[k] if k < len(t) else 0 for t in table], np.uint8)[which]
            sel = k < lens
            self.mat[self.r[sel], self.pos[sel] + k] = col[sel]
        self.pos += lens

    def put_char(self, ch, sel=None):
        sel = np.ones(len(self.pos), bool) if sel is None else sel
        self.mat[self.r[sel], self.pos[sel]] = ord(ch)
        self.pos += sel

    def text(self):
        keep = np.arange(self.mat.shape[1])[None, :] < self.pos[:, None]
        return self.mat[keep]


def make_log(gen):
    """The CSV bytes and the values they encode."""
    ts = 1_717_200_000_000 + np.cumsum(gen.integers(0, 15, ROWS))
    pop = gen.pareto(1.2, SENSORS) + 1.0
    sensor = gen.choice(SENSORS, ROWS, p=pop / pop.sum())
    centi = np.rint(100 * (18.0 + 9.0 * gen.standard_normal(ROWS))).astype(np.int64)
    deci = gen.integers(0, 1001, ROWS)
    status = gen.choice(3, ROWS, p=[0.9, 0.08, 0.02])
    rows = _Rows(ROWS, 48)
    rows.put_int(ts)
    rows.put_char(",")
    rows.put_int(sensor)
    rows.put_char(",")
    rows.put_char("-", centi < 0)
    rows.put_int(np.abs(centi) // 100)
    rows.put_char(".")
    rows.put_int(np.abs(centi) % 100, min_digits=2)
    rows.put_char(",")
    rows.put_int(deci // 10)
    rows.put_char(".")
    rows.put_int(deci % 10)
    rows.put_char(",")
    rows.put_bytes(STATUS, status)
    rows.put_char("\n")
    text = np.concatenate([np.frombuffer(HEADER, np.uint8), rows.text()])
    values = dict(ts=ts, sensor=sensor.astype(np.int32),
                  temp=(centi / 100.0).astype(np.float32),
                  hum=(deci / 10.0).astype(np.float32), status=status.astype(np.uint8))
    return text, values


def main():
    p = parser(__doc__)
    args = p.parse_args()

    import cupy as cp

    mod = cp.RawModule(code=PARSE_SRC, options=("-std=c++17",))
    parse_kernel = mod.get_function("parse_sensor_rows")

    text_h, values = make_log(np.random.default_rng(0))
    buf = cp.asarray(text_h)
    ts = cp.empty(ROWS, cp.int64)
    sensor = cp.empty(ROWS, cp.int32)
    temp = cp.empty(ROWS, cp.float32)
    hum = cp.empty(ROWS, cp.float32)
    status = cp.empty(ROWS, cp.uint8)
    bad = cp.zeros(1, cp.uint32)
    out = {}

    def step():
        nl = cp.flatnonzero(buf == ord("\n"))
        n_rows = nl.size - 1
        bad.fill(0)
        parse_kernel(((n_rows + BLOCK - 1) // BLOCK,), (BLOCK,),
                     (buf, nl, np.int32(n_rows), ts, sensor, temp, hum, status, bad))
        s, t = sensor[:n_rows], temp[:n_rows]
        count = cp.bincount(s, minlength=SENSORS)
        tsum = cp.bincount(s, weights=t, minlength=SENSORS)
        mean_t = tsum / cp.maximum(count, 1)
        fails = cp.bincount(s[status[:n_rows] == 2], minlength=SENSORS)
        span = ts[:n_rows].max() - ts[:n_rows].min()
        out.update(n_rows=n_rows, count=count, mean_t=mean_t, fails=fails, span=span)

    def check():
        if out["n_rows"] != ROWS:
            raise AssertionError(f"{out['n_rows']} rows found, {ROWS} written")
        if int(bad.get()[0]) != 0:
            raise AssertionError(f"{int(bad.get()[0])} rows flagged malformed")
        for name, col in (("ts", ts), ("sensor", sensor), ("temp", temp), ("hum", hum),
                          ("status", status)):
            got = cp.asnumpy(col)
            if not np.array_equal(got, values[name]):
                k = int(np.flatnonzero(got != values[name])[0])
                raise AssertionError(f"column {name} row {k}: {got[k]} != {values[name][k]}")
        want_count = np.bincount(values["sensor"], minlength=SENSORS)
        if not np.array_equal(cp.asnumpy(out["count"]), want_count):
            raise AssertionError("per-sensor counts differ")
        want_mean = (np.bincount(values["sensor"], weights=values["temp"].astype(np.float64),
                                 minlength=SENSORS) / np.maximum(want_count, 1))
        if not np.allclose(cp.asnumpy(out["mean_t"]), want_mean, rtol=1e-9, atol=1e-9):
            raise AssertionError("per-sensor mean temperatures differ")
        want_fails = np.bincount(values["sensor"][values["status"] == 2], minlength=SENSORS)
        if not np.array_equal(cp.asnumpy(out["fails"]), want_fails):
            raise AssertionError("per-sensor FAIL counts differ")
        if int(out["span"]) != int(values["ts"].max() - values["ts"].min()):
            raise AssertionError("time span differs")

    run(step, name="cuda_csv_ingest", backend="cupy", args=args, check=check)


if __name__ == "__main__":
    main()
