"""SSH between the pods of a multi-node Triton tier on Kubernetes: mpirun on the leader starts the ranks on the
workers over ssh (Open MPI's rsh launcher), as in the LeaderWorkerSet TensorRT-LLM example (kubernetes-sigs/lws
docs/examples/tensorrt-llm).

One Secret per namespace (`gridready-mpi-ssh`) holds a client key pair and a host key pair, both ed25519, made once
per customer and kept in the vault: workers run sshd with that host key and accept the client key; the leader's ssh
checks the host key strictly (`known_hosts` pins it for every worker name) and never asks. The keys never reach
argv, logs or the rendered manifests (the render shows the vault placeholder).
"""

from __future__ import annotations

import json

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

SECRET = "gridready-mpi-ssh"
MOUNT = "/etc/gridready-mpi"
PORT = 2222
CLIENT_KEY, HOST_KEY = "id_ed25519", "ssh_host_ed25519_key"
SSH_CONFIG = f"{MOUNT}/ssh_config"
# Open MPI's rsh launcher passes these to every ssh it runs (mpirun(1), MCA parameter plm_rsh_args)
RSH_ARGS = f"-F {SSH_CONFIG}"


def new_private_key() -> str:
    """An OpenSSH ed25519 private key, unencrypted (it lives in the vault and in a Secret, mode 0600)."""
    key = ed25519.Ed25519PrivateKey.generate()
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                             serialization.NoEncryption()).decode()


def public_key(private: str, comment: str) -> str:
    key = serialization.load_ssh_private_key(private.encode(), password=None)
    return key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                         serialization.PublicFormat.OpenSSH).decode() + f" {comment}"


def keys_json(client: str, host: str) -> str:
    return json.dumps({"client": client, "host": host}, sort_keys=True)


def secret_files(keys: str) -> dict[str, str]:
    """The Secret's files from the vault's keys (keys_json); where the stack renders without the vault, every file
    holds its placeholder."""
    if keys.startswith("<redacted"):
        names = (CLIENT_KEY, CLIENT_KEY + ".pub", "authorized_keys", HOST_KEY, HOST_KEY + ".pub", "known_hosts",
                 "ssh_config")
        return dict.fromkeys(names, keys)
    data = json.loads(keys)
    client_pub = public_key(data["client"], "gridready-mpi-client")
    host_pub = public_key(data["host"], "gridready-mpi-host")
    return {
        CLIENT_KEY: data["client"],
        CLIENT_KEY + ".pub": client_pub + "\n",
        "authorized_keys": client_pub + "\n",
        HOST_KEY: data["host"],
        HOST_KEY + ".pub": host_pub + "\n",
        # every worker presents the one host key: pinned for any name mpirun uses (ssh_config(5) patterns)
        "known_hosts": f"* {host_pub}\n",
        "ssh_config": (f"Host *\n  Port {PORT}\n  User root\n  IdentityFile {MOUNT}/{CLIENT_KEY}\n"
                       f"  IdentitiesOnly yes\n  UserKnownHostsFile {MOUNT}/known_hosts\n"
                       "  StrictHostKeyChecking yes\n  BatchMode yes\n  ConnectTimeout 10\n"),
    }


def sshd_command() -> list[str]:
    """The workers' sshd: the tier's host key, the client key only, no passwords, in the foreground.
    StrictModes off: a Secret volume's files are root's symlinks into a tmpfs the kubelet owns."""
    return ["/usr/sbin/sshd", "-D", "-e", "-p", str(PORT), "-h", f"{MOUNT}/{HOST_KEY}",
            "-o", f"AuthorizedKeysFile={MOUNT}/authorized_keys", "-o", "PasswordAuthentication=no",
            "-o", "KbdInteractiveAuthentication=no", "-o", "PermitRootLogin=prohibit-password",
            "-o", "StrictModes=no"]
