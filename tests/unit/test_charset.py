"""Trust boundaries, patterns (issue 41, class 4): every pattern and number on user input is ASCII-only (Python's
and pydantic's `\\d` match every Unicode digit, and `int('１２')` is 12), and a key holding a character nobody sees
is named with that character escaped."""

from __future__ import annotations

import copy
import importlib
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel

import gridready
from gridready import charset
from gridready.errors import InvalidInput
from gridready.inventory import load

from .test_inventory_errors import CLUSTER, HOSTS, make_inventory

REPO = Path(__file__).resolve().parents[2]
C = "inventories/acme/cluster.yml: "
H = "inventories/acme/hosts.yml: "
FULLWIDTH = str.maketrans("0123456789", "０１２３４５６７８９")
ARABIC_INDIC = str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩")


def _lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cluster: dict | None = None,
           hosts: str = HOSTS) -> list[str]:
    make_inventory(tmp_path, cluster=cluster, hosts=hosts)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidInput) as err:
        load("acme")
    return err.value.lines


def _with_software(**software: object) -> dict:
    doc = copy.deepcopy(CLUSTER)
    doc["software"] = software
    return doc


DIGIT_CASES = [
    ("driver-branch-fullwidth", {"driver_branch": "580".translate(FULLWIDTH)}, "software.driver_branch"),
    ("driver-branch-arabic-indic", {"driver_branch": "580".translate(ARABIC_INDIC)}, "software.driver_branch"),
    ("driver-version-fullwidth", {"driver_version": "580.95.05".translate(FULLWIDTH)}, "software.driver_version"),
    ("driver-version-arabic-indic", {"driver_version": "580.95.05".translate(ARABIC_INDIC)},
     "software.driver_version"),
    ("cuda-mixed", {"cuda": "1３.0"}, "software.cuda"),
    ("nccl-fullwidth", {"nccl": "2.28.9".translate(FULLWIDTH)}, "software.nccl"),
    ("index-port-fullwidth", {"python_index": "https://pypi.example:" + "8443".translate(FULLWIDTH) + "/simple"},
     "software.python_index"),
]


@pytest.mark.parametrize(("software", "key"), [c[1:] for c in DIGIT_CASES], ids=[c[0] for c in DIGIT_CASES])
def test_digits_that_are_not_ascii_are_refused(tmp_path, monkeypatch, software, key):
    lines = _lines(tmp_path, monkeypatch, _with_software(**software))
    assert any(line.startswith(f"{C}{key}: ") for line in lines), lines


def test_the_same_values_in_ascii_digits_pass(tmp_path, monkeypatch):
    make_inventory(tmp_path, cluster=_with_software(driver_branch="580", driver_version="580.95.05", cuda="13.0",
                                                    python_index="https://pypi.example:8443/simple"))
    monkeypatch.chdir(tmp_path)
    assert load("acme").spec.software.driver_version == "580.95.05"


@pytest.mark.parametrize("port", ["8022".translate(FULLWIDTH), "8022".translate(ARABIC_INDIC)])
def test_a_port_in_foreign_digits_is_refused(tmp_path, monkeypatch, port):
    hosts = HOSTS.replace("gpu01: {}", f"gpu01: {{ansible_port: '{port}'}}")
    lines = _lines(tmp_path, monkeypatch, hosts=hosts)
    assert any(line.startswith(f"{H}all.children.gpu_nodes.hosts.gpu01.ansible_port: must be a port")
               for line in lines), lines


ZERO_WIDTH = "\u200b"


def test_a_key_with_a_zero_width_space_is_named_escaped(tmp_path, monkeypatch):
    doc = copy.deepcopy(CLUSTER)
    doc[f"serv{ZERO_WIDTH}ing"] = doc.pop("serving")
    lines = _lines(tmp_path, monkeypatch, doc)
    assert any(line.startswith(f"{C}serv\\u200bing: ") for line in lines), lines
    assert not any(ZERO_WIDTH in line for line in lines)


@pytest.mark.parametrize("char", ["\u200b", "\u202e", "\ufeff", "\u00a0", "\u2060", "\u200d"])
def test_a_group_name_with_an_invisible_character_is_named_escaped(tmp_path, monkeypatch, char):
    hosts = HOSTS.replace("gpu_nodes:", f"gpu{char}nodes:")
    lines = _lines(tmp_path, monkeypatch, hosts=yaml.safe_dump(yaml.safe_load(hosts), allow_unicode=True))
    escaped = charset.visible(char)
    assert escaped.startswith("\\")
    assert any(f"gpu{escaped}nodes" in line for line in lines), lines
    assert not any(char in line for line in lines)


def test_visible_escapes_only_what_cannot_be_seen():
    assert charset.visible("naïve café ①") == "naïve café ①"
    assert charset.visible("a\u200bb\u202ec\U000e0001d\x1be") == "a\\u200bb\\u202ec\\U000e0001d\\x1be"
    assert charset.visible("a\nb", keep="\n") == "a\nb"


@pytest.mark.parametrize("raw", ["１２", "٣", "1２", "+١", "", " ", "1_000", "0x10"])
def test_ascii_int_refuses_what_int_reads(raw):
    with pytest.raises(ValueError):
        charset.ascii_int(raw)


