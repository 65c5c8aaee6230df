"""Entry point: `python3 -m sandbox.engine`, `python3 -m engine` or `python3 path/to/engine`."""

import importlib
import sys
from pathlib import Path

if __package__:
    from .cli import main
else:  # run as a directory: import ourselves as a package named after the directory
    _here = Path(__file__).resolve().parent
    sys.path.insert(0, str(_here.parent))
    main = importlib.import_module(f"{_here.name}.cli").main

if __name__ == "__main__":
    sys.exit(main())
