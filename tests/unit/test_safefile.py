"""Trust boundaries, paths (issue 41, class 2): every inventory read and every artifacts write goes through
gridready.safefile. A link out (at any component) is refused before anything is read, a FIFO, device or folder
where a file is expected is a one-line error and never a hang, a write never goes through a link, and error lines
never echo what a file outside the root holds. Each test runs under an alarm: a hang fails instead of blocking."""

from __future__ import annotations

import ast
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gridready import ledger, safefile
from gridready.artifacts import RunContext, customer_lock, latest_summary, prunable, write_atomic
from gridready.errors import InvalidInput
from gridready.inventory import load

from .test_inventory_errors import make_inventory

REPO = Path(__file__).resolve().parents[2]
OUTSIDE_KEY = "outside_key_never_echoed"
OUTSIDE = f"{OUTSIDE_KEY}: 1\nall:\n  hosts:\n    h1: {{}}\n"


@pytest.fixture(autouse=True)
def _no_hang() -> Iterator[None]:
    """A FIFO opened for reading blocks until a writer comes: SIGALRM turns a hang into a failure."""
    def hang(signum: int, frame: object) -> None:
        raise TimeoutError("blocked: a FIFO or device was opened")
    previous = signal.signal(signal.SIGALRM, hang)
    signal.alarm(10)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder beside the project, holding a file with a key the error lines must never show."""
    folder = tmp_path / "elsewhere"
    (folder / "all").mkdir(parents=True)
    for name in ("cluster.yml", "hosts.yml", "vars.yml", "all/main.yml", "triton_versions.yml"):
        (folder / name).write_text(OUTSIDE)
    return folder


def _load_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidInput) as err:
        load("acme")
    assert OUTSIDE_KEY not in str(err.value)
    return err.value.lines


# ---- inventory reads ----------------------------------------------------------------------------------------------

INV = "inventories/acme/"
OUT = "a symbolic link out of acme/, refused unread"
LINKS_OUT = [  # (file in the inventory, what it links to in `outside`, the line's start)
    ("cluster.yml", "cluster.yml", f"{INV}cluster.yml: (file): {OUT}"),
    ("hosts.yml", "hosts.yml", f"{INV}hosts.yml: (file): {OUT}"),
    ("triton_versions.yml", "triton_versions.yml", f"{INV}triton_versions.yml: (file): {OUT}"),
    ("group_vars/all.yml", "vars.yml", f"{INV}group_vars/all.yml: (file): a symbolic link out of the inventory"),
    ("group_vars/all", "all", f"{INV}group_vars/all: (file): a symbolic link out of the inventory"),
    ("host_vars/gpu01.yml", "vars.yml", f"{INV}host_vars/gpu01.yml: (file): a symbolic link out of the inventory"),
    ("host_vars", ".", f"{INV}host_vars: (file): a symbolic link out of the inventory"),
]


@pytest.mark.parametrize(("rel", "target", "expected"), LINKS_OUT, ids=[c[0] for c in LINKS_OUT])
def test_an_inventory_file_or_folder_linked_out_is_refused_unread(tmp_path, monkeypatch, outside, rel, target,
                                                                  expected):
    inv = make_inventory(tmp_path)
    (inv / rel).parent.mkdir(parents=True, exist_ok=True)
    (inv / rel).unlink(missing_ok=True)
    (inv / rel).symlink_to(outside / target)
    lines = _load_lines(tmp_path, monkeypatch)
    assert any(line.startswith(expected) for line in lines), lines


def test_a_link_out_at_a_middle_component_is_refused(tmp_path, monkeypatch, outside):
    """group_vars/ is a link to a folder outside whose files look ordinary: refused at the folder."""
    inv = make_inventory(tmp_path)
    (inv / "group_vars").symlink_to(outside)
    lines = _load_lines(tmp_path, monkeypatch)
    assert lines == [f"{INV}group_vars: (file): a symbolic link out of the inventory directory"]


def test_a_link_out_is_refused_even_when_it_comes_back(tmp_path, outside):
    """cluster.yml -> ../acme-link/cluster.yml where acme-link is the inventory itself through a folder outside:
    resolved, it stays inside; a link whose resolution leaves the root is refused by the layer itself."""
    inv = make_inventory(tmp_path)
    (outside / "loop").symlink_to(inv)
    (inv / "shared.yml").write_text("a: 1\n")
    (inv / "via.yml").symlink_to(outside / "loop" / "shared.yml")
    assert safefile.read_bytes(inv / "via.yml", 100, root=inv) == b"a: 1\n"  # resolves inside: allowed
    (inv / "out.yml").symlink_to(outside / "vars.yml")
    with pytest.raises(safefile.UnsafeFile, match="a symbolic link out of acme/"):
        safefile.read_bytes(inv / "out.yml", 100, root=inv)


def test_a_link_inside_the_inventory_is_followed(tmp_path, monkeypatch):
    """Documented choice: a group_vars file shared through a link that stays inside the inventory is read."""
    inv = make_inventory(tmp_path)
    (inv / "group_vars").mkdir()
    (inv / "shared.yml").write_text("gridready_x: 1\n")
    (inv / "group_vars" / "all.yml").symlink_to("../shared.yml")
    monkeypatch.chdir(tmp_path)
    assert load("acme").customer == "acme"


HOSTILE: list[tuple[str, Callable[[Path], None], str]] = [
    ("fifo", lambda p: os.mkfifo(p), "not a regular file (a FIFO"),
    ("directory", lambda p: p.mkdir(), "not a regular file (a directory"),
    ("dev-null", lambda p: p.symlink_to("/dev/null"), "not a regular file (a device), reached through"),
    ("dev-zero", lambda p: p.symlink_to("/dev/zero"), "not a regular file (a device), reached through"),
]


@pytest.mark.parametrize("rel", ["cluster.yml", "hosts.yml", "triton_versions.yml"])
@pytest.mark.parametrize(("make", "message"), [h[1:] for h in HOSTILE], ids=[h[0] for h in HOSTILE])
def test_a_fifo_device_or_folder_in_the_inventory_is_one_line(tmp_path, monkeypatch, rel, make, message):
    inv = make_inventory(tmp_path)
    (inv / rel).unlink(missing_ok=True)
    make(inv / rel)
    lines = _load_lines(tmp_path, monkeypatch)
    assert any(line.startswith(f"{INV}{rel}: (file): {message}") for line in lines), lines


@pytest.mark.parametrize(("make", "message"), [h[1:] for h in HOSTILE[:2]], ids=[h[0] for h in HOSTILE[:2]])
def test_a_vault_file_that_is_a_fifo_or_folder_never_blocks(tmp_path, make, message):
    from gridready import vault

    inv = make_inventory(tmp_path)
    (inv / "group_vars" / "all").mkdir(parents=True)
    make(vault.vault_path(inv))
    with pytest.raises(InvalidInput, match="vault.yml: \\(file\\): " + message.replace("(", "\\(")):
        vault.read("acme", inv)


# ---- artifacts writes and reads -----------------------------------------------------------------------------------


def test_a_lock_that_is_a_link_never_truncates_its_target(tmp_path, outside):
    root = tmp_path / "artifacts"
    (root / "acme").mkdir(parents=True)
    victim = outside / "vars.yml"
    (root / "acme" / ".lock").symlink_to(victim)
    with pytest.raises(InvalidInput, match=r"\.lock: \(lock\): a symbolic link, which is never followed"), \
            customer_lock(root, "acme", "prune"):
        pass
    assert victim.read_text() == OUTSIDE


@pytest.mark.parametrize(("make", "message"), [h[1:] for h in HOSTILE[:2]], ids=[h[0] for h in HOSTILE[:2]])
def test_a_lock_that_is_a_fifo_or_folder_is_refused(tmp_path, make, message):
    root = tmp_path / "artifacts"
    (root / "acme").mkdir(parents=True)
    make(root / "acme" / ".lock")
    with pytest.raises(InvalidInput, match=r"\(lock\): not a regular file"), customer_lock(root, "acme", "x"):
        pass


def test_a_customer_folder_linked_out_takes_no_write(tmp_path, outside):
    root = tmp_path / "artifacts"
    root.mkdir()
    (root / "acme").symlink_to(outside)
    ctx = RunContext(customer="acme", run_id="r1", root=root)
    for attempt in (lambda: ctx.claim_stage("certify"), lambda: ctx.stage_dir("certify"),
                    lambda: write_atomic(root / "acme" / "ledger.json", "{}"),
                    lambda: customer_lock(root, "acme", "x").__enter__()):
        with pytest.raises(InvalidInput, match="symbolic link"):
            attempt()
    assert sorted(p.name for p in outside.iterdir()) == ["all", "cluster.yml", "hosts.yml", "triton_versions.yml",
                                                        "vars.yml"]


def test_a_run_or_stage_folder_linked_out_takes_no_write(tmp_path, outside):
    root = tmp_path / "artifacts"
    (root / "acme" / "r1").mkdir(parents=True)
    (root / "acme" / "r1" / "certify").symlink_to(outside)
    ctx = RunContext(customer="acme", run_id="r1", root=root)
    with pytest.raises(InvalidInput, match="symbolic link"):
        write_atomic(ctx.stage_dir("certify") / "summary.json", "{}")
    with pytest.raises(InvalidInput, match="symbolic link"):
        write_atomic(root / "acme" / "r1" / "certify" / "nodes" / "n1" / "certification.json", "{}")
    assert not (outside / "summary.json").exists() and not (outside / "nodes").exists()


def test_a_file_that_is_a_link_is_replaced_never_written_through(tmp_path, outside):
    root = tmp_path / "artifacts"
    (root / "acme").mkdir(parents=True)
    (root / "acme" / "ledger.json").symlink_to(outside / "vars.yml")
    write_atomic(root / "acme" / "ledger.json", "{}\n", root)
    assert (outside / "vars.yml").read_text() == OUTSIDE
    assert not (root / "acme" / "ledger.json").is_symlink()
    assert (root / "acme" / "ledger.json").read_text() == "{}\n"


def test_a_write_over_a_folder_is_refused(tmp_path):
    (tmp_path / "a" / "summary.json").mkdir(parents=True)
    with pytest.raises(InvalidInput, match=r"summary\.json: \(file\): not a regular file \(a directory"):
        write_atomic(tmp_path / "a" / "summary.json", "{}", tmp_path)


def test_writes_leave_no_temp_file_and_are_private(tmp_path):
    path = write_atomic(tmp_path / "x" / "out.json", "{}", tmp_path)
    assert [p.name for p in path.parent.iterdir()] == ["out.json"]
    assert path.stat().st_mode & 0o777 == 0o600


LEDGER_BAD: list[tuple[str, Callable[[Path, Path], None], str]] = [
    ("fifo", lambda p, o: os.mkfifo(p), "not a regular file (a FIFO"),
    ("directory", lambda p, o: p.mkdir(), "not a regular file (a directory"),
    ("link-out", lambda p, o: p.symlink_to(o / "vars.yml"), "cannot read: a symbolic link"),
    ("dev-zero", lambda p, o: p.symlink_to("/dev/zero"), "cannot read: a symbolic link"),
]


@pytest.mark.parametrize(("make", "message"), [c[1:] for c in LEDGER_BAD], ids=[c[0] for c in LEDGER_BAD])
def test_status_and_prune_never_block_on_or_follow_a_hostile_ledger(tmp_path, outside, make, message):
    root = tmp_path / "artifacts"
    (root / "acme").mkdir(parents=True)
    make(root / "acme" / "ledger.json", outside)
    with pytest.raises(InvalidInput) as err:
        ledger.read(root, "acme")
    assert str(err.value).startswith(f"{root}/acme/ledger.json: (file): {message}"), err.value
    assert OUTSIDE_KEY not in str(err.value)


@pytest.mark.parametrize("recorded", ["{outside}/vars.yml", "{root}/acme/../../elsewhere/vars.yml",
                                      "../elsewhere/vars.yml", "{root}-other/acme/r1/serve/summary.json"])
def test_a_ledger_pointing_out_of_artifacts_is_refused(tmp_path, outside, recorded):
    root = tmp_path / "artifacts"
    (root / "acme").mkdir(parents=True)
    (root / "acme" / "ledger.json").write_text(json.dumps({
        "schema_version": ledger.SCHEMA, "customer": "acme",
        "serving": {"run_id": "r1", "summary": recorded.format(outside=outside, root=root), "at": "2026"}}))
    with pytest.raises(InvalidInput, match=r"ledger\.json: serving\.summary: not a path under"):
        ledger.read(root, "acme")


@pytest.mark.parametrize("where", ["run", "stage", "summary"])
def test_a_summary_reached_through_a_link_is_refused(tmp_path, outside, where):
    root = tmp_path / "artifacts"
    (outside / "certify").mkdir()
    (outside / "certify" / "summary.json").write_text(json.dumps({OUTSIDE_KEY: 1, "exit_code": 0}))
    run = root / "acme" / "20261130T010000Z-aaaa"
    if where == "run":
        run.parent.mkdir(parents=True)
        run.symlink_to(outside)
    elif where == "stage":
        run.mkdir(parents=True)
        (run / "certify").symlink_to(outside / "certify")
    else:
        (run / "certify").mkdir(parents=True)
        (run / "certify" / "summary.json").symlink_to(outside / "certify" / "summary.json")
    for read in (lambda: latest_summary(root, "acme", "certify"), lambda: prunable(root, "acme", 1, set())):
        with pytest.raises(InvalidInput, match="symbolic link") as err:
            read()
        assert OUTSIDE_KEY not in str(err.value)


def test_a_summary_that_is_a_fifo_never_blocks_status(tmp_path):
    root = tmp_path / "artifacts"
    (root / "acme" / "r1" / "certify").mkdir(parents=True)
    os.mkfifo(root / "acme" / "r1" / "certify" / "summary.json")
    with pytest.raises(InvalidInput, match="not a regular file \\(a FIFO"):
        latest_summary(root, "acme", "certify")


def test_prune_removes_a_run_folder_never_what_a_link_in_it_points_to(tmp_path, outside):
    root = tmp_path / "artifacts"
    for run, code in (("20261130T010000Z-a", 0), ("20261130T020000Z-b", 0)):
        (root / "acme" / run / "certify").mkdir(parents=True)
        (root / "acme" / run / "certify" / "summary.json").write_text(json.dumps(
            {"exit_code": code, "finished_at": f"2026-11-30T0{run[10]}:00:00Z"}))
    (root / "acme" / "20261130T010000Z-a" / "certify" / "evidence").symlink_to(outside)
    from gridready.stages import prune

    inv = type("Inv", (), {"customer": "acme"})()
    result = prune.run(inv, RunContext(customer="acme", run_id="p", root=root), keep=1)
    assert result["removed"] == ["20261130T010000Z-a"]
    assert (outside / "vars.yml").read_text() == OUTSIDE


# ---- no raw reads or writes of the two roots ----------------------------------------------------------------------

PKG = Path(__file__).resolve().parents[2] / "gridready"
# Modules that read an inventory or write artifacts/ and must do it through gridready.safefile (or artifacts'
# and yamlio's wrappers of it). A raw call here is an unguarded way in or out.
GUARDED = ["inventory.py", "artifacts.py", "ledger.py", "vault.py", "yamlio.py", "contracts.py", "evidence.py",
           "ansible.py", "pulumi.py", "stages/prune.py", "stages/discover.py", "stages/status.py", "stages/certify.py",
           "stages/serve/canary.py", "stages/serve/deploy.py", "stages/serve/router.py", "stages/bench.py",
           "stages/watch.py", "stages/serve/drain.py", "stages/attest.py", "stages/serve/embedding.py",
           "stages/serve/rendering.py", "stages/serve/verify.py", "stages/serve/rollout.py", "stages/serve/record.py",
           "report/writer.py", "report/metrics.py",
           "report/fabric_plots.py", "bench/outputs.py", "bench/record.py", "bench/queue_delay.py",
           "certify/quarantine.py", "monitoring/write.py"]
RAW = {"open", "read_text", "read_bytes", "write_text", "write_bytes", "mkdir", "makedirs", "mkstemp", "touch",
       "symlink_to", "rmtree"}
RAW_OF = {("os", "replace"), ("os", "rename"), ("json", "load"), ("yaml", "load"), ("yaml", "safe_load")}


def _raw_calls(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            owner = func.value.id if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) else ""
            if (name in RAW and owner != "safefile") or (owner, name) in RAW_OF:
                found.append(f"{path.relative_to(PKG)}:{node.lineno}: {owner + '.' if owner else ''}{name}()")
    return found


# the reviewed exceptions: (module, call) that read no inventory and write no artifact
ALLOWED = {
    "vault.py: path.open()",  # the password file GRIDREADY_VAULT_PASSWORD_FILE names, checked by read_password
    "vault.py: yaml.safe_load()",  # decrypted text, in memory
    "stages/discover.py: yaml.load()",  # ruamel over the text read through safefile
    "artifacts.py: os.mkdir()",  # the stage folder, in a parent just walked without following a link
    "stages/prune.py: shutil.rmtree()",  # a plain run folder (prunable refuses links); rmtree follows none inside
    "stages/certify.py: tarfile.open()",  # the probe archive, built in memory (fileobj=), then write_atomic
    "stages/serve/router.py: AUTH_MODULE.read_text()",  # gridready's own source, not an inventory or artifact
    "report/writer.py: os.open()",  # the verdicts' scratch file: O_NOFOLLOW, in a folder make_dirs walked
    "ansible.py: book.read_text()",  # gridready's own playbooks
    "ansible.py: include.read_text()",
    "ansible.py: yaml.safe_load()",
    "ansible.py: private.mkdir()",  # a fresh folder in a parent made by make_dirs; an existing link fails
    "pulumi.py: state_dir.mkdir()",  # GRIDREADY_STATE, the operator's folder for Pulumi state (not artifacts/)
}


def test_no_raw_read_or_write_of_an_inventory_or_artifacts_appears():
    calls = [c for f in GUARDED if (PKG / f).exists() for c in _raw_calls(PKG / f)]
    unexpected = [c for c in calls if f"{c.split(':')[0]}: {c.split(': ', 1)[1]}" not in ALLOWED]
    assert not unexpected, unexpected


def test_the_guard_sees_a_raw_read(tmp_path):
    (tmp_path / "m.py").write_text("from pathlib import Path\nPath('x').read_text()\nopen('y')\n"
                                   "import os, json\nos.replace('a', 'b')\njson.load(f)\nsafefile.open_lock(p)\n")
    global PKG
    saved, PKG = PKG, tmp_path
    try:
        assert _raw_calls(tmp_path / "m.py") == ["m.py:2: read_text()", "m.py:3: open()", "m.py:5: os.replace()",
                                                 "m.py:6: json.load()"]
    finally:
        PKG = saved



def test_folders_made_under_a_link_are_refused_and_nothing_is_made_outside(tmp_path, outside):
    """Run folders of serve, report and bench outputs are made without following a link (mkdir -p would make
    `outside/run` through `serve -> outside`)."""
    from gridready.artifacts import make_dirs
    from gridready.report.fabric_plots import plot_fabric

    root = tmp_path / "artifacts"
    (root / "acme" / "r1").mkdir(parents=True)
    (root / "acme" / "r1" / "serve").symlink_to(outside)
    RunContext(customer="acme", run_id="r1", root=root)  # the run's root: beneath it no link is followed
    before = sorted(p.name for p in outside.iterdir())
    with pytest.raises(InvalidInput, match="serve/ on the way is a symbolic link"):
        make_dirs(root / "acme" / "r1" / "serve" / "triton-embed")
    run = type("Run", (), {"curve": {1 << 20: 1.0}, "status": "pass", "hosts": ["a", "b"]})()
    result = type("Fabric", (), {"pair_runs": [run], "set_runs": [], "floor_gbps": None, "floor_source": "x"})()
    with pytest.raises(InvalidInput, match="symbolic link"):
        plot_fabric(result, root / "acme" / "r1" / "serve" / "plots")
    assert sorted(p.name for p in outside.iterdir()) == before


# ---- through the real command line: status and prune --dry-run on a hostile artifacts folder ----------------------

def _invoke(tmp_path: Path, *tasks: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GRIDREADY_INVENTORY": "acme", "GRIDREADY_HOME": str(tmp_path), "PYTHONPATH": str(REPO)}
    env.pop("GRIDREADY_ARTIFACTS", None)
    return subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(REPO), *tasks], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.parametrize("task", [("status",), ("prune", "--dry-run")], ids=["status", "prune-dry-run"])
@pytest.mark.parametrize("hostile", ["fifo-ledger", "lock-link", "customer-link"])
def test_status_and_prune_exit_2_on_a_hostile_artifacts_folder(tmp_path, outside, task, hostile):
    make_inventory(tmp_path)
    base = tmp_path / "artifacts" / "acme"
    base.parent.mkdir()
    if hostile == "customer-link":
        base.symlink_to(outside)
    else:
        base.mkdir()
        if hostile == "fifo-ledger":
            os.mkfifo(base / "ledger.json")
        else:
            (base / ".lock").symlink_to(outside / "vars.yml")
    proc = _invoke(tmp_path, *task)
    if task == ("status",) and hostile == "lock-link":  # status reads the ledger only, never the lock
        assert proc.returncode == 0, proc.stderr
    else:
        assert proc.returncode == 2, proc.stderr
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith(f"error: {base}"), proc.stderr
    assert OUTSIDE_KEY not in proc.stderr + proc.stdout
    assert (outside / "vars.yml").read_text() == OUTSIDE
    assert sorted(p.name for p in outside.iterdir()) == ["all", "cluster.yml", "hosts.yml", "triton_versions.yml",
                                                        "vars.yml"]


def test_the_inventorys_own_vault_password_file_linked_out_is_refused(tmp_path, outside, monkeypatch):
    from gridready import vault

    monkeypatch.delenv(vault.ENV, raising=False)
    inv = make_inventory(tmp_path)
    (inv / vault.INVENTORY_PASSWORD_FILE).symlink_to(outside / "vars.yml")
    (inv / "group_vars" / "all").mkdir(parents=True)
    vault.vault_path(inv).write_text("$ANSIBLE_VAULT;1.1;AES256\n6162\n")
    lines = vault.check("acme", inv, {})
    assert lines == [f"{vault.ENV}: (environment): {inv / '.vault-pass'}: a symbolic link out of acme/, refused "
                     "unread"], lines


@pytest.mark.parametrize("kubeconfig", ["kc.yml", "sub/../kc.yml", "../elsewhere/vars.yml"])
def test_a_relative_kubeconfig_is_read_beneath_the_inventory(tmp_path, outside, monkeypatch, kubeconfig):
    from types import SimpleNamespace

    from gridready.stages.serve import deploy as serve_deploy

    monkeypatch.chdir(tmp_path)
    inv_dir = make_inventory(tmp_path)
    (inv_dir / "kc.yml").symlink_to(outside / "vars.yml")
    (inv_dir / "sub").mkdir()
    inv = SimpleNamespace(path=inv_dir, spec=SimpleNamespace(serving=SimpleNamespace(kubeconfig=kubeconfig)))
    with pytest.raises(InvalidInput, match=r"serving\.kubeconfig: .*(a symbolic link out of|outside) acme/") as err:
        serve_deploy.kubeconfig(inv)
    assert OUTSIDE_KEY not in str(err.value)


@pytest.mark.parametrize("name", ["../../elsewhere/vars.yml", "linked.json"])
def test_a_signed_bundle_naming_a_report_outside_its_run_is_refused_unread(tmp_path, outside, name):
    """attest verify reads the reports a bundle names beneath the certify folder: a `..` or a link out is a problem
    line, never a read (the digest would tell whether an outside file has given contents)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from gridready import evidence

    base = tmp_path / "artifacts" / "acme" / "r1" / "certify"
    (base / "nodes" / "gpu01").mkdir(parents=True)
    report = base / "nodes" / "gpu01" / "certification.json"
    report.write_text("{}\n")
    (base / "linked.json").symlink_to(outside / "vars.yml")
    stmt = evidence.statement("gpu01", {}, {"certified": True}, {"cert": report}, base, customer="acme", run_id="r1")
    stmt.predicate["reports"][0]["name"] = name
    stmt.predicate["reports"][0]["digest"]["sha256"] = evidence.sha256(OUTSIDE.encode())
    key = Ed25519PrivateKey.generate()
    bundle = evidence.write_bundle(base / "evidence" / "gpu01", evidence.sign(stmt, key), stmt)
    _, problems = evidence.verify(bundle, key.public_key(), base=base)
    assert len(problems) == 1 and problems[0].startswith(str(base / name)), problems
    assert "refused unread" in problems[0] or "never followed" in problems[0], problems


