"""`python3 -m gridready.probe`'s flags (parse_args: every default, every flag, every rejection) and main (where the
document goes), in process: the probe itself replaced by a stand-in that returns a fixed document."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, ClassVar

import pytest

from gridready.probe import __main__ as probe_main
from gridready.probe import collect
from gridready.probe.__main__ import main, parse_args

DEFAULTS = {"profile": "quick", "dcgm_level": None, "algo": "ring", "nccl_min_bytes": 1073741824,
            "nccl_max_bytes": 8589934592, "best_of": 2, "timeout": 900.0, "skip": [], "nccl_tests_dir": None,
            "out": "-", "collectives": ["all_reduce"], "dcgm_precision": "h", "dcgm_outlier_pcnt": 0.0,
            "nccl_check_iters": 1}


def test_defaults() -> None:
    got = parse_args([])
    assert got == DEFAULTS
    assert list(got) == list(DEFAULTS)
    assert isinstance(got["timeout"], float) and isinstance(got["dcgm_outlier_pcnt"], float)


def test_every_flag() -> None:
    got = parse_args(["--profile", "burn-in", "--dcgm-level", "4", "--dcgm-precision", "hsd",
                      "--dcgm-outlier-pcnt", "2.5", "--algo", "nvls", "--nccl-min-bytes", "1048576",
                      "--nccl-max-bytes", "2147483648", "--best-of", "5", "--nccl-check-iters", "3",
                      "--timeout", "120", "--skip", "torch,,dcgm,", "--nccl-tests-dir", "/opt/nccl-tests/build",
                      "--collectives", "all_reduce,all_gather,,sendrecv", "--out", "/tmp/p.json"])
    assert got == {"profile": "burn-in", "dcgm_level": 4, "algo": "nvls", "nccl_min_bytes": 1048576,
                   "nccl_max_bytes": 2147483648, "best_of": 5, "timeout": 120.0, "skip": ["torch", "dcgm"],
                   "nccl_tests_dir": "/opt/nccl-tests/build", "out": "/tmp/p.json",
                   "collectives": ["all_reduce", "all_gather", "sendrecv"], "dcgm_precision": "hsd",
                   "dcgm_outlier_pcnt": 2.5, "nccl_check_iters": 3}
    assert isinstance(got["timeout"], float)


@pytest.mark.parametrize("profile", ["quick", "standard", "burn-in"])
def test_each_profile(profile: str) -> None:
    assert parse_args(["--profile", profile])["profile"] == profile


@pytest.mark.parametrize("algo", ["ring", "nvls", "tree"])
def test_each_algorithm(algo: str) -> None:
    assert parse_args(["--algo", algo])["algo"] == algo


def test_sizes_of_one_byte_are_the_smallest_accepted() -> None:
    got = parse_args(["--nccl-min-bytes", "1", "--nccl-max-bytes", "1"])
    assert (got["nccl_min_bytes"], got["nccl_max_bytes"]) == (1, 1)


def test_empty_lists() -> None:
    got = parse_args(["--skip", "", "--collectives", ","])
    assert got["skip"] == [] and got["collectives"] == []


@pytest.mark.parametrize(("argv", "says"), [
    (["--profile", "fast"], "argument --profile: invalid choice: 'fast'"),
    (["--algo", "collnet"], "argument --algo: invalid choice: 'collnet'"),
    (["--dcgm-level", "high"], "argument --dcgm-level: invalid int value: 'high'"),
    (["--dcgm-outlier-pcnt", "5%"], "argument --dcgm-outlier-pcnt: invalid float value: '5%'"),
    (["--nccl-min-bytes", "1G"], "argument --nccl-min-bytes: invalid int value: '1G'"),
    (["--nccl-max-bytes", "8e9"], "argument --nccl-max-bytes: invalid int value: '8e9'"),
    (["--nccl-min-bytes", "0"], "argument --nccl-min-bytes: must be a size of at least 1 byte, got 0"),
    (["--nccl-min-bytes", "-1024"], "argument --nccl-min-bytes: must be a size of at least 1 byte, got -1024"),
    (["--nccl-max-bytes", "0"], "argument --nccl-max-bytes: must be a size of at least 1 byte, got 0"),
    (["--best-of", "two"], "argument --best-of: invalid int value: 'two'"),
    (["--nccl-check-iters", "1.5"], "argument --nccl-check-iters: invalid int value: '1.5'"),
    (["--timeout", "15m"], "argument --timeout: invalid float value: '15m'"),
    (["--gpus", "2"], "unrecognized arguments: --gpus 2"),
])
def test_rejections_exit_2(argv: list[str], says: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parse_args(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: gridready.probe ")
    assert f"gridready.probe: error: {says}" in err


def test_help_names_every_option(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")
    with pytest.raises(SystemExit) as exc:
        parse_args(["--help"])
    assert exc.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for phrase in (
            "usage: gridready.probe", " Measure this GPU node; print one JSON document. ",
            "--profile {burn-in,quick,standard}", "--dcgm-level DCGM_LEVEL default from the profile",
            "--dcgm-precision DCGM_PRECISION diagnostic plugin precisions (h, s, d), level 3+",
            "--dcgm-outlier-pcnt DCGM_OUTLIER_PCNT level 3+, DCGM 4.5+: diagnostic plugin cross-GPU clocks/power "
            "tolerance in % (0: not passed)",
            "--algo {ring,nvls,tree}", "--nccl-min-bytes NCCL_MIN_BYTES smallest size of the gated range",
            "--nccl-max-bytes NCCL_MAX_BYTES", "--best-of BEST_OF",
            "--nccl-check-iters NCCL_CHECK_ITERS nccl-tests -c N (checks counted in #wrong)",
            "--timeout TIMEOUT seconds per long step (dcgmi, sweeps)",
            "--skip SKIP comma-separated collectors to skip, e.g. torch,dcgm",
            "--nccl-tests-dir NCCL_TESTS_DIR directory of all_reduce_perf when not on PATH",
            "--collectives COLLECTIVES comma-separated: all_reduce,all_gather,reduce_scatter,alltoall,sendrecv",
            "--out OUT file to write (default stdout)"):
        assert phrase in text, phrase


# ---- main ----------------------------------------------------------------------------------------------------

class FakeProbe:
    """Stands in for collect.Probe: records the options, returns a document with a value JSON cannot encode."""

    seen: ClassVar[list[dict[str, Any]]] = []

    def __init__(self, opts: dict[str, Any]) -> None:
        self.opts = opts
        FakeProbe.seen.append(opts)

    def run(self) -> dict[str, Any]:
        return {"schema": "gridready.probe/1", "n": [1], "path": Path("/x")}


DOC_TEXT = '{\n "schema": "gridready.probe/1",\n "n": [\n  1\n ],\n "path": "/x"\n}\n'


@pytest.fixture
def fake_probe(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    monkeypatch.setattr(FakeProbe, "seen", [])
    monkeypatch.setattr(collect, "Probe", FakeProbe)
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    return FakeProbe.seen


def test_main_prints_the_document(fake_probe: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--profile", "standard", "--skip", "torch"]) == 0
    assert capsys.readouterr().out == DOC_TEXT
    assert fake_probe == [{**DEFAULTS, "profile": "standard", "skip": ["torch"]}]
    assert os.environ["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"  # torch's GPU index is nvidia-smi's


def test_main_keeps_a_device_order_set_before(fake_probe: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "FASTEST_FIRST")
    assert main([]) == 0
    assert os.environ["CUDA_DEVICE_ORDER"] == "FASTEST_FIRST"


def test_main_reads_the_command_line(fake_probe: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "argv", ["gridready.probe", "--algo", "tree", "--best-of", "4"])
    assert main() == 0
    assert fake_probe == [{**DEFAULTS, "algo": "tree", "best_of": 4}]
    assert capsys.readouterr().out == DOC_TEXT


def test_main_writes_the_file_whole(fake_probe: list[dict[str, Any]], tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "probe.json"
    out.write_text("old")
    assert main(["--out", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == DOC_TEXT
    assert sorted(p.name for p in tmp_path.iterdir()) == ["probe.json"]  # the .tmp file renamed over it
    assert capsys.readouterr().out == ""


def test_main_leaves_the_old_file_when_writing_fails(fake_probe: list[dict[str, Any]], tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "probe.json"
    out.write_text("old")
    monkeypatch.setattr(probe_main.os, "replace", lambda a, b: (_ for _ in ()).throw(OSError("disk full")))
    with pytest.raises(OSError, match="disk full"):
        main(["--out", str(out)])
    assert out.read_text() == "old"
    assert (tmp_path / "probe.json.tmp").read_text(encoding="utf-8") == DOC_TEXT
