"""The node probe goes to the node as one archive (issue 30, item 7: file by file the copy took 15 s of a 31 s quick
certification on the lent H200): every module of gridready/probe under gridready_probe/, no bytecode."""

from __future__ import annotations

import tarfile
from pathlib import Path

from gridready import probe
from gridready.stages.certify import probe_archive


def test_archive_holds_the_probe_package(tmp_path: Path) -> None:
    path = probe_archive(tmp_path / "p.tar.gz")
    with tarfile.open(path) as tar:
        names = set(tar.getnames())
    want = {f"gridready_probe/{p.name}" for p in Path(probe.__file__).parent.glob("*.py")}
    assert want <= names and "gridready_probe/sdc.py" in names and "gridready_probe/__main__.py" in names
    assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)
