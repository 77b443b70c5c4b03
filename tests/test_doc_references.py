"""Every ``docs/NAME.md`` that the code, the tests, the bundled data notes or the README
point a reader to exists in the repository.

The team's research notes (trace formats, published analyses) live outside the
repository, so a reference to them is a dead end for a user, worst of all inside an
error message; upstream sources (a trace's README) are cited instead.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REF = re.compile(r"(?<![\w/.-])(?:\.\./)*docs/([A-Za-z0-9_-]+\.md)")


def _texts() -> list[Path]:
    found = [ROOT / "README.md"]
    for folder, pattern in [
        ("gpu_trace", "*.py"),
        ("gpu_trace", "*.toml"),
        ("tests", "*.py"),
        ("bench", "*.py"),
        ("data", "*.md"),
        ("docs", "*.md"),
    ]:
        found += sorted(p for p in (ROOT / folder).rglob(pattern) if p.name != Path(__file__).name)
    return found


def test_every_docs_reference_exists() -> None:
    files = _texts()
    assert len(files) > 100  # the scan sees the tree
    missing = sorted(
        f"{path.relative_to(ROOT)}: docs/{name}"
        for path in files
        for name in set(REF.findall(path.read_text(encoding="utf-8", errors="replace")))
        if not (ROOT / "docs" / name).is_file()
    )
    assert missing == []


def test_the_pattern_sees_the_forms_used() -> None:
    text = "see ``docs/replay.md``, `../docs/x-y.md` and (docs/analyses.md 3.3)"
    assert sorted(REF.findall(text)) == ["analyses.md", "replay.md", "x-y.md"]
    assert REF.findall("shared/docs/style.md") == []  # another repository's docs
