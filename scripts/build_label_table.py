"""Build ncu_advisor/data/metric_labels.csv from real label-name captures.

Usage: python scripts/build_label_table.py CAPTURE.csv [CAPTURE.csv ...]
Each capture is an `ncu --import X.ncu-rep --csv --print-metric-name label-name` export
(with or without --print-details all). The table maps (section, body item, label, occurrence)
to the metric name; conflicting mappings are dropped and reported.
"""

import sys
from pathlib import Path

import pandas as pd

from ncu_advisor.readers.csv_export import read_csv_export

OUT = Path(__file__).resolve().parent.parent / "ncu_advisor" / "data" / "metric_labels.csv"


def rows_from(path: Path) -> pd.DataFrame:
    import ncu_advisor.readers.csv_export as ce

    captured = {}
    original = ce.resolve_labels

    def keep(metrics):
        captured["m"] = metrics.copy()
        return original(metrics)

    ce.resolve_labels = keep
    try:
        read_csv_export(path)
    finally:
        ce.resolve_labels = original
    m = captured["m"].dropna(subset=["metric", "label"])
    m = m.assign(body_item=m["body_item"].fillna(""))
    m["occurrence"] = m.groupby(["launch", "section", "body_item", "label"]).cumcount()
    return m[["section", "body_item", "label", "occurrence", "metric"]]


def main(paths: list[str]) -> None:
    rows = pd.concat([rows_from(Path(p)) for p in paths]).drop_duplicates()
    key = ["section", "body_item", "label", "occurrence"]
    conflicts = rows[rows.duplicated(key, keep=False)]
    if not conflicts.empty:
        n = conflicts[key].drop_duplicates().shape[0]
        print(f"dropping {n} conflicting keys", file=sys.stderr)
    rows = rows.drop_duplicates(key, keep=False).sort_values(key)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    rows.to_csv(OUT, index=False)
    print(f"wrote {len(rows)} label mappings to {OUT}")


if __name__ == "__main__":
    main(sys.argv[1:])
