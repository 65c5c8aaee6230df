#!/usr/bin/env python3
"""Witness of the engines' own command lines: the option strings the pinned vLLM and SGLang parsers accept, read
from their released source with `ast` (no import, no torch), written to gridready/data/engine_cli/<engine>-<ver>.json.

    python tools/engine_cli_flags.py            # the pins of gridready (spec VLLM_VERSION, sglang_versions.yml)
    python tools/engine_cli_flags.py --vllm 0.33.0 --sglang 0.5.4
    python tools/engine_cli_flags.py --vllm 0.33.0 --env /tmp/vllm-env/bin/python   # also the parser's values

With --env (the interpreter of a throwaway environment where that one pinned release is installed with its
dependencies: `python3 -m venv /tmp/vllm-env && /tmp/vllm-env/bin/pip install vllm==<pin>`), the engine's own
parser is built there (tools/engine_cli_dump.py) and its options are recorded too: per option strings, whether a
value follows, the value's type (int, float, str) and its choices. The simulated engines then parse with them, so
a value the real parser refuses (`--kv-cache-dtype fp9`) is refused too.

It runs `pip download <engine>==<pin> --no-deps` (the wheel only) and reads:
- vLLM: every option string of every `add_argument(...)` call in vllm/engine/arg_utils.py and
  vllm/entrypoints/**/cli_args.py; the fields of the *FrontendArgs dataclasses (registered as `--<field-name>` by
  their add_cli_args); for bool fields (argparse.BooleanOptionalAction, which vLLM's FlexibleArgumentParser
  registers as its EnableDisableAction) also `--no-<flag>`, and `--disable-x` for `--enable-x` and vice versa;
- SGLang: every option string of every `add_argument(...)` call in sglang/srt/server_args.py, and for
  BooleanOptionalAction ones `--no-<flag>`.
tests/unit/serving/test_engine_cli_witness.py checks every command line gridready renders against these tables.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "gridready" / "data" / "engine_cli"


def _download(pkg: str, version: str, dest: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "download", f"{pkg}=={version}", "--no-deps", "--only-binary",
                    ":all:", "-d", str(dest), "-q"], check=True)
    (wheel,) = dest.glob(f"{pkg}-{version}-*.whl")
    return wheel


def _sources(wheel: Path, wanted: callable) -> dict[str, str]:
    with zipfile.ZipFile(wheel) as z:
        return {n: z.read(n).decode() for n in z.namelist() if wanted(n)}


def _is_bool(annotation: ast.expr | None) -> bool:
    return annotation is not None and any(isinstance(n, ast.Name) and n.id == "bool" for n in ast.walk(annotation))


def _negations(flag: str) -> set[str]:
    out = {"--no-" + flag[2:]}
    for prefix, inverse in (("--enable-", "--disable-"), ("--disable-", "--enable-")):
        if flag.startswith(prefix):
            out.add(inverse + flag[len(prefix):])
    return out


def _add_argument_calls(tree: ast.AST) -> list[tuple[list[str], ast.Call]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            flags = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)
                     and a.value.startswith("-")]
            found.append((flags, node))
    return found


def _kw_field(call: ast.Call) -> str | None:
    """`**model_kwargs["enforce_eager"]` -> enforce_eager."""
    for kw in call.keywords:
        if kw.arg is not None:
            continue
        # **cache_kwargs["x"], or **{**cache_kwargs["x"], "default": None}
        subs = [kw.value] if isinstance(kw.value, ast.Subscript) else [
            v for k, v in zip(kw.value.keys, kw.value.values, strict=True) if k is None and isinstance(v, ast.Subscript)
        ] if isinstance(kw.value, ast.Dict) else []
        for sub in subs:
            if isinstance(sub.slice, ast.Constant):
                return str(sub.slice.value)
    return None


def _action(call: ast.Call) -> str:
    for kw in call.keywords:
        if kw.arg == "action":
            return ast.unparse(kw.value)
    return ""


def vllm_flags(sources: dict[str, str]) -> list[str]:
    flags: set[str] = set()
    bool_fields: set[str] = set()
    trees = {n: ast.parse(t) for n, t in sources.items()}
    for tree in trees.values():  # the dataclasses whose bool fields become BooleanOptionalAction
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            for stmt in cls.body:
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and _is_bool(stmt.annotation):
                    bool_fields.add(stmt.target.id)
    for name, tree in trees.items():
        for opts, call in _add_argument_calls(tree):
            flags.update(opts)
            field = _kw_field(call)
            if "BooleanOptionalAction" in _action(call) or (field and field in bool_fields):
                for o in opts:
                    if o.startswith("--"):
                        flags.update(_negations(o))
        if name.endswith("cli_args.py"):
            for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name.endswith("FrontendArgs")):
                for stmt in cls.body:
                    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                        flag = "--" + stmt.target.id.replace("_", "-")
                        flags.add(flag)
                        if _is_bool(stmt.annotation):
                            flags.update(_negations(flag))
    return sorted(flags)


def _arg_meta(annotation: ast.expr) -> ast.Call | None:
    """`A[int, Arg(help=..., aliases=[...])]` -> the Arg(...) call (SGLang's Annotated field metadata)."""
    for node in ast.walk(annotation):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Arg":
            return node
    return None


def sglang_flags(sources: dict[str, str]) -> list[str]:
    """SGLang >= 0.5.x derives most flags from ServerArgs' Annotated fields (sglang/srt/arg_groups/arg_utils.py
    add_cli_args_from_dataclass: `--<field-name>` or Arg.cli_name, plus Arg.aliases; Arg.no_cli: none; a plain
    bool is store_true) and adds the rest with add_argument."""
    flags: set[str] = set()
    for tree in (ast.parse(t) for t in sources.values()):
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "ServerArgs"):
            for stmt in cls.body:
                if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                    continue
                meta = _arg_meta(stmt.annotation)
                short = isinstance(stmt.annotation, ast.Subscript) and isinstance(stmt.annotation.value, ast.Name) \
                    and stmt.annotation.value.id == "A"  # A[type, "help", NS(...)]: a CLI field without Arg(...)
                if meta is None and not short:
                    continue
                kw = {k.arg: k.value for k in meta.keywords if k.arg} if meta is not None else {}
                if isinstance(kw.get("no_cli"), ast.Constant) and kw["no_cli"].value:
                    continue
                name = kw.get("cli_name")
                flags.add(name.value if isinstance(name, ast.Constant) else "--" + stmt.target.id.replace("_", "-"))
                if isinstance(kw.get("aliases"), ast.List):
                    flags.update(e.value for e in kw["aliases"].elts if isinstance(e, ast.Constant))
        for opts, call in _add_argument_calls(tree):
            flags.update(opts)
            if "BooleanOptionalAction" in _action(call):
                for o in opts:
                    if o.startswith("--"):
                        flags.add("--no-" + o[2:])
    return sorted(flags)


