"""The sandbox's SIMULATED Docker Engine (sandbox/sim/docker.py) answers as Docker does, refusals included, and
the tools of its SIMULATED Triton images take the real tools' command lines.

Sources of the behaviours checked: Docker CLI reference (docker run "Exit status": 125 when the error is Docker's
own; `unknown flag` from docker/cli's flag parsing; "Cannot connect to the Docker daemon"), moby's daemon
("unknown or invalid runtime name"), dockerd's daemon.json (`runtimes`, read at start), the Registry HTTP API V2
(manifests by tag or digest; content addressed by sha256), the NVIDIA Container Toolkit install guide
(`nvidia-ctk runtime configure --runtime=docker` adds runtimes.nvidia to daemon.json), tritonserver's getopt_long
options (tests/fixtures/public/tritonserver/options.txt) and TensorRT-LLM's argparse tools.
"""

from __future__ import annotations

import json
import os
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from sandbox import image_tools, images
from sandbox.sim import daemons
from sandbox.sim import docker as d

TRT = next(r for r, trtllm in images.references().items() if trtllm)
OPTIONS = Path(__file__).resolve().parents[2] / "fixtures" / "public" / "tritonserver" / "options.txt"


@pytest.fixture
def engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A running simulated dockerd (its state file names this process) with state under tmp_path."""
    monkeypatch.setattr(d, "STATE", tmp_path / "docker")
    monkeypatch.setattr(d, "DAEMON_STATE", tmp_path / "dockerd.json")
    monkeypatch.setattr(d, "DAEMON_JSON", tmp_path / "etc" / "daemon.json")

    def start(runtimes: list[str] | None = None) -> None:
        (tmp_path / "dockerd.json").write_text(json.dumps({"pid": os.getpid(), "runtimes": runtimes or ["runc"]}))

    return start


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory):
    """The sandbox registry's static tree, served on 127.0.0.1."""
    www = tmp_path_factory.mktemp("www")
    images.write_registry(www)
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(SimpleHTTPRequestHandler, directory=str(www)))
    server.RequestHandlerClass.log_message = lambda *a: None  # type: ignore[method-assign]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def _docker(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = d.main(list(argv), prog="docker")
    out, err = capsys.readouterr()
    return rc, out, err


def test_references_normalise_as_docker_does() -> None:
    assert d.parse_ref("ubuntu") == ("docker.io/library/ubuntu", "latest")
    assert d.parse_ref("nvcr.io/nvidia/tritonserver:25.12-py3") == ("nvcr.io/nvidia/tritonserver", "25.12-py3")
    digest = "sha256:" + "ab" * 32
    assert d.parse_ref(f"nvcr.io/nvidia/tritonserver@{digest}") == ("nvcr.io/nvidia/tritonserver", digest)
    with pytest.raises(d.DockerError, match="invalid reference format"):
        d.parse_ref("nvcr.io/nvidia/tritonserver@sha256:abc")


def test_without_a_running_daemon_every_command_says_so(engine, capsys) -> None:
    rc, _, err = _docker(capsys, "version")
    assert rc == 1 and "Cannot connect to the Docker daemon at unix:///var/run/docker.sock" in err
    rc, _, err = _docker(capsys, "run", "--rm", TRT, "true")
    assert rc == 125 and err.startswith("docker: Cannot connect to the Docker daemon")


def test_unknown_flags_are_refused_with_dockers_message(engine, capsys) -> None:
    engine()
    rc, _, err = _docker(capsys, "run", "--rm", "--privileged-plus", TRT, "true")
    assert rc == 125 and "unknown flag: --privileged-plus" in err and "See 'docker run --help'." in err
    rc, _, err = _docker(capsys, "stop", "--force", "x")
    assert rc == 1 and "unknown flag: --force" in err
    rc, _, err = _docker(capsys, "frobnicate")
    assert rc == 1 and "unknown command: docker frobnicate" in err


def test_the_nvidia_runtime_needs_the_toolkits_daemon_json(engine, tmp_path, capsys, monkeypatch) -> None:
    engine(["runc"])  # dockerd started before nvidia-ctk configured it
    rc, _, err = _docker(capsys, "run", "--rm", "--runtime=nvidia", TRT, "true")
    assert rc == 125 and "unknown or invalid runtime name: nvidia" in err
    cfg = tmp_path / "etc" / "daemon.json"
    cfg.parent.mkdir()
    cfg.write_text('{"log-driver": "journald"}')
    assert daemons.ctk(["runtime", "configure", "--runtime=docker", f"--config={cfg}"]) == 0
    data = json.loads(cfg.read_text())
    assert data["runtimes"]["nvidia"] == {"args": [], "path": "nvidia-container-runtime"}
    assert data["log-driver"] == "journald"  # merged, not replaced
    assert d.load_runtimes() == ["nvidia", "runc"]  # what dockerd knows after its restart
    cfg.write_text("{not json")
    with pytest.raises(d.DockerError, match="unable to configure the Docker daemon with file"):
        d.load_runtimes()


