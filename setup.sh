#!/usr/bin/env bash
# Prepare a fresh Debian 12 / Ubuntu machine for gridready: the project's virtual environment in .venv and, when
# asked (`./setup.sh --sandbox`, or in CI), the system tools the simulated fleet needs (as root). A controller that
# drives real machines needs only the first. Safe to run again: it skips what is already there.
set -euo pipefail
cd "$(dirname "$0")"

sandbox=false
for arg in "$@"; do
  case "$arg" in
    --sandbox) sandbox=true ;;
    -h|--help) echo "usage: ./setup.sh [--sandbox]   (--sandbox: also the simulated fleet's system packages, root)"
               exit 0 ;;
    *) echo "setup: unknown option $arg" >&2
       echo "usage: ./setup.sh [--sandbox]" >&2
       exit 2 ;;
  esac
done
# CI (CI=true) skips no test but the GPU ones (tests/expected_skips.py): it needs the fleet's tools, and the browser
# test Debian's chromium
if [ "${CI:-}" = "true" ]; then sandbox=true; fi

# the controller's own: a Python >= 3.11 with venv (Debian 12 and Ubuntu 24.04 ship one; Ubuntu 22.04's is 3.10)
BASE_PACKAGES=(python3-venv)
SANDBOX_PACKAGES=(debootstrap systemd-container iproute2 openssh-client util-linux dpkg-dev gnupg zstd curl
                  ca-certificates procps psmisc)
if [ "${CI:-}" = "true" ]; then SANDBOX_PACKAGES+=(chromium); fi
packages=("${BASE_PACKAGES[@]}")
if [ "$sandbox" = true ]; then packages+=("${SANDBOX_PACKAGES[@]}"); fi

if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
  missing=()
  for pkg in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || missing+=("$pkg")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    echo "setup: installing ${missing[*]}" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
elif [ "$sandbox" = true ]; then
  echo "setup: not root or no apt-get: skipping the sandbox's system packages (the sandbox fleet needs root)" >&2
fi

if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "setup: gridready needs Python >= 3.11 on the controller; python3 is $(python3 -V 2>&1) (docs/getting-started.md)" >&2
  exit 2
fi

stamp=.venv/.gridready-setup
want=$(cat pyproject.toml sandbox/pyproject.toml | sha256sum | cut -c1-16)
if [ ! -x .venv/bin/python ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: creating .venv" >&2
  python3 -m venv .venv
  .venv/bin/python -m pip install -q --disable-pip-version-check -U pip
  .venv/bin/python -m pip install -q --disable-pip-version-check -e '.[dev]' -e ./sandbox
  echo "$want" > "$stamp"
fi
