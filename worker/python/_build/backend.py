"""A minimal PEP 517 build backend for the flowd package (standard library only).

It builds a pure-Python wheel from src/flowd and an sdist of this directory.
pyproject.toml's [project] table is read with tomllib where available and by
a tiny reader of the few keys used here otherwise (Python 3.9/3.10).
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile
from typing import Any, Dict, List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TAG = "py3-none-any"


def _project() -> Dict[str, Any]:
    path = os.path.join(ROOT, "pyproject.toml")
    try:
        import tomllib  # type: ignore[import-not-found]

        with open(path, "rb") as f:
            return dict(tomllib.load(f)["project"])
    except ImportError:
        pass
    out: Dict[str, Any] = {}
    section = ""
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line.startswith("["):
                section = line.strip("[]")
                continue
            m = re.match(r'^([\w-]+)\s*=\s*"(.*)"$', line)
            if section == "project" and m:
                out[m.group(1)] = m.group(2)
            elif section == "project.scripts" and m:
                out.setdefault("scripts", {})[m.group(1)] = m.group(2)
    return out


def _metadata(p: Dict[str, Any]) -> str:
    lines = ["Metadata-Version: 2.1", f"Name: {p['name']}", f"Version: {p['version']}",
             f"Summary: {p.get('description', '')}", f"Requires-Python: {p.get('requires-python', '>=3.9')}"]
    readme = os.path.join(ROOT, "README.md")
    body = ""
    if os.path.exists(readme):
        lines.append("Description-Content-Type: text/markdown")
        with open(readme, encoding="utf-8") as f:
            body = f.read()
    return "\n".join(lines) + "\n\n" + body


def _files() -> List[str]:
    out = []
    src = os.path.join(ROOT, "src")
    for dirpath, dirnames, filenames in os.walk(os.path.join(src, "flowd")):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for fn in sorted(filenames):
            if fn.endswith((".py", ".typed")):
                out.append(os.path.relpath(os.path.join(dirpath, fn), src))
    return sorted(out)


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _dist_info(p: Dict[str, Any]) -> str:
    return f"{p['name']}-{p['version']}.dist-info"


def _write_wheel(wheel_directory: str, editable: bool) -> str:
    p = _project()
    name = f"{p['name']}-{p['version']}-{TAG}.whl"
    di = _dist_info(p)
    records: List[str] = []
    path = os.path.join(wheel_directory, name)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        def add(arcname: str, data: bytes) -> None:
            z.writestr(arcname, data)
            records.append(_record_line(arcname, data))

        if editable:
            add("flowd.pth", (os.path.join(ROOT, "src") + "\n").encode())
        else:
            for rel in _files():
                with open(os.path.join(ROOT, "src", rel), "rb") as f:
                    add(rel.replace(os.sep, "/"), f.read())
        add(f"{di}/METADATA", _metadata(p).encode())
        add(f"{di}/WHEEL", f"Wheel-Version: 1.0\nGenerator: flowd-backend\nRoot-Is-Purelib: true\nTag: {TAG}\n".encode())
        scripts = p.get("scripts") or {}
        if scripts:
            add(f"{di}/entry_points.txt",
                ("[console_scripts]\n" + "".join(f"{k} = {v}\n" for k, v in scripts.items())).encode())
        add(f"{di}/top_level.txt", b"flowd\n")
        records.append(f"{di}/RECORD,,")
        z.writestr(f"{di}/RECORD", "\n".join(records) + "\n")
    return name


def build_wheel(wheel_directory: str, config_settings: Optional[Dict[str, Any]] = None,
                metadata_directory: Optional[str] = None) -> str:
    return _write_wheel(wheel_directory, editable=False)


def build_editable(wheel_directory: str, config_settings: Optional[Dict[str, Any]] = None,
                   metadata_directory: Optional[str] = None) -> str:
    return _write_wheel(wheel_directory, editable=True)


def build_sdist(sdist_directory: str, config_settings: Optional[Dict[str, Any]] = None) -> str:
    p = _project()
    base = f"{p['name']}-{p['version']}"
    name = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as tar:
        for rel in ["pyproject.toml", "README.md", "_build/backend.py"] + ["src/" + f for f in _files()]:
            full = os.path.join(ROOT, rel)
            if os.path.exists(full):
                tar.add(full, arcname=f"{base}/{rel}")
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        data = _metadata(p).encode()
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return name


def get_requires_for_build_wheel(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    return []


def get_requires_for_build_sdist(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    return []


def get_requires_for_build_editable(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    return []
