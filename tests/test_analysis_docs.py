"""docs/analyses/ is generated from the analysis declarations, each page with a worked
example on the bundled samples (``make docs``); a stale page fails here."""

from __future__ import annotations

from pathlib import Path

from gpu_trace import analysis_docs, plugins

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "analyses"


def test_pages_match_the_declarations_and_the_samples() -> None:
    assert analysis_docs.main([str(DOCS), "--check"]) == 0, "run `make docs`"


def test_one_page_per_analysis_with_its_example() -> None:
    names = {p.name for p in plugins.builtins("analyses")}
    assert {p.stem for p in DOCS.glob("*.md")} == names | {"README"}
    queueing = (DOCS / "queueing.md").read_text(encoding="utf-8")
    assert "$ gpu-trace analyze queueing --max-rows 8" in queueing
    assert "| `--by` | `'gpus'` |" in queueing  # its declared option and default
    # every output column listed, with its unit from the declaration
    assert "| `median_s` | median | s | median queueing delay |" in queueing
    index = (DOCS / "README.md").read_text(encoding="utf-8")
    assert all(f"[`{n}`]({n}.md)" in index for n in names)
