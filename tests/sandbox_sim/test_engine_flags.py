"""The SIMULATED vllm and sglang wheels refuse the options their pinned real releases refuse (issue 29): the wheel
carries the release's own option list (gridready/data/engine_cli, read from the real wheel's argument parser), and
an option outside it stops the program as argparse does, with exit 2 and "unrecognized arguments"; before, the
simulated engine logged it as "not modelled" and served."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from sandbox import pypi
from sandbox.engine import entry

DATA = Path(__file__).resolve().parents[2] / "gridready" / "data" / "engine_cli"


@pytest.mark.parametrize("name", ["vllm", "sglang"])
def test_the_wheel_carries_its_release_options(tmp_path, name):
    wheel = next(w for w in pypi.sim_wheels() if w.name == name)
    with zipfile.ZipFile(pypi.build_wheel(wheel, tmp_path)) as zf:
        shipped = json.loads(zf.read(f"{wheel.package}/_sim_engine/engine_cli.json"))
    assert shipped == json.loads((DATA / f"{name}-{wheel.version}.json").read_text())


def test_an_option_the_release_lacks_stops_the_program(tmp_path, monkeypatch, capsys):
    (tmp_path / "engine_cli.json").write_text(json.dumps({"flags": ["--port", "--tensor-parallel-size"]}))
    monkeypatch.setattr(entry.known_flags, "__defaults__", (tmp_path / "engine_cli.json",))
    assert entry.refuse_unknown("vllm", "usage: vllm serve", ["m", "--port", "8000", "--tensor-parallel-size=8"]) \
        is None
    assert entry.refuse_unknown("vllm", "usage: vllm serve", ["--help"]) is None  # argparse's own
    assert entry.refuse_unknown("vllm", "usage: vllm serve", ["--port", "1", "--max-num-seqz", "4"]) == 2
    assert "vllm: error: unrecognized arguments: --max-num-seqz" in capsys.readouterr().err


def test_without_a_shipped_list_nothing_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(entry.known_flags, "__defaults__", (tmp_path / "absent.json",))
    assert entry.refuse_unknown("vllm", "usage", ["--anything"]) is None
