"""`pulumi up` entry point when the stack is run by the CLI from this directory (gridready runs the same program
inline through the Automation API). The program comes from the installed gridready package (Pulumi.yaml's
virtualenv, where gridready is installed)."""

from gridready.stacks.serving.program import program

program()
