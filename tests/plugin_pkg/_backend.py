"""A minimal PEP 517 build backend: the package's ``toy_*.py`` modules and a dist-info
(METADATA, WHEEL, entry_points.txt from ``pyproject.toml``, RECORD) in one wheel."""

from __future__ import annotations

import base64
import hashlib
import tomllib
import zipfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent


def _files() -> dict[str, bytes]:
    project = tomllib.loads((HERE / "pyproject.toml").read_text())["project"]
    name, version = project["name"].replace("-", "_"), project["version"]
    info = f"{name}-{version}.dist-info"
    eps = "".join(
        f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in entries.items()) + "\n"
        for group, entries in project["entry-points"].items()
    )
    files = {p.name: p.read_bytes() for p in sorted(HERE.glob("toy_*.py"))}
    files[f"{info}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {version}\n"
    ).encode()
    files[f"{info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: _backend\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    files[f"{info}/entry_points.txt"] = eps.encode()
    record = ""
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record += f"{path},sha256={digest},{len(data)}\n"
    files[f"{info}/RECORD"] = (record + f"{info}/RECORD,,\n").encode()
    return files


def get_requires_for_build_wheel(config_settings: Any = None) -> list[str]:
    return []


def build_wheel(
    wheel_directory: str, config_settings: Any = None, metadata_directory: Any = None
) -> str:
    project = tomllib.loads((HERE / "pyproject.toml").read_text())["project"]
    wheel = f"{project['name'].replace('-', '_')}-{project['version']}-py3-none-any.whl"
    with zipfile.ZipFile(Path(wheel_directory) / wheel, "w") as zf:
        for path, data in _files().items():
            zf.writestr(path, data)
    return wheel
