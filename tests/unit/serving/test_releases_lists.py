"""releases.problems and releases.behind over a given list, word for word: a pin missing from its list, a
component with no list, a pin behind the newest, the pins of the code, in component order."""

from __future__ import annotations

from gridready.serving import releases
from gridready.serving.sglang.versions import pin as sglang_pin
from gridready.spec.serving import KUBERAY_VERSION, RAY_VERSION, VLLM_VERSION, KubernetesServing

LISTS = {
    "alpha": {"source": "https://example.org/alpha", "recorded": "2026-12-01", "versions": ["2.0", "1.1", "1.0"]},
    "beta": {"source": "https://example.org/beta", "recorded": "2026-11-30", "versions": ["0.9"]},
}


def test_each_problem_in_one_line_in_component_order():
    pins = {"zeta": "1", "beta": "0.8", "alpha": "1.1"}
    assert releases.problems(pins, LISTS) == [
        "releases.yml: beta: pin 0.8 is not a release in https://example.org/beta (recorded 2026-11-30: 0.9)",
        "releases.yml: zeta: no release list recorded for the pin 1",
    ]
    assert releases.problems({"alpha": "3.0"}, LISTS) == [
        "releases.yml: alpha: pin 3.0 is not a release in https://example.org/alpha (recorded 2026-12-01: "
        "2.0, 1.1, 1.0)"]
    assert releases.problems({"alpha": "2.0", "beta": "0.9"}, LISTS) == []


def test_behind_names_the_newest_release_of_pins_in_their_list_only():
    pins = {"alpha": "1.0", "beta": "0.9", "gamma": "1.0"}
    assert releases.behind(pins, LISTS) == {"alpha": "2.0"}
    assert releases.behind({"alpha": "2.0"}, LISTS) == {}
    assert releases.behind({"alpha": "0.1"}, LISTS) == {}  # not a release at all: problems' business


def test_the_recorded_lists_are_read_by_default():
    recorded = releases.recorded()
    assert releases.DATA.name == "releases.yml" and releases.DATA.parent.name == "data"
    newest = recorded["vllm"]["versions"][0]
    assert releases.behind({"vllm": newest}) == {}
    assert releases.problems({"vllm": "0.0.0-never"})[0].startswith(
        "releases.yml: vllm: pin 0.0.0-never is not a release in " + recorded["vllm"]["source"])


def test_the_code_pins():
    assert releases.code_pins() == {
        "vllm": VLLM_VERSION, "ray": RAY_VERSION, "kuberay": KUBERAY_VERSION,
        "gpu_operator": KubernetesServing().gpu_operator_version, "sglang": sglang_pin().version}
