"""The only skips a CI run (CI=true) accepts; any other skip fails the run (tests/skip_guard.py).

Keys are node id prefixes (a directory, a file or one test); values say why the skip is expected there. A skip
belongs here only when CI cannot have what the test needs; a tool CI can install belongs in setup.sh instead.
"""

EXPECTED_SKIPS: dict[str, str] = {
    "tests/gpu/": "needs NVIDIA GPUs; CI has none (benchmarks/gpu_machine_run.sh runs them on a lent GPU machine)",
}
