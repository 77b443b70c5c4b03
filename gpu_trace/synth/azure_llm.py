"""Synthetic Azure LLM inference trace (2023, Splitwise) in the upstream CSV format.

Writes ``OUT/AzureLLMInferenceTrace_code.csv`` and ``OUT/AzureLLMInferenceTrace_conv.csv``
exactly as Azure/AzurePublicDataset publishes them (``AzureLLMInferenceDataset2023.md``):
the header ``TIMESTAMP,ContextTokens,GeneratedTokens``, times written
``2023-11-16 18:17:03.9799600`` (seven fractional digits, the seventh always 0 in the
release), CRLF line ends and no line end after the last row (as in the released
files), so ``gpu-trace ingest azure-llm OUT`` reads them as it reads the real ones.

Calibration (every figure computed from the real 2023 files, bundled in
``data/samples/azure-llm``: code 8,819 requests, conv 19,366; the quantiles at
:data:`~gpu_trace.synth.serving_common.PERCENTILES`, numpy's linear quantiles):

- requests split between the files as in the release: 8,819 / 28,185 = 31.3 % code;
- ``ContextTokens``, ``GeneratedTokens`` and the inter-arrival times (microseconds)
  drawn from each file's own quantile table (:data:`CODE`, :data:`CONV`): medians
  1,469 / 13 tokens and 63.8 ms for code, 1,020 / 129 tokens and 118.4 ms for conv;
- input and output drawn independently: their correlation in the real files is ~0
  (Pearson on log tokens: -0.004 code, 0.088 conv);
- the first request at the real file's first time (code 18:17:03.97996, conv
  18:15:46.68059 on 2023-11-16); a larger ``--jobs`` runs longer at the same rate.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from gpu_trace.synth.serving_common import whole_from_quantiles, write_lines

HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens"
CODE_SHARE = 8819 / (8819 + 19366)


@dataclass(frozen=True)
class Service:
    """One 2023 file's calibration: its first time and three quantile tables."""

    kind: str
    start_us: int
    context: tuple[int, ...]
    generated: tuple[int, ...]
    gap_us: tuple[int, ...]


CODE = Service(
    "code",
    1_700_158_623_979_960,  # 2023-11-16 18:17:03.979960
    (3, 17, 75, 147, 386, 770, 1075, 1469, 1909, 2433, 3192, 5188, 7303, 7436, 7437, 7437),
    (6, 6, 6, 7, 8, 9, 11, 13, 16, 20, 29, 55, 90, 251, 825, 1899),
    (6, 22, 88, 209, 1184, 3292, 15104, 63798, 94990, 100130, 160069, 272856, 400776,
     2205070, 79232503, 217168952),
)  # fmt: skip
CONV = Service(
    "conv",
    1_700_158_546_680_590,  # 2023-11-16 18:15:46.680590
    (2, 29, 181, 207, 387, 403, 703, 1020, 1071, 1130, 1315, 2734, 4083, 4142, 6179, 14050),
    (7, 16, 41, 54, 77, 91, 103, 129, 177, 384, 400, 424, 451, 601, 954, 1000),
    (2, 546, 6320, 16144, 36519, 60723, 87254, 118424, 158680, 213606, 288826, 420656,
     565194, 889671, 1411171, 4314579),
)  # fmt: skip


def lines(rng: np.random.Generator, n: int, service: Service) -> pl.Series:
    """The ``n`` data lines of one file (no header), in arrival order."""
    gaps = whole_from_quantiles(rng, n, service.gap_us, low=1)
    gaps[0] = 0
    us = service.start_us + np.cumsum(gaps)
    context = whole_from_quantiles(rng, n, service.context, low=1)
    generated = whole_from_quantiles(rng, n, service.generated, low=1)
    frame = pl.DataFrame({"us": us, "c": context, "g": generated})
    return frame.select(
        pl.format(
            "{}0,{},{}",
            pl.from_epoch("us", time_unit="us").dt.strftime("%Y-%m-%d %H:%M:%S%.6f"),
            "c",
            "g",
        )
    ).to_series()


def write(out: Path, *, jobs: int, seed: int) -> list[Path]:
    """Write the code and conv files with ``jobs`` requests in all (at least one each)."""
    rng = np.random.default_rng(seed)
    code = min(max(1, round(jobs * CODE_SHARE)), max(1, jobs - 1))
    files = []
    for service, n in ((CODE, code), (CONV, max(1, jobs - code))):
        body = pl.concat([pl.Series([HEADER]), lines(rng, n, service)])
        path = out / f"AzureLLMInferenceTrace_{service.kind}.csv"
        files.append(write_lines(path, body, newline="\r\n", final=False))
    return files