def parser_options(engine: str, python: str) -> dict[str, object]:
    """The engine's own parser and config checks, dumped by tools/engine_cli_dump.py in the environment of
    `python`."""
    run = subprocess.run([python, str(REPO / "tools" / "engine_cli_dump.py"), engine], capture_output=True,
                         text=True, check=False)
    if run.returncode != 0:
        raise SystemExit(f"{engine}: {python} could not build the parser:\n{run.stderr[-2000:]}")
    return json.loads(run.stdout)


def witness(engine: str, version: str, env: str | None = None) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        wheel = _download(engine, version, Path(tmp))
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        if engine == "vllm":
            src = _sources(wheel, lambda n: n == "vllm/engine/arg_utils.py" or (
                n.startswith("vllm/entrypoints/") and n.endswith("cli_args.py")))
            flags = vllm_flags(src)
        else:
            src = _sources(wheel, lambda n: n in ("sglang/srt/server_args.py", "sglang/srt/arg_groups/arg_utils.py"))
            flags = sglang_flags(src)
    if not src:
        raise SystemExit(f"{engine} {version}: none of the parser files is in {wheel.name}")
    out: dict[str, object] = {"engine": engine, "version": version, "wheel": wheel.name, "sha256": digest,
                              "files": sorted(src), "flags": flags}
    if env:
        dumped = parser_options(engine, env)
        options = dumped["options"]
        from_parser = {f for o in options for f in o["flags"]}
        missing = sorted(set(flags) - from_parser)
        if missing:  # the source reading found options the built parser lacks: report, keep the parser's word
            print(f"{engine}: in the source but not the parser: {', '.join(missing)}", file=sys.stderr)
        out["flags"] = sorted(from_parser)
        out["options"] = options
        out["config_checks"] = dumped["config_checks"]
        out["parser"] = dumped["parser"]
    return out


def pins() -> dict[str, str]:
    sys.path.insert(0, str(REPO))
    from gridready.serving.sglang.versions import pin
    from gridready.spec.serving import VLLM_VERSION

    return {"vllm": VLLM_VERSION, "sglang": pin().version}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vllm")
    ap.add_argument("--sglang")
    ap.add_argument("--env", help="python of an environment where the (one) engine named is installed")
    args = ap.parse_args()
    wanted = {k: v for k, v in (("vllm", args.vllm), ("sglang", args.sglang)) if v} or pins()
    if args.env and len(wanted) != 1:
        ap.error("--env holds one engine: name it (--vllm <pin> or --sglang <pin>)")
    OUT.mkdir(parents=True, exist_ok=True)
    for engine, version in wanted.items():
        data = witness(engine, version, args.env)
        path = OUT / f"{engine}-{version}.json"
        path.write_text(json.dumps(data, indent=1) + "\n")
        print(f"{path.relative_to(REPO)}: {len(data['flags'])} option strings")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
