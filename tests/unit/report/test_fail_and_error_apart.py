"""A failure reads apart from an error at a glance: the HTML matrix gives fail and error different colours and a
legend with both, and the busbw plot labels each curve by what the all-reduce gate said of it, not by the node's
verdict (a node failed for its H2D bandwidth has a healthy all-reduce curve)."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
from matplotlib.figure import Figure

from gridready.certify.judge import judge_fleet, judge_node
from gridready.report import write_all
from tests.unit.certify.fixtures_io import group, probe_quick, spec

S = spec(not_applicable=["dcgm", "peermem"])


@pytest.fixture(scope="module")
def judged():
    slow = copy.deepcopy(probe_quick())
    slow["torch"]["gpus"][0]["h2d_gbps"] = 12.0  # fails h2d_bandwidth, all-reduce untouched
    broken = copy.deepcopy(probe_quick())
    broken["torch"] = None  # no torch section: the torch gates cannot judge (error)
    nodes = [judge_node(S, group(), probe_quick(), node="gpu-ok"), judge_node(S, group(), slow, node="gpu-slow"),
             judge_node(S, group(), broken, node="gpu-broken")]
    return judge_fleet(S, nodes, outliers=False)


def _cell_colours(page: str, node: str) -> set[str]:
    row = re.search(rf"<tr><th>{node}</th>(.*?)</tr>", page).group(1)
    return {m.group(2): m.group(1) for m in re.finditer(r'background:(#[0-9a-f]+)">(\w+)</td>', row)}


def test_fail_and_error_have_their_own_colours_and_a_legend(judged, tmp_path: Path) -> None:
    page = write_all(judged, tmp_path)["report_html"].read_text()
    fail, error = _cell_colours(page, "gpu-slow")["F"], _cell_colours(page, "gpu-broken")["E"]
    assert fail != error
    legend = page[page.index('<p class="legend">'):]
    assert f'background:{fail}">F</span> fail' in legend and f'background:{error}">E</span> error' in legend


def test_busbw_legend_speaks_of_the_curve(judged, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list = []
    orig = Figure.savefig

    def keep(self: Figure, *a: object, **k: object) -> None:
        seen.extend(self.axes)
        orig(self, *a, **k)

    monkeypatch.setattr(Figure, "savefig", keep)
    write_all(judged, tmp_path)
    labels = {line.get_label() for ax in seen for line in ax.get_lines()}
    assert "gpu-slow: all-reduce at or above the floor" in labels  # not certified, but its curve is fine
    assert not any("FAIL" in label for label in labels)
