"""User docs speak of the product, not of its development (issue 33, docs): no internal issue numbers in the README
and the operator pages. Upstream issues are cited by their project (`nccl-tests issue 290`, a GitHub URL)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# developer pages (testing, benchmarks, device runs, architecture) may tell the project's history
USER_DOCS = ["README.md", "CHANGELOG.md", *(f"docs/{n}.md" for n in (
    "provision", "certification", "fabric", "serving", "serving-triton", "serving-sglang", "serving-embedding",
    "layer3", "bench", "monitoring", "fleet-lifecycle", "security", "discover", "sandbox", "simulator",
    "getting-started", "operations", "reference", "README"))]
INTERNAL = re.compile(r"(?<![\w/-])(?:issue #?\d+|#\d{1,3}\b(?!\w))", re.I)
UPSTREAM = re.compile(r"(?:nccl-tests|nccl|NVIDIA/\w+|ray-project/ray|vllm|sglang|kuberay|lws|triton)[ /]"
                      r"(?:issue[s]? ?/?#?\d+|#\d+)$", re.I)


@pytest.mark.parametrize("doc", USER_DOCS)
def test_no_internal_issue_numbers(doc: str) -> None:
    text = (REPO / doc).read_text()
    hits = [m for m in INTERNAL.finditer(text)
            if not UPSTREAM.search(text[max(0, m.start() - 40):m.end()])]
    assert not hits, [text[max(0, m.start() - 60):m.end() + 10] for m in hits[:5]]


@pytest.mark.parametrize("doc", USER_DOCS)
def test_relative_links_reach_a_file(doc: str) -> None:
    page = REPO / doc
    targets = re.findall(r"\]\(([^)\s#]+)(?:#[^)]*)?\)", page.read_text())
    missing = [t for t in targets if "://" not in t and not t.startswith("mailto:")
               and not (page.parent / t).exists()]
    assert not missing, missing
