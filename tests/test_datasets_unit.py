"""The dataset registry's published numbers and URL resolution (no network, no server).

Expected sizes, checksums and URLs are the ones the upstream pages publish (copied by hand
from their READMEs and release pages), or are computed here with hashlib from the upstream
copies bundled in ``data/samples``.
"""

from __future__ import annotations

import pytest

from gpu_trace.datasets import MIRROR_ENV, Member, get, registry, resolve_urls
from gpu_trace.errors import DatasetError
from tests.conftest import SAMPLES
from tests.datasets_common import OPENB_FILES, no_mirror_no_proxy, sha


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """No mirror or proxy from the environment (:func:`~tests.datasets_common.no_mirror_no_proxy`)."""
    no_mirror_no_proxy(monkeypatch)


def test_registry_carries_the_published_numbers() -> None:
    """The sizes, sha256s and URLs are the upstream READMEs' (Philly, PAI 2020, AcmeTrace), copied
    by hand; Helios and AcmeTrace publish none, so theirs are unpinned. Every entry credits
    its source (licence, citation, https homepage and URLs)."""
    reg = registry()
    assert list(reg) == [
        "philly",
        "helios",
        "pai2020",
        "openb",
        "acme",
        "azure-llm",
        "mooncake",
        "burstgpt",
        "gentd26",
    ]
    philly = reg["philly"].file("trace-data.tar.gz")
    assert philly.size == 1_055_988_361
    assert philly.sha256 == "2037ccf63a725a02be718b0e1aeee6142c90b7f62d0d849295120e9f6ba13d2c"
    assert (
        philly.urls[0] == "https://github.com/msr-fiddle/philly-traces/raw/master/trace-data.tar.gz"
    )
    helios = reg["helios"].file("data.zip")
    assert helios.sha256 is None and helios.size is None and not helios.verifiable
    assert helios.urls == ("https://github.com/S-Lab-System-Group/HeliosData/raw/master/data.zip",)
    tarballs = [f for f in reg["pai2020"].files if f.extract == "tar.gz"]
    assert len(tarballs) == 7
    assert all(
        f.urls[0] == f"https://aliopentrace.oss-cn-beijing.aliyuncs.com/v2020GPUTraces/{f.name}"
        for f in tarballs
    )
    job = reg["pai2020"].file("pai_job_table.tar.gz")
    assert job.sha256 == "5aad7f7caac501136d14ed6a48e40546f825d7b0617a3a4f337e2348fe0a6cb0"
    assert job.contents == (
        Member(
            "pai_job_table.csv",
            "379ecb3becaba347f44a53bf7eb53e54b185221b2a0338a3f828828d269ba96c",
        ),
    )
    acme = reg["acme"]
    # upstream publishes no sizes or checksums for the job traces: unverified downloads
    assert [f.name for f in acme.files] == ["trace_seren.csv", "trace_kalos.csv"]
    assert all(f.sha256 is None and f.size is None and not f.verifiable for f in acme.files)
    assert acme.file("trace_kalos.csv").urls[0] == (
        "https://raw.githubusercontent.com/InternLM/AcmeTrace/master/data/job_trace/trace_kalos.csv"
    )
    for ds in reg.values():
        assert ds.license and ds.citation and ds.homepage.startswith("https://")
        assert all(u.startswith("https://") for f in ds.files for u in f.urls)


def test_registry_checksums_match_the_bundled_upstream_copies() -> None:
    """The openb and PAI 2020 entries pin exactly the bytes of the upstream copies bundled in
    data/samples (size and sha256 computed here with hashlib)."""
    openb = get("openb")
    assert [f.name for f in openb.files] == list(OPENB_FILES)
    for name in OPENB_FILES:
        data = (SAMPLES / "openb" / name).read_bytes()
        f = openb.file(name)
        assert (f.size, f.sha256) == (len(data), sha(data))
        assert f.urls[0] == (
            "https://raw.githubusercontent.com/alibaba/clusterdata/master/"
            f"cluster-trace-gpu-v2023/csv/{name}"
        )
    pai = get("pai2020")
    headers = sorted((SAMPLES / "pai2020" / "headers").glob("*.header"))
    assert len(headers) == 7
    for h in headers:
        f = pai.file(h.name)
        data = h.read_bytes()
        assert (f.size, f.sha256) == (len(data), sha(data))
    spec = pai.file("pai_machine_spec.tar.gz").contents[0]
    data = (SAMPLES / "pai2020" / "pai_machine_spec.csv").read_bytes()
    assert (spec.path, spec.size, spec.sha256) == ("pai_machine_spec.csv", len(data), sha(data))


def test_mirror_replaces_scheme_host_and_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """A mirror (the argument, else $GPU_TRACE_DATASETS_MIRROR) replaces scheme, host and path
    with <mirror>/<dataset>/<file>; a mirror that is not http(s) is refused."""
    ds = get("openb")
    f = ds.files[0]
    assert resolve_urls(ds, f) == f.urls
    assert resolve_urls(ds, f, "http://mirror.local/traces/") == (
        f"http://mirror.local/traces/openb/{f.name}",
    )
    monkeypatch.setenv(MIRROR_ENV, "https://proxy.example/raw")
    assert resolve_urls(ds, f) == (f"https://proxy.example/raw/openb/{f.name}",)
    with pytest.raises(DatasetError, match="must be an http"):
        resolve_urls(ds, f, "ftp://x")
