"""Regenerate the CSV files of this folder from the R package fields.

Run from the repository root (needs Rscript with the Debian package
r-cran-fields 14.1-1, and Python with pandas and pyreadr)::

    python datasets/convert_fields.py

Step 1 runs ``Rscript datasets/convert_fields.R TMPDIR``, which saves one
data frame per dataset as binary ``.rds`` (exact doubles).  Step 2 reads them
with pyreadr and writes ``datasets/<name>.csv``: each number is written as the
shortest decimal that parses back to the same double (Python ``repr``),
missing values are empty fields.  Every file is read back and compared
bit for bit with the data from R; any difference stops the script.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pyreadr

HERE = Path(__file__).resolve().parent
NAMES = ["north_american_rainfall", "colorado_temperature", "ozone2", "rm_precip", "co2"]


def convert(name: str, rds_dir: Path, out_dir: Path) -> pd.DataFrame:
    """Write ``out_dir/<name>.csv`` from ``rds_dir/<name>.rds`` and check it."""
    frame = pyreadr.read_r(str(rds_dir / f"{name}.rds"))[None].reset_index(drop=True)
    path = out_dir / f"{name}.csv"
    frame.to_csv(path, index=False, na_rep="", lineterminator="\n")
    text_cols = [c for c in frame.columns if not pd.api.types.is_float_dtype(frame[c])]
    # The python engine parses floats with Python's float(), which is exact.
    back = pd.read_csv(
        path,
        dtype={c: str for c in text_cols},
        keep_default_na=False,
        na_values=[""],
        engine="python",
    )
    if list(back.columns) != list(frame.columns):
        raise RuntimeError(f"{name}: column names changed on re-reading")
    for col in frame.columns:
        if col in text_cols:
            same = frame[col].astype(str).tolist() == back[col].tolist()
        else:
            same = np.array_equal(frame[col].to_numpy(), back[col].to_numpy(), equal_nan=True)
        if not same:
            raise RuntimeError(f"{name}: column {col} differs after re-reading the CSV")
    return frame


def main() -> None:
    """Run both conversion steps for every dataset."""
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["Rscript", str(HERE / "convert_fields.R"), tmp], check=True)
        for name in NAMES:
            frame = convert(name, Path(tmp), HERE)
            sys.stdout.write(f"{name}.csv: {frame.shape[0]} rows, {frame.shape[1]} columns\n")


if __name__ == "__main__":
    main()
