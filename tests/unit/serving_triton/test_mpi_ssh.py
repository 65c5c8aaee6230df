"""mpirun's ssh between the pods of a multi-node Triton tier (gridready/serving/mpi_ssh.py): the keys' files agree
with OpenSSH's own reading of them, and the leader's wait for the workers' sshd gives up with a clear line."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest

from gridready.serving import mpi_ssh
from gridready.serving.triton import launch as triton_launch


def test_the_secret_files_pin_the_host_key_and_authorize_the_client(tmp_path: Path) -> None:
    client, host = mpi_ssh.new_private_key(), mpi_ssh.new_private_key()
    files = mpi_ssh.secret_files(mpi_ssh.keys_json(client, host))
    if shutil.which("ssh-keygen"):  # OpenSSH's own derivation of each public key
        for name, private in ((mpi_ssh.CLIENT_KEY, client), (mpi_ssh.HOST_KEY, host)):
            key = tmp_path / name
            key.write_text(private)
            key.chmod(0o600)
            derived = subprocess.run(["ssh-keygen", "-y", "-f", str(key)], capture_output=True, text=True,
                                     check=True).stdout.split()[:2]
            assert files[name + ".pub"].split()[:2] == derived
    assert files["authorized_keys"] == files[mpi_ssh.CLIENT_KEY + ".pub"]
    assert files["known_hosts"].split()[0] == "*" and files["known_hosts"].split()[1:3] == \
        files[mpi_ssh.HOST_KEY + ".pub"].split()[:2]
    config = files["ssh_config"]
    assert "StrictHostKeyChecking yes" in config and "BatchMode yes" in config and f"Port {mpi_ssh.PORT}" in config
    assert f"IdentityFile {mpi_ssh.MOUNT}/{mpi_ssh.CLIENT_KEY}" in config


def test_a_render_without_the_vault_shows_placeholders_only() -> None:
    files = mpi_ssh.secret_files("<redacted: set by gridready from the vault at deploy time>")
    assert len(files) == 7 and all(v.startswith("<redacted") for v in files.values())


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash not installed")
def test_the_leader_gives_up_on_a_worker_whose_sshd_never_answers(tmp_path: Path) -> None:
    prelude = triton_launch._LWS_PRELUDE.format(slots=8, port=mpi_ssh.PORT, step=1, timeout=2)
    script = tmp_path / "prelude.sh"
    script.write_text("set -euo pipefail\nssh() { :; }\n" + prelude + 'echo "hosts: $GRIDREADY_MPI_HOSTS"\n')
    env = {"PATH": "/usr/bin:/bin", "LWS_GROUP_SIZE": "2", "LWS_LEADER_ADDRESS": "trt-0.trt.serving.invalid"}
    start = time.monotonic()
    run = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env, timeout=60, check=False)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "worker trt-0-1.trt.serving.invalid: sshd (port 2222) not reachable after 2 s" in run.stderr
    assert time.monotonic() - start < 30
    alone = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=60, check=False,
                           env={**env, "LWS_GROUP_SIZE": "1"})
    assert alone.returncode == 0 and "hosts: trt-0.trt.serving.invalid:8" in alone.stdout
