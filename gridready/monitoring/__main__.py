"""`python -m gridready.monitoring dashboard [--write]`: print (or regenerate) the committed Grafana dashboard."""

import sys

from gridready.monitoring.dashboard import DASHBOARD_PATH, render


def main(argv: list[str]) -> int:
    if argv[:1] != ["dashboard"]:
        print("usage: python -m gridready.monitoring dashboard [--write]", file=sys.stderr)
        return 2
    if "--write" in argv:
        DASHBOARD_PATH.parent.mkdir(parents=True, exist_ok=True)
        DASHBOARD_PATH.write_text(render())
        print(DASHBOARD_PATH)
    else:
        sys.stdout.write(render())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
