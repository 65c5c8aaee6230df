"""software.python_index: the nodes' PyPI mirror, refused at validate unless pip could use it safely, and the pip
arguments every role that installs Python packages gets from it."""

from __future__ import annotations

import pytest

from gridready.errors import InvalidInput
from gridready.inventory import load
from gridready.stages.common import base_extravars, pip_index_args
from tests.unit.test_inventory_errors import CLUSTER, make_inventory

C = "inventories/acme/cluster.yml: software.python_index: "


def _load(tmp_path, monkeypatch, software: dict):
    make_inventory(tmp_path, cluster={**CLUSTER, "software": software})
    monkeypatch.chdir(tmp_path)
    return load("acme")


@pytest.mark.parametrize(("software", "expected"), [
    ({"python_index": "http://10.0.0.5:8080/simple/"}, C + "a plain-http index needs"),
    ({"python_index": "https://user:secret@pypi.example.internal/simple/"}, C + "a URL with a user:password part"),
    ({"python_index": "https://pypi.example.internal/simple/\n"}, C + "must be an http(s) URL"),
    ({"python_index": "ftp://pypi.example.internal/simple/"}, C + "must be an http(s) URL"),
    ({"python_index": "https://pypi.example.internal/simple/?token=x"}, C + "must be an http(s) URL"),
    ({"python_index": "--index-url=https://evil/"}, C + "must be an http(s) URL"),
])
def test_an_index_pip_would_ignore_or_leak_is_refused(tmp_path, monkeypatch, software, expected):
    with pytest.raises(InvalidInput) as err:
        _load(tmp_path, monkeypatch, software)
    assert any(line.startswith(expected) for line in err.value.lines), err.value.lines
    assert not any("secret" in line for line in err.value.lines)


def test_pip_arguments_follow_the_index(tmp_path, monkeypatch):
    https = _load(tmp_path / "a", monkeypatch, {"python_index": "https://pypi.example.internal/simple/"})
    assert pip_index_args(https) == ["--index-url", "https://pypi.example.internal/simple/"]
    plain = _load(tmp_path / "b", monkeypatch, {"python_index": "http://10.0.0.5:8080/simple/",
                                                "python_index_plain_http": True})
    assert base_extravars(plain)["gridready_pip_index_args"] == [
        "--index-url", "http://10.0.0.5:8080/simple/", "--trusted-host", "10.0.0.5"]
    assert pip_index_args(_load(tmp_path / "c", monkeypatch, {})) == []
