"""The post-state read and judgement of provision (playbooks/tasks/provision-verify.yml and the converge tail that
reboots, fails or records), run by Ansible on this machine against stand-in tools (tests/unit/fastpath/post_state.py).
Issue 45, findings 1, 2, 3 and 7."""

from __future__ import annotations

from pathlib import Path

from tests.unit.fastpath.post_state import INSTALLED, converge_tail, running_cmdline


def test_a_wanted_kernel_argument_missing_from_the_running_kernel_is_owed_on_every_run(tmp_path: Path) -> None:
    """Finding 1: the reboot owed is read from /proc/cmdline, not from the GRUB drop-in having changed in this run.
    Run 2, with the drop-in already in place and no reboot taken, still owes it and records nothing."""
    missing = "gridready.test.never-on-a-kernel=1"
    for _run in (1, 2):
        out = converge_tail(tmp_path, wanted_args=["iommu=pt", missing] if "iommu=pt" in running_cmdline()
                            else [missing])
        assert out.rc == 0, out.stdout[-3000:]
        assert any(missing in r for r in out.reasons), out.reasons
        assert not out.recorded
        assert "needs a reboot" in out.stdout


def test_wanted_arguments_the_running_kernel_has_owe_nothing(tmp_path: Path) -> None:
    present = running_cmdline()[:2]
    out = converge_tail(tmp_path, wanted_args=present)
    assert out.rc == 0, out.stdout[-3000:]
    assert out.reasons == [] and out.recorded


def test_an_installed_driver_that_is_not_loaded_is_owed_a_reboot(tmp_path: Path) -> None:
    mismatch = "Failed to initialize NVML: Driver/library version mismatch"
    out = converge_tail(tmp_path, loaded="580.95.05", smi=[mismatch])
    assert out.rc == 0, out.stdout[-3000:]
    assert out.reasons == [f"NVIDIA driver {INSTALLED} installed, 580.95.05 loaded"]
    assert not out.recorded


def test_a_driver_still_not_loaded_after_the_reboot_fails_with_what_the_kernel_said(tmp_path: Path) -> None:
    """Finding 2: after the reboot the module is still not loaded (Secure Boot refused it): the host fails with the
    kernel's words instead of owing a reboot forever."""
    out = converge_tail(tmp_path, loaded=None, smi=["NVIDIA-SMI has failed"], reboot="allowed", rebooted=True,
                        settle=2)
    assert out.rc != 0
    assert f"NVIDIA driver {INSTALLED} is installed but no NVIDIA module is loaded after the reboot" in out.stdout
    assert "Lockdown: modprobe: unsigned module loading is restricted" in out.stdout
    assert not out.recorded


def test_a_driver_installed_before_this_boot_and_not_loaded_fails_without_a_reboot_of_ours(tmp_path: Path) -> None:
    """Finding 2 with `reboot: never`: the host was rebooted by hand since the driver's install (its package's dpkg
    file list predates the boot: here a package of this machine's image stands in) and the module is still not
    loaded. Another reboot would not help; the host fails instead of owing one on every run."""
    image_package = next(p.stem for p in sorted(Path("/var/lib/dpkg/info").glob("*.list"))
                         if p.stat().st_mtime < _boot_time())
    out = converge_tail(tmp_path, loaded=None, smi=["NVIDIA-SMI has failed"], kmod_package=image_package, settle=2)
    assert out.rc != 0
    assert "is loaded after a boot that followed its installation; the kernel said: " in out.stdout
    assert "module verification failed" in out.stdout and not out.recorded


def _boot_time() -> float:
    return float(next(line.split()[1] for line in Path("/proc/stat").read_text().splitlines()
                      if line.startswith("btime")))


def test_nvidia_smi_outside_path_where_the_driver_role_found_it(tmp_path: Path) -> None:
    """Finding 3: a runfile or driver-container install keeps nvidia-smi off the default PATH (here, as under
    /usr/local/nvidia/bin); the post-state check uses where the driver role found it."""
    out = converge_tail(tmp_path, on_path=False, smi=["Enabled"])
    assert out.rc == 0, out.stdout[-3000:]
    assert out.facts["problems"] == [] and out.recorded


def test_a_fabric_still_initialising_after_a_restart_is_waited_for(tmp_path: Path) -> None:
    """Finding 7: right after fabric manager and nvidia-persistenced (re)started, the fabric reads In Progress and
    persistence Disabled for a moment; the read waits (bounded) for them to settle, then judges."""
    settling = ["Disabled, In Progress", "Disabled, In Progress", "Enabled, In Progress", "Enabled, Completed"]
    out = converge_tail(tmp_path, nvswitch=True, smi=settling, settle=30)
    assert out.rc == 0, out.stdout[-3000:]
    assert out.facts["problems"] == [] and out.recorded


def test_a_fabric_that_never_settles_fails_after_the_bound(tmp_path: Path) -> None:
    out = converge_tail(tmp_path, nvswitch=True, smi=["Enabled, In Progress"], settle=4)
    assert out.rc != 0
    assert "fabric state InProgress" in out.stdout and not out.recorded


def test_a_passthrough_guest_does_not_demand_its_own_fabric_manager(tmp_path: Path) -> None:
    """Finding 6: in a shared-NVSwitch passthrough guest the fabric manager runs in the service VM; the guest's
    fabric state must still read Completed."""
    out = converge_tail(tmp_path, nvswitch=True, fm_on_node=False, fm_active=False, smi=["Enabled, Completed"])
    assert out.rc == 0, out.stdout[-3000:]
    assert out.recorded
    out = converge_tail(tmp_path, nvswitch=True, fm_on_node=False, fm_active=False, smi=["Enabled, In Progress"],
                        settle=2)
    assert out.rc != 0 and not out.recorded