def test_a_path_an_operator_names_may_pass_a_link_but_is_never_written_through_one(tmp_path, outside):
    """`python -m gridready.bench --out ~/results` where ~/results is a link: the folders are the operator's; the
    file itself is still replaced, never written through."""
    (tmp_path / "results").symlink_to(outside)
    path = write_atomic(tmp_path / "results" / "bench" / "junit.xml", "<x/>")
    assert (outside / "bench" / "junit.xml").read_text() == "<x/>" and path.name == "junit.xml"
    (outside / "bench" / "report.json").symlink_to(outside / "vars.yml")
    write_atomic(tmp_path / "results" / "bench" / "report.json", "{}")
    assert (outside / "vars.yml").read_text() == OUTSIDE


@pytest.mark.parametrize("rel", ["group_vars/all.yml", "host_vars/gpu01.yml", "group_vars/all/main.yml"])
@pytest.mark.parametrize(("make", "message"), [
    (lambda p: os.mkfifo(p), "(file): not a regular file (a FIFO"),
    (lambda p: p.symlink_to("/dev/null"), "(file): a symbolic link out of the inventory directory"),
    (lambda p: p.symlink_to("/dev/zero"), "(file): a symbolic link out of the inventory directory"),
], ids=["fifo", "dev-null", "dev-zero"])
def test_a_fifo_or_device_among_the_variable_files_is_one_line(tmp_path, monkeypatch, rel, make, message):
    inv = make_inventory(tmp_path)
    (inv / rel).parent.mkdir(parents=True)
    make(inv / rel)
    lines = _load_lines(tmp_path, monkeypatch)
    assert len(lines) == 1 and lines[0].startswith(f"{INV}{rel}: {message}"), lines
