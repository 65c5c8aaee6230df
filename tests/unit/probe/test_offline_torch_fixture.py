"""probe.offline's reading of a torch_probe.json capture (fixtures/h200x2, the lent 2x H200 machine) into the
probe's `torch` section: each figure under the key the gates read, per GPU, per peer pair, per all-reduce size."""

from __future__ import annotations

import json
from typing import Any

from gridready.probe.offline import _torch_from_fixture, doc_from_outputs
from tests.unit.certify.fixtures_io import H200

TEXT = (H200 / "torch_probe.json").read_text()


def test_the_h200_capture() -> None:
    t = _torch_from_fixture(TEXT)
    assert (t["present"], t["version"], t["cuda"], t["cuda_available"], t["device_count"]) == (
        True, "2.11.0+cu130", "13.0", True, 2)
    assert t["gpus"] == [
        {"index": 0, "name": "NVIDIA H200",
         "bf16_gemm_tflops": {"8192": 800.3591410894227, "16384": 710.4453449825014},
         "fp8_gemm_tflops": {"16384": 1371.848821970265}, "hbm_copy_tbps": 4.049453789790833,
         "h2d_gbps": 55.454124489019385, "d2h_gbps": 55.30716512722683},
        {"index": 1, "name": "NVIDIA H200",
         "bf16_gemm_tflops": {"8192": 802.4114241425963, "16384": 715.0310976641122},
         "fp8_gemm_tflops": {"16384": 1350.0613829186368}, "hbm_copy_tbps": 4.173089673316896,
         "h2d_gbps": 55.516831460265465, "d2h_gbps": 55.3389899417322}]
    assert t["peer"] == [{"src": 0, "dst": 1, "access": True, "gbps": 395.4109105474399}]
    ar = t["allreduce"]
    assert {k: v for k, v in ar.items() if k != "sizes"} == {"world": 2, "wrong": 0, "nccl": "2.28.9", "algo": "ring",
                                                             "env": {"NCCL_NVLS_ENABLE": "0"}}
    assert len(ar["sizes"]) == 16
    assert ar["sizes"][0] == {"bytes": 8, "time_us": 54.68084999975531, "algbw_gbps": 0.00014630350479255164,
                              "busbw_gbps": 0.00014630350479255164,
                              "busbw_trials_gbps": [0.00014630350479255164]}
    assert ar["sizes"][-1] == {"bytes": 8589934592, "time_us": 24427.281600000584, "algbw_gbps": 351.653316675229,
                               "busbw_gbps": 351.653316675229, "busbw_trials_gbps": [351.653316675229]}


def _gpu(**kw: Any) -> dict[str, Any]:
    return {"bf16_gemm_4096_tflops": 1.0, "fp8_gemm_8192_tflops": 2.0, "bf16_gemm_x_tflops": 9.0,
            "xbf16_gemm_1_tflops": 8.0, "fp8_gemm_2_tflops_max": 7.0, **kw}


def test_three_gpus_peer_access_and_missing_figures() -> None:
    src = {"device_count": "3", "devices": ["A", "B", "C"], "torch": "2.5.1", "cuda": "12.4",
           "gpu0": _gpu(hbm_copy_rw_TBps=3.1), "gpu2": {"h2d_GBps": 25.0, "d2h_GBps": 26.0},
           "p2p_access_0_2": False, "p2p_0to2_GBps": 0.0, "p2p_2to0_GBps": 40.5, "p2p_access_2_0": True,
           "p2p_1to12_GBps": 1.0, "xp2p_0to1_GBps": 9.0}
    t = _torch_from_fixture(json.dumps(src))
    assert t["device_count"] == 3 and [g["name"] for g in t["gpus"]] == ["A", "B", "C"]
    g0, g1, g2 = t["gpus"]
    # re.match anchors at the start only: "..._tflops_max" still matches, "xbf16..." and "_x_" do not
    assert g0["bf16_gemm_tflops"] == {"4096": 1.0}
    assert g0["fp8_gemm_tflops"] == {"8192": 2.0, "2": 7.0}
    assert g0["hbm_copy_tbps"] == 3.1 and g0["h2d_gbps"] is None and g0["d2h_gbps"] is None
    assert g1 == {"index": 1, "name": "B", "bf16_gemm_tflops": {}, "fp8_gemm_tflops": {}, "hbm_copy_tbps": None,
                  "h2d_gbps": None, "d2h_gbps": None}
    assert (g2["index"], g2["h2d_gbps"], g2["d2h_gbps"]) == (2, 25.0, 26.0)
    assert t["peer"] == [{"src": 0, "dst": 2, "access": False, "gbps": 0.0},
                         {"src": 2, "dst": 0, "access": True, "gbps": 40.5},
                         {"src": 1, "dst": 12, "access": True, "gbps": 1.0}]  # no access key: assumed
    assert t["allreduce"] is None  # no torch_allreduce rows


def test_no_device_names_and_no_devices() -> None:
    t = _torch_from_fixture(json.dumps({"device_count": 2, "gpu1": {"h2d_GBps": 5.0}}))
    assert [(g["index"], g["name"]) for g in t["gpus"]] == [(0, None), (1, None)]
    assert t["gpus"][1]["h2d_gbps"] == 5.0
    empty = _torch_from_fixture(json.dumps({"torch": "2.4.0"}))
    assert empty == {"present": True, "version": "2.4.0", "cuda": None, "cuda_available": True, "device_count": 0,
                     "gpus": [], "peer": [], "allreduce": None}


def test_allreduce_world_is_the_gpu_count() -> None:
    src = {"device_count": 4, "nccl": "2.21.5",
           "torch_allreduce": [{"bytes": 1 << 30, "us": 5000.0, "algbw_GBps": 214.7, "busbw_GBps": 322.1}]}
    ar = _torch_from_fixture(json.dumps(src))["allreduce"]
    assert ar == {"world": 4, "wrong": 0, "nccl": "2.21.5", "algo": "ring", "env": {"NCCL_NVLS_ENABLE": "0"},
                  "sizes": [{"bytes": 1 << 30, "time_us": 5000.0, "algbw_gbps": 214.7, "busbw_gbps": 322.1,
                             "busbw_trials_gbps": [322.1]}]}


def test_doc_from_outputs_reads_it() -> None:
    assert doc_from_outputs({"torch_probe": TEXT})["torch"] == _torch_from_fixture(TEXT)