@pytest.mark.parametrize(("raw", "value"), [("12", 12), ("-3", -3), (" 7 ", 7)])
def test_ascii_int_reads_ascii(raw, value):
    assert charset.ascii_int(raw) == value


def test_the_lock_wait_in_fullwidth_digits_is_refused(monkeypatch):
    from gridready import usage

    monkeypatch.setenv("GRIDREADY_LOCK_WAIT_S", "10".translate(FULLWIDTH))
    with pytest.raises(InvalidInput, match=r"^GRIDREADY_LOCK_WAIT_S: "):
        usage.lock_wait_s()
    monkeypatch.setenv("GRIDREADY_LOCK_WAIT_S", "1.5")
    assert usage.lock_wait_s() == 1.5


def test_a_canary_weight_in_fullwidth_digits_is_refused():
    from types import SimpleNamespace

    from gridready.stages.serve import rollout as serve_canary

    inv = SimpleNamespace()
    with pytest.raises(InvalidInput, match=r"^--weight: "):
        serve_canary.check_flags(inv, "llama", "50".translate(FULLWIDTH))


def test_an_int_flag_in_foreign_digits_exits_2_naming_the_flag(tmp_path):
    make_inventory(tmp_path)
    out = subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(REPO), "prune",
                          "--keep", "3".translate(ARABIC_INDIC), "--dry-run"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120,
                         env={"PATH": "/usr/bin:/bin", "GRIDREADY_HOME": str(tmp_path), "GRIDREADY_INVENTORY": "acme",
                              "PYTHONPATH": str(REPO)})
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip() == "error: --keep: (command line): digits must be ASCII 0-9", out.stderr
    assert not (tmp_path / "artifacts").exists()


# ---- the guard: no pattern on user input can match a Unicode digit, word or space character again ------------------

UNICODE_AWARE = re.compile(r"\\[dDwWsSbB]")
# modules whose patterns see inventory values, flags or variables
USER_INPUT = ["gridready.spec", "gridready.inventory", "gridready.cli", "gridready.usage", "gridready.vault",
              "gridready.secretscan", "gridready.catalog", "gridready.artifacts", "gridready.matrix",
              "gridready.sample", "gridready.yamlio", "gridready.charset"]
# deny-lists, where matching more is the safe side, reviewed
DENY_LISTS = {
    "gridready.secretscan.SECRET_KEY",  # a key that looks like a secret's, in any case and script
    "gridready.secretscan.VAULT_REF",  # Jinja's own lexer reads `{{ x }}` with Python's Unicode \s
}


def _modules() -> list[str]:
    names = []
    for name in USER_INPUT:
        module = importlib.import_module(name)
        names.append(name)
        if hasattr(module, "__path__"):
            names += [m.name for m in pkgutil.walk_packages(module.__path__, f"{name}.")]
    return names


def test_every_module_level_pattern_on_user_input_is_ascii():
    offenders = []
    for name in _modules():
        for attr, value in vars(importlib.import_module(name)).items():
            if not isinstance(value, re.Pattern) or f"{name}.{attr}" in DENY_LISTS:
                continue
            aware = UNICODE_AWARE.search(value.pattern) or value.flags & re.IGNORECASE
            if aware and not value.flags & re.ASCII:
                offenders.append(f"{name}.{attr}")
    assert not offenders, offenders


def _models() -> list[type[BaseModel]]:
    for name in _modules():
        importlib.import_module(name)
    seen, todo = set(), list(BaseModel.__subclasses__())
    while todo:
        cls = todo.pop()
        if cls not in seen:
            seen.add(cls)
            todo.extend(cls.__subclasses__())
    return [c for c in seen if c.__module__.startswith("gridready.")]


def _patterns(annotation_meta: list[object]) -> list[str]:
    out = []
    for meta in annotation_meta:
        pattern = getattr(meta, "pattern", None)
        if isinstance(pattern, str):
            out.append(pattern)
    return out


def test_no_pydantic_pattern_of_gridready_matches_unicode_digits():
    """pydantic's patterns run on Rust's regex, whose \\d is Unicode: every Field(pattern=...) says [0-9]."""
    offenders, checked = [], 0
    for model in _models():
        for field, info in model.model_fields.items():
            for pattern in _patterns(info.metadata) + re.findall(r"'pattern': '([^']*)'", repr(info.annotation)):
                checked += 1
                if UNICODE_AWARE.search(pattern):
                    offenders.append(f"{model.__module__}.{model.__name__}.{field}: {pattern}")
    assert checked > 40  # the walk reached the spec's models
    assert not offenders, offenders


def test_the_spec_refuses_foreign_digits_wherever_it_asks_for_digits():
    """Every gridready model field whose pattern accepts '0'...'9' somewhere refuses the fullwidth form of an
    accepted value: pydantic's Rust regex reads \\d as Unicode."""
    from gridready.spec.cluster import SoftwarePins

    for value in ("５８０", "٥٨٠"):
        with pytest.raises(ValueError):
            SoftwarePins(driver_branch=value)
    assert gridready.spec.cluster.SoftwarePins(driver_branch="580").driver_branch == "580"
