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


def _shipped(monkeypatch: pytest.MonkeyPatch, name: str) -> dict:
    """The release's table as the simulated wheel ships it, where entry reads it."""
    version = next(w for w in pypi.sim_wheels() if w.name == name).version
    path = DATA / f"{name}-{version}.json"
    monkeypatch.setattr(entry.known_options, "__defaults__", (path,))
    monkeypatch.setattr(entry.known_flags, "__defaults__", (path,))
    monkeypatch.setattr(entry.refuse_config, "__defaults__", (path,))
    return json.loads(path.read_text())


@pytest.mark.parametrize(("argv", "needle"), [
    (["m", "--tensor-parallel-size", "two"], "argument --tensor-parallel-size/-tp: invalid int value: 'two'"),
    (["m", "--dtype", "fp9"], "argument --dtype: invalid choice: 'fp9'"),
    (["m", "--tensor-paralel-size", "8"], "unrecognized arguments: --tensor-paralel-size"),
])
def test_vllm_refuses_what_its_parser_refuses(monkeypatch, capsys, argv, needle):
    """The values too: the wheel carries the pinned parser's types and choices (tools/engine_cli_dump.py ran in an
    environment with vLLM 0.33.0 installed), and argparse judges with them, exit 2."""
    _shipped(monkeypatch, "vllm")
    assert entry.refuse_unknown("vllm serve", "usage", argv, ("model_tag",)) == 2
    assert needle in capsys.readouterr().err.replace('"', "'")


def test_vllm_takes_what_its_parser_takes_and_its_config_refuses_the_rest(monkeypatch, capsys):
    _shipped(monkeypatch, "vllm")
    ok = ["m", "--tensor-parallel-size", "8", "--no-enable-prefix-caching", "--disable-chunked-prefill",
          "--max-model-len", "32768", "--kv-cache-dtype", "fp9"]
    assert entry.refuse_unknown("vllm serve", "usage", ok, ("model_tag",)) is None  # vLLM's parser takes any string
    # ... and CacheConfig refuses it when the engine starts (vllm/config/cache.py _validate_cache_dtype)
    assert entry.refuse_config(ok) == 1
    assert "Invalid kv_cache_dtype: 'fp9'" in capsys.readouterr().err
    assert entry.refuse_config(["m", "--kv-cache-dtype", "fp8_e4m3"]) is None


def test_sglang_refuses_a_kv_cache_dtype_outside_its_choices(monkeypatch, capsys):
    _shipped(monkeypatch, "sglang")
    assert entry.refuse_unknown("launch_server.py", "usage", ["--model-path", "m", "--kv-cache-dtype", "fp8"]) == 2
    assert "argument --kv-cache-dtype: invalid choice: 'fp8'" in capsys.readouterr().err.replace('"', "'")
    assert entry.refuse_unknown("launch_server.py", "usage", ["--model-path", "m", "--kv-cache-dtype", "fp8_e4m3",
                                                             "--tp-size", "8"]) is None
