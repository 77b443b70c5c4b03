"""Kubernetes: unit tests (the quantity grammar and the fuzz harness's counting rule;
no store)."""

from __future__ import annotations

import pytest

from gpu_trace.loaders.k8s_quantity import scaled


@pytest.mark.parametrize(
    ("text", "milli", "whole", "expected"),
    [
        ("500m", True, False, 500),  # 500 milli-cores
        ("2", True, False, 2000),
        ("0.5", True, False, 500),
        ("4Gi", False, False, 4 * 2**30),
        ("512Mi", False, False, 512 * 2**20),
        ("1G", False, False, 10**9),
        ("1e9", False, False, 10**9),
        ("1E3", False, False, 1000),  # E followed by digits is an exponent ...
        ("1E", False, False, 10**18),  # ... E alone is exa
        ("128974848", False, False, 128974848),
        ("0.1Gi", False, False, 107374183),  # 107374182.4 rounded up, as Value() does
        ("1.5Gi", False, False, 1610612736),
        ("+.5k", False, False, 500),
        ("5.", False, False, 5),
        ("1m", False, False, 1),  # 0.001 byte rounds up to 1
        ("0.0001", True, False, 1),  # 0.1 milli-core rounds up
    ],
)
def test_quantity_values(text: str, milli: bool, whole: bool, expected: int) -> None:
    assert scaled(text, milli, whole) == (expected, None)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("4 GiB", "is not a Kubernetes quantity"),
        ("4GB", "is not a Kubernetes quantity"),
        ("1e", "is not a Kubernetes quantity"),
        (".", "is not a Kubernetes quantity"),
        ("", "is not a Kubernetes quantity"),
        ("-1", "is negative"),
        ("1e999", "is out of range"),
        ("9Ei", "is out of range"),  # 9 * 2**60 > 2**63 - 1
    ],
)
def test_quantity_rejects(text: str, why: str) -> None:
    assert scaled(text, False, False) == (None, why)


def test_extended_resources_are_whole() -> None:
    value, why = scaled("0.5", False, True)
    assert value is None and why is not None and "whole number" in why


def test_fuzz_counting_rule_by_hand() -> None:
    from bench.fuzz_check import expect

    lines = b'{"kind": "Pod"}\n\n{"kind": "Node"}\nnot json\n'
    # records: Pod, Node, a non-JSON line (the blank line is none); the Node counts on
    # both machines lines -> 3 + 1
    assert expect("kubernetes", "p.jsonl", lines).lines == 4
    doc = b'{"kind": "List", "items": [{"kind": "Node"}, {"kind": "Node"}, {"kind": "Pod"}]}'
    assert expect("kubernetes", "n.json", doc).lines == 3 + 2
    assert expect("kubernetes", "n.json", b'{\n  "kind": "List",\n  "items": [\n').mode == "none"
