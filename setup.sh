#!/usr/bin/env bash
# Prepare a fresh Debian 12 / Ubuntu machine for gridready: the system tools the sandbox fleet needs (as root),
# then the project's virtual environment in .venv. Safe to run again: it skips what is already there.
set -euo pipefail
cd "$(dirname "$0")"

APT_PACKAGES=(debootstrap systemd-container iproute2 openssh-client util-linux dpkg-dev gnupg zstd curl
              ca-certificates python3-venv procps psmisc)
# CI (CI=true) skips no test but the GPU ones (tests/expected_skips.py): the browser test needs Debian's chromium
if [ "${CI:-}" = "true" ]; then APT_PACKAGES+=(chromium); fi

if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
  missing=()
  for pkg in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || missing+=("$pkg")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    echo "setup: installing ${missing[*]}" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
else
  echo "setup: not root or no apt-get: skipping system packages (the sandbox fleet needs root)" >&2
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
