"""gridready.probe.hca.run against real processes: what the stand-in of tests/unit/probe/fake_node.py (Processes)
assumes of the subprocess module, checked once on the real one. These start processes, so the mutation run leaves
this file out (benchmarks/mutation_score.py STARTS_PROCESSES); test_hca_probe_collectors.py covers run in process."""

from __future__ import annotations

import os
import subprocess

from gridready.probe import hca


def test_run_records_exit_code_and_both_streams(tmp_path):
    argv = ["sh", "-c", "pwd -P; echo bad >&2; exit 3"]
    assert hca.run(argv, cwd=tmp_path) == {"argv": argv, "rc": 3, "stdout": f"{os.path.realpath(tmp_path)}\n",
                                           "stderr": "bad\n", "error": None}


def test_run_timeout_keeps_partial_output():
    argv = ["sh", "-c", "echo partial; exec sleep 20"]
    got = hca.run(argv, timeout=0.8)
    assert got == {"argv": argv, "rc": None, "stdout": "partial\n", "stderr": "", "error": "timed out after 0.8s"}


def test_timeout_expired_carries_bytes_even_with_text():
    """The stand-in's Hangs raises TimeoutExpired with bytes output, as the real run does with text=True."""
    try:
        subprocess.run(["sh", "-c", "echo partial; exec sleep 20"], capture_output=True, text=True, timeout=0.8,
                       check=False)
    except subprocess.TimeoutExpired as exc:
        assert exc.stdout == b"partial\n"
    else:
        raise AssertionError("sleep 20 finished within 0.8 s")
