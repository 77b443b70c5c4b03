"""``serving_sessions.turns`` on trace and session boundaries, against a plain-Python
reference (BurstGPT README "Schema": ``Session ID``, ``Elapsed time`` = submission to
complete response)."""

from __future__ import annotations

import polars as pl


def test_session_turns_restart_at_every_trace_and_session_boundary() -> None:
    """``turns`` after its rewrite without per-session windows: the same session id in
    two datasets, interleaved arrivals, and a null latency, against a plain-Python
    reference (turn = rank by arrival in the session; think = arrival - previous end).
    """
    from datetime import datetime, timedelta

    from gpu_trace.analyses.serving_sessions import turns

    t0 = datetime(2024, 1, 1)
    raw = [  # dataset, session, request_id, arrival s, latency s
        ("a", "1", 1, 0.0, 2.0),
        ("a", "2", 2, 1.0, None),
        ("a", "1", 3, 5.0, 1.5),
        ("a", "2", 4, 6.0, 3.0),
        ("a", "1", 5, 7.0, None),
        ("b", "1", 1, 0.5, 4.0),
        ("b", "1", 2, 9.0, 1.0),
        ("b", "3", 3, 2.0, 1.0),
    ]
    frame = pl.LazyFrame(
        {
            "source": ["burstgpt"] * len(raw),
            "dataset": [r[0] for r in raw],
            "session_id": [r[1] for r in raw],
            "request_id": [r[2] for r in raw],
            "arrival_time": [t0 + timedelta(seconds=r[3]) for r in raw],
            "input_tokens": [10] * len(raw),
            "latency_s": [r[4] for r in raw],
            "latency_kind": ["end_to_end"] * len(raw),
        }
    )
    got = {
        (r["dataset"], r["request_id"]): (r["turn"], r["think_s"], r["think_basis"])
        for r in turns(frame).collect().to_dicts()
    }
    want = {}
    for ds, sess in {(r[0], r[1]) for r in raw}:
        mine = sorted((r for r in raw if (r[0], r[1]) == (ds, sess)), key=lambda r: r[3])
        for k, r in enumerate(mine):
            if k == 0:
                want[(ds, r[2])] = (1, None, "after the previous arrival")
                continue
            prev = mine[k - 1]
            end = prev[3] + (prev[4] or 0.0)
            basis = (
                "after the previous response"
                if prev[4] is not None
                else ("after the previous arrival")
            )
            want[(ds, r[2])] = (k + 1, r[3] - end, basis)
    assert got == want
