"""The sandbox launcher's reboot loop (sandbox/container.py restart_loop) with a fake nspawn: no root, no fleet.

systemd-nspawn(1): "If the container's init reboots, systemd-nspawn exits with status 133"; systemd-nspawn@.service
starts it again on that status (RestartForceExitStatus=133) and counts it as success (SuccessExitStatus=133).
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from sandbox import container, proc


def _fake_nspawn(tmp: Path, statuses: list[int], *, stop_on_run: int | None = None) -> Path:
    """A script named systemd-nspawn that logs its arguments and exits with statuses[run]; on run `stop_on_run` it
    writes the stop marker first (the sandbox's stop arriving while the container reboots)."""
    (tmp / "statuses").write_text("\n".join(map(str, statuses)) + "\n")
    fake = tmp / container.NSPAWN
    stop = f'[ "$n" -eq {stop_on_run} ] && touch "{tmp}/stop"; ' if stop_on_run else ""
    fake.write_text(f'#!/bin/sh\necho "$*" >> "{tmp}/runs"; n=$(wc -l < "{tmp}/runs"); {stop}'
                    f'exit $(sed -n "${{n}}p" "{tmp}/statuses")\n')
    fake.chmod(0o755)
    return fake


def _loop(tmp: Path, fake: Path) -> subprocess.CompletedProcess[str]:
    script = container.restart_loop([str(fake), "--boot", "--machine=x y"], tmp / "stop",
                                    f'echo reset >> "{tmp}/resets"')
    return subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=20, check=False)


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_a_reboot_starts_nspawn_again_with_the_same_arguments_and_a_poweroff_ends_it(tmp_path: Path) -> None:
    res = _loop(tmp_path, _fake_nspawn(tmp_path, [133, 133, 0]))
    assert res.returncode == 0, res.stderr
    assert _lines(tmp_path / "runs") == ["--boot --machine=x y"] * 3
    assert _lines(tmp_path / "resets") == ["reset"] * 2  # the network state is reset before each new boot


def test_a_failure_ends_the_loop_with_its_status(tmp_path: Path) -> None:
    res = _loop(tmp_path, _fake_nspawn(tmp_path, [133, 1, 0]))
    assert res.returncode == 1
    assert len(_lines(tmp_path / "runs")) == 2


def test_the_stop_marker_ends_the_loop_instead_of_another_boot(tmp_path: Path) -> None:
    res = _loop(tmp_path, _fake_nspawn(tmp_path, [133, 133, 133, 0], stop_on_run=2))
    assert res.returncode == 0
    assert len(_lines(tmp_path / "runs")) == 2
    (tmp_path / "runs").unlink()
    assert _loop(tmp_path, _fake_nspawn(tmp_path, [0])).returncode == 0  # marker there already: no boot at all
    assert not (tmp_path / "runs").exists()


def test_container_init_is_nspawns_child_under_the_launcher(tmp_path: Path) -> None:
    fake = tmp_path / container.NSPAWN  # comm is the script's name, as the real nspawn's
    fake.write_text("#!/bin/sh\nsleep 30 &\nwait\n")
    fake.chmod(0o755)
    launcher = subprocess.Popen(["sh", "-c", container.restart_loop([str(fake)], tmp_path / "stop")])
    try:
        deadline = time.monotonic() + 10
        while (found := container.container_init(launcher.pid)) is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert found is not None
        init, started = found
        # the child is nspawn's fork until it execs (comm "systemd-nspawn" in between, a window a loaded machine
        # widens): the PID found is the init's either way
        comm = Path(f"/proc/{init}/comm")
        while comm.read_text().strip() != "sleep" and time.monotonic() < deadline:
            time.sleep(0.02)
        assert comm.read_text().strip() == "sleep"
        (nspawn,) = proc.children(launcher.pid)
        assert container.container_init(nspawn) == found  # an old record: nspawn itself was saved
        start = proc.start_time(launcher.pid)
        container.stop({"nspawn_pid": launcher.pid, "nspawn_start": start, "dir": str(tmp_path)})
        assert launcher.wait(timeout=10) != container.REBOOT_EXIT
        assert (tmp_path / "stop").exists() and not proc.alive(init, started)
    finally:
        launcher.kill()
        launcher.wait()
