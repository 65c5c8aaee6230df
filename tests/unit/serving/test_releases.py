"""Every serving pin is a release in the upstream list recorded for it (gridready/data/releases.yml)."""

from __future__ import annotations

from pathlib import Path

import yaml

from gridready.serving import releases
from gridready.stacks.platform.program import LWS_VERSION

REPO = Path(__file__).resolve().parents[3]


def _all_pins() -> dict[str, str]:
    weights = yaml.safe_load((REPO / "roles/gridready_model_weights/defaults/main.yml").read_text())
    hub = weights["gridready_model_weights_pip_spec"].split("==")[1]
    return {**releases.code_pins(), "lws": LWS_VERSION, "huggingface_hub": hub}


def test_every_pin_is_an_upstream_release():
    pins = _all_pins()
    assert set(pins) == set(releases.recorded())  # every recorded list checks a pin, every pin has a list
    assert releases.problems(pins) == []


def test_a_pin_missing_from_its_release_list_is_named():
    lists = releases.recorded()
    wrong = {**_all_pins(), "vllm": "0.33.7", "lws": "0.99.0"}
    found = releases.problems(wrong, lists)
    assert len(found) == 2
    assert found[0].startswith("releases.yml: lws: pin 0.99.0 is not a release in https://github.com/kubernetes-sigs/lws")
    assert "vllm: pin 0.33.7" in found[1] and "pypi.org/project/vllm" in found[1]
    assert releases.problems({"tgi": "3.0.0"}, lists) == [
        "releases.yml: tgi: no release list recorded for the pin 3.0.0"]


def test_pins_behind_the_newest_release_are_stated():
    lagging = releases.behind(_all_pins())
    # the GPU Operator chart stays on v25.10.1 and SGLang on 0.5.19 (CUDA 12 images, sglang_versions.yml)
    assert lagging == {"gpu_operator": "v26.7.0", "sglang": "0.5.23"}
