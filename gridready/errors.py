"""Errors that end a command with a documented exit code and a one-line message."""

from gridready.charset import visible
from gridready.exitcodes import ExitCode


class GridreadyError(Exception):
    """A user-facing failure: `str(err)` is printed as is, `err.code` is the exit code."""

    code: ExitCode = ExitCode.INTERNAL

    def __init__(self, message: str, code: ExitCode | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code


class InvalidInput(GridreadyError):
    """An inventory, flag or input file is wrong; nothing was run (exit 2).

    `lines` holds one `file: key: message` line per problem.
    """

    code = ExitCode.INVALID

    def __init__(self, lines: list[str] | str) -> None:
        # a key with a zero-width space or a bidi override reads like another key: such characters are escaped
        self.lines = [visible(line, keep="\n\t") for line in ([lines] if isinstance(lines, str) else lines)]
        super().__init__("\n".join(self.lines))


class StageFailed(GridreadyError):
    code = ExitCode.STAGE_FAILED


class NotCertified(GridreadyError):
    code = ExitCode.NOT_CERTIFIED