def test_only_what_gridready_passes_is_simulated(engine, capsys) -> None:
    engine(["nvidia", "runc"])
    rc, _, err = _docker(capsys, "run", "--rm", "--network=bridge", TRT, "true")
    assert rc == 125 and "SIMULATED" in err
    rc, _, err = _docker(capsys, "run", "--rm", "--volume", "/a:/b:zz", TRT, "true")
    assert rc == 125 and "invalid mode: zz" in err
    rc, _, err = _docker(capsys, "run", "--rm", "--volume", "cache:/engines", TRT, "true")
    assert rc == 125 and "SIMULATED" in err and "named volumes" in err


def test_pull_by_digest_then_inspect(engine, registry, capsys, monkeypatch) -> None:
    monkeypatch.setattr(d, "REGISTRY", registry)
    engine()
    digest = images.digests()[TRT]
    ref = f"{TRT.rsplit(':', 1)[0]}@{digest}"
    rc, _, err = _docker(capsys, "image", "inspect", ref)
    assert rc == 1 and f"No such image: {ref}" in err
    rc, out, _ = _docker(capsys, "pull", ref)
    assert rc == 0 and f"Digest: {digest}" in out and "SIMULATED" in out
    rc, out, _ = _docker(capsys, "image", "inspect", ref)
    info = json.loads(out)[0]
    assert rc == 0 and info["RepoDigests"] == [ref] and "SIMULATED" in info["Comment"]
    assert "PATH=/opt/tritonserver/bin:" + "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" in (
        info["Config"]["Env"])
    rootfs = d.STATE / "images" / digest[7:] / "rootfs"
    assert (rootfs / "opt/tritonserver/bin/tritonserver").is_file()
    assert (rootfs / "app/all_models/inflight_batcher_llm/preprocessing/1/model.py").is_file()


def test_an_image_the_registry_lacks_is_refused(engine, registry, capsys, monkeypatch) -> None:
    monkeypatch.setattr(d, "REGISTRY", registry)
    engine(["nvidia", "runc"])
    missing = "nvcr.io/nvidia/tritonserver@sha256:" + "0" * 64
    rc, _, err = _docker(capsys, "pull", missing)
    assert rc == 1 and "manifest unknown" in err
    rc, _, err = _docker(capsys, "run", "--rm", "--runtime=nvidia", missing, "true")
    assert rc == 125 and f"Unable to find image '{missing}' locally" in err and "manifest unknown" in err


def test_stop_and_rm_of_an_unknown_container(engine, capsys) -> None:
    engine()
    rc, _, err = _docker(capsys, "stop", "--time", "60", "gridready-triton-x")
    assert rc == 1 and "No such container: gridready-triton-x" in err
    rc, _, err = _docker(capsys, "rm", "--force", "gridready-triton-x")
    assert rc == 1 and "No such container: gridready-triton-x" in err


def test_a_running_name_cannot_be_reused(engine, capsys, registry, monkeypatch) -> None:
    monkeypatch.setattr(d, "REGISTRY", registry)
    engine()
    (d.STATE / "containers").mkdir(parents=True)
    d._container_file("t1").write_text(json.dumps({"id": "c0ffee", "pid": os.getpid(), "name": "t1",
                                                   "start": d._start_time(os.getpid())}))
    rc, _, err = _docker(capsys, "run", "--rm", "--name", "t1", TRT, "true")
    assert rc == 125 and 'Conflict. The container name "/t1" is already in use by container "c0ffee"' in err


def test_tritonserver_takes_its_long_options_and_refuses_others(monkeypatch, capsys) -> None:
    known = [x.strip() for x in OPTIONS.read_text().splitlines() if x.strip() and not x.startswith("#")]
    assert len(known) == 84  # the file's 85 lines: its source line, then one option per line
    monkeypatch.setattr(image_tools, "OPTIONS_FILE", OPTIONS)
    argv = [f"--{o}" if o in image_tools.NO_ARGUMENT else f"--{o}=1" for o in known if o != "help"]
    assert set(image_tools.parse_tritonserver(argv)) == set(known) - {"help"}
    assert image_tools.parse_tritonserver(["--http-port", "8000"]) == {"http-port": ["8000"]}
    with pytest.raises(SystemExit):
        image_tools.parse_tritonserver(["--model-repo=/models"])  # no abbreviations in this sim
    assert "unrecognized option '--model-repo'" in capsys.readouterr().err


def test_trtllm_tools_refuse_unknown_flags_and_missing_checkpoints(tmp_path, capsys) -> None:
    with pytest.raises(SystemExit):
        image_tools.trtllm_build(["--checkpoint_dir", "c", "--output_dir", "o", "--paged_kv_cache", "enable"])
    assert "unrecognized arguments: --paged_kv_cache" in capsys.readouterr().err
    rc = image_tools.convert_checkpoint(["--model_dir", str(tmp_path / "none"), "--output_dir", str(tmp_path / "c")])
    assert rc == 1 and "does not appear to have a file named config.json" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # convert_checkpoint.py spells an FP8 KV cache --fp8_kv_cache
        image_tools.convert_checkpoint(["--model_dir", "m", "--output_dir", "o", "--kv_cache_dtype", "fp8"])
