#!/usr/bin/python
"""gridready_peermem_build: make nvidia-peermem a real build against DOCA-OFED's peer-memory API.

nvidia-peermem does its work only where NV_MLNX_IB_PEER_MEM_SYMBOLS_PRESENT was defined when DKMS built it: the
driver's conftest finds `ib_register_peer_memory_client` in `/usr/src/ofa_kernel/default/Module.symvers`, which
DOCA-OFED/MLNX_OFED installs. Built before DOCA-OFED (the driver role runs before the RDMA role), the module is a
stub whose init returns -EINVAL (NVIDIA/open-gpu-kernel-modules, kernel-open/nvidia-peermem/nvidia-peermem.c,
nv_mem_client_init; kernel-open/conftest.sh). A real build calls into ib_core, so modinfo lists ib_core among its
dependencies; a stub does not. The module rebuilds the driver's DKMS tree for the kernel (`dkms remove`, `dkms
install`) when the installed nvidia-peermem is a stub, or when DOCA-OFED changed in this run (its symbol versions
moved), and fails with the cause when DOCA-OFED's symbols are not there to build against.
Module API: https://docs.ansible.com/ansible/latest/dev_guide/developing_program_flow_modules.html
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: gridready_peermem_build
short_description: Rebuild the NVIDIA DKMS modules so that nvidia-peermem carries DOCA-OFED's peer-memory API
options:
  kernel: {type: str, required: true, description: the kernel release to check and build for}
  doca_changed: {type: bool, default: false, description: DOCA-OFED was installed or upgraded in this run}
  ofa_symvers: {type: path, default: /usr/src/ofa_kernel/default/Module.symvers,
                description: DOCA-OFED's symbol versions the driver's conftest reads}
"""

# dkms 3.x: "nvidia/580.95.05, 6.8.0-49-generic, x86_64: installed"; dkms 2.8: "nvidia, 580.95.05, 5.15.0-91-generic,
# x86_64: installed" (dkms(8), `status`)
DKMS_STATUS = re.compile(r"^nvidia[/,]\s*([^,\s]+),\s*([^,\s]+),\s*[^:]+:\s*installed", re.M)

Runner = Callable[[list[str]], tuple[int, str, str]]


def dkms_version(status: str, kernel: str) -> str | None:
    """The nvidia DKMS version installed for `kernel` in `dkms status` output."""
    for version, built_for in DKMS_STATUS.findall(status):
        if built_for == kernel:
            return version
    return None


def decide(depends: str | None, doca_changed: bool, symvers_present: bool, kernel: str, symvers: str) -> str:
    """'ok', 'rebuild' or a failure line, from `modinfo -F depends nvidia-peermem` (None: no such module)."""
    if depends is None:
        return (f"nvidia-peermem is not built for kernel {kernel}: the driver's DKMS package builds it (is the "
                "driver installed with DKMS for this kernel?)")
    real = "ib_core" in depends.strip().split(",")
    if real and not doca_changed:
        return "ok"
    if not symvers_present:
        return (f"nvidia-peermem for kernel {kernel} was built without DOCA-OFED's peer-memory API and cannot be "
                f"rebuilt with it: {symvers} is missing (DOCA-OFED's kernel sources, package mlnx-ofed-kernel-dkms)")
    return "rebuild"


def ensure(kernel: str, doca_changed: bool, symvers: str, run: Runner, check: bool) -> tuple[bool, str]:
    """-> (changed, message); raises RuntimeError with the cause."""

    def depends() -> str | None:
        rc, out, _ = run(["modinfo", "-k", kernel, "-F", "depends", "nvidia-peermem"])
        return out if rc == 0 else None

    verdict = decide(depends(), doca_changed, os.path.exists(symvers), kernel, symvers)
    if verdict == "ok":
        return False, "nvidia-peermem is built against DOCA-OFED's peer-memory API"
    if verdict != "rebuild":
        raise RuntimeError(verdict)
    if check:
        return True, "would rebuild the nvidia DKMS modules against DOCA-OFED"
    rc, out, err = run(["dkms", "status", "-m", "nvidia", "-k", kernel])
    version = dkms_version(out, kernel) if rc == 0 else None
    if version is None:
        raise RuntimeError(f"no DKMS build of nvidia for kernel {kernel} to rebuild ({(out or err).strip()})")
    for step in ("remove", "install"):
        rc, out, err = run(["dkms", step, "-m", "nvidia", "-v", version, "-k", kernel])
        if rc != 0:
            raise RuntimeError(f"dkms {step} nvidia/{version} for {kernel} failed: {(err or out).strip()[-400:]}")
    after = depends()
    if after is None or "ib_core" not in after.strip().split(","):
        raise RuntimeError(f"nvidia/{version} was rebuilt for {kernel}, but nvidia-peermem is still a stub "
                           f"(depends: {after!r}): the driver's conftest did not find {symvers}")
    return True, f"rebuilt nvidia/{version} for {kernel}: nvidia-peermem now carries DOCA-OFED's peer-memory API"


def main() -> None:
    module = AnsibleModule(
        argument_spec={"kernel": {"type": "str", "required": True},
                       "doca_changed": {"type": "bool", "default": False},
                       "ofa_symvers": {"type": "path", "default": "/usr/src/ofa_kernel/default/Module.symvers"}},
        supports_check_mode=True,
    )
    p = module.params

    def run(argv: list[str]) -> tuple[int, str, str]:
        return module.run_command(argv)

    try:
        changed, msg = ensure(p["kernel"], p["doca_changed"], p["ofa_symvers"], run, module.check_mode)
    except RuntimeError as e:
        module.fail_json(msg=f"rdma: {e}")
    module.exit_json(changed=changed, msg=msg)


if __name__ == "__main__":
    main()
