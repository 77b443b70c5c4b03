"""The UTF-8 check of ``file_info`` / ``utf8_valid`` skips decoding ASCII chunks (issue 25,
performance); a multi-byte sequence cut by a chunk boundary must still be judged whole.

UTF-8 itself (RFC 3629, section 3): a lead byte 0xC3 must be followed by one
continuation byte 0x80-0xBF; a lone lead byte, or one followed by ASCII, is invalid.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_trace.loaders.textfile import _CHUNK, file_info, utf8_valid

E_ACUTE = "é".encode()  # 0xC3 0xA9


@pytest.mark.parametrize(
    ("tail", "valid"),
    [
        (E_ACUTE + b",b\n" * 3, True),  # 0xC3 ends chunk 1, 0xA9 opens the ASCII chunk 2
        (b"\xc3" + b",b\n" * 3, False),  # 0xC3 ends chunk 1, chunk 2 is plain ASCII
        (b"\xc3", False),  # the file ends inside the sequence
        (b"\xa9,b\n", False),  # a continuation byte with no lead byte
    ],
)
def test_sequence_across_a_chunk_boundary(tmp_path: Path, tail: bytes, valid: bool) -> None:
    path = tmp_path / "x.csv"
    # short lines (under the 1 MiB line cap) filling chunk 1 up to its last byte
    line = b"a" * 1023 + b"\n"
    head = line * ((_CHUNK - 1) // len(line))
    path.write_bytes(head + b"a" * (_CHUNK - 1 - len(head)) + tail)
    assert file_info(path, 0).utf8 is valid
    assert utf8_valid(path) is valid


def test_ascii_file_counts_and_hashes_as_before(tmp_path: Path) -> None:
    import hashlib

    data = b"h1,h2\n" + b"1,2\n" * 1000
    path = tmp_path / "x.csv"
    path.write_bytes(data)
    info = file_info(path, 1)
    assert (info.utf8, info.records, info.size_bytes) == (True, 1000, len(data))
    assert info.sha256 == hashlib.sha256(data).hexdigest()
