"""What nvsmi.parse_q and parse_q_xml read from the same faults written into the real H200 captures (`-q` text and
`-q -x` XML of one GPU): the values both formats must agree on. The few that differ between the two captures
(power draw, max clocks, fabric state) are given by each test."""

from __future__ import annotations

from typing import Any

REASONS_IDLE = {"Idle": False, "Applications Clocks Setting": False, "SW Power Cap": False, "HW Slowdown": False,
                "HW Thermal Slowdown": False, "HW Power Brake Slowdown": False, "Sync Boost": False,
                "SW Thermal Slowdown": False, "Display Clock Setting": False}

FAULTY_GPU: dict[str, Any] = {
    "bus_id": "00000000:00:06.0", "name": "NVIDIA H200", "serial": "1654724131286",
    "uuid": "GPU-d4d79571-a902-b3cf-e646-434576b78dbe", "vbios": "96.00.A5.00.1A", "persistence_mode": "Disabled",
    "device_id": "0x233510DE",
    "pcie": {"gen_max": 5, "gen_current": 3, "gen_device_max": 4, "width_max": 16, "width_current": 8, "replays": 17},
    "ecc_mode": "Disabled",
    "ecc": {"volatile_sram_ce": 11, "volatile_sram_ue": 3, "volatile_dram_ce": 13, "volatile_dram_ue": 14,
            "aggregate_sram_ce": 21, "aggregate_sram_ue": 12, "aggregate_dram_ce": 23, "aggregate_dram_ue": 24,
            "sram_threshold_exceeded": True},
    "retired_pages": {"pending": True, "single_bit": 5, "double_bit": 6},
    "remap": {"correctable": 7, "uncorrectable": 9, "pending": True, "failure": True},
    "clock_event_reasons": {**REASONS_IDLE, "SW Power Cap": True, "HW Thermal Slowdown": True},
    "temperature_c": 71, "memory_temperature_c": 83, "power_limit_w": 650.0,
    "virtualization_mode": "Pass-Through", "recovery_action": "GPU Reset",
    "repair": {"channel_pending": True, "tpc_pending": False, "unrepairable": True},
}
