"""The documented exit codes of every gridready command (DESIGN.md section 3)."""

from enum import IntEnum


class ExitCode(IntEnum):
    """One code per outcome; the README lists them."""

    OK = 0
    INTERNAL = 1  # unexpected internal error (a bug)
    INVALID = 2  # invalid inventory or usage: nothing was run
    STAGE_FAILED = 3  # failed hosts, failed SLO, Pulumi error
    UNREACHABLE = 4  # hosts unreachable
    NOT_CERTIFIED = 5  # certification failed for at least one node (or too few nodes left)
    CHANGES_PENDING = 6  # check mode found changes
