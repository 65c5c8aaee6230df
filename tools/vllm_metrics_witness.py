"""Write gridready/data/engine_cli/vllm-<version>-metrics.json: the Prometheus metrics the pinned vLLM exposes, read
from its own source (vllm/v1/metrics/loggers.py, vllm/v1/metrics/buckets.py): each histogram's name, documentation,
bucket family and default bounds, each counter's and gauge's name (prometheus_client adds `_total` to a counter),
and the label names.
The canary gate, the prefix-cache reading and the monitoring rules name these metrics; their tests build a scrape
from this file, so a renamed metric or a changed bucket in a new pin fails them.

    pip download --no-deps vllm==<pin> -d /tmp/vw && cd /tmp/vw && unzip -q vllm-*.whl 'vllm/v1/metrics/*'
    .venv/bin/python tools/vllm_metrics_witness.py --src /tmp/vw --version <pin>

Only the two source files are read (the module is parsed, never imported: vLLM needs torch); buckets.py is a
stdlib-only module and is loaded by path for its bound tuples.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def _const(node: ast.AST | None) -> Any:
    try:
        return ast.literal_eval(node) if node is not None else None
    except ValueError:
        return None


def _kwargs(call: ast.Call) -> dict[str, ast.AST]:
    return {k.arg: k.value for k in call.keywords if k.arg}


def _families(tree: ast.AST) -> dict[str, str]:
    """Local name -> bucket family, from `x = histogram_buckets("family", ...)`."""
    out = {}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Call) and getattr(node.value.func, "id", None) == "histogram_buckets"
                and node.value.args):
            family = _const(node.value.args[0])
            if isinstance(family, str):
                out[node.targets[0].id] = family
    return out


def _default_labelnames(tree: ast.AST) -> list[str]:
    for node in ast.walk(tree):
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id == "labelnames"):
            value = _const(node.value)
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                return value
    raise SystemExit("loggers.py: no `labelnames = [...]` assignment found")


def witness(src: Path, version: str) -> dict[str, Any]:
    metrics = src / "vllm" / "v1" / "metrics"
    spec = importlib.util.spec_from_file_location("vllm_metrics_buckets", metrics / "buckets.py")
    assert spec and spec.loader
    buckets = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(buckets)
    tree = ast.parse((metrics / "loggers.py").read_text())
    families, labelnames = _families(tree), _default_labelnames(tree)
    histograms: dict[str, Any] = {}
    counters: dict[str, Any] = {}
    gauges: dict[str, Any] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        kind = {"_histogram_cls": "histogram", "_counter_cls": "counter", "_gauge_cls": "gauge"}.get(node.func.attr)
        kw = _kwargs(node)
        name = _const(kw.get("name"))
        if kind is None or not isinstance(name, str) or not name.startswith("vllm:"):
            continue
        labels = _const(kw.get("labelnames"))
        if isinstance(kw.get("labelnames"), ast.Name) and kw["labelnames"].id == "labelnames":  # type: ignore[attr-defined]
            labels = labelnames
        entry: dict[str, Any] = {"documentation": _const(kw.get("documentation")), "labelnames": labels}
        if kind == "histogram":
            ref = kw.get("buckets")
            family = families.get(ref.id) if isinstance(ref, ast.Name) else None
            entry["family"] = family
            bounds = getattr(buckets, f"{family.upper()}_BUCKETS", None) if family else _const(ref)
            entry["buckets"] = [float(b) for b in bounds] if bounds is not None else None
            histograms[name] = entry
        else:
            (counters if kind == "counter" else gauges)[name] = entry
    return {"vllm": version, "source": "vllm/v1/metrics/loggers.py and buckets.py of the pinned wheel",
            "labelnames": labelnames, "histograms": dict(sorted(histograms.items())),
            "counters": dict(sorted(counters.items())), "gauges": dict(sorted(gauges.items()))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", type=Path, required=True, help="a folder holding the unpacked vllm/ package")
    ap.add_argument("--version", required=True)
    args = ap.parse_args(argv)
    doc = witness(args.src, args.version)
    out = REPO / "gridready" / "data" / "engine_cli" / f"vllm-{args.version}-metrics.json"
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {out.relative_to(REPO)}: {len(doc['histograms'])} histograms, {len(doc['counters'])} counters, "
          f"{len(doc['gauges'])} gauges")
    return 0


if __name__ == "__main__":
    sys.exit(main())
