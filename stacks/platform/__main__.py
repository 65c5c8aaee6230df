"""`pulumi up` entry point when the stack is run by the CLI from this directory (gridready uses the same
program inline through the Automation API)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from stacks.platform.program import program

program()
