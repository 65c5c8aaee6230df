#!/usr/bin/env bash
# device-only workaround (issue 28 run): gridready's fabric phase runs `ssh [opts] -- <host> <cmd>` even for
# ansible_connection=local hosts; no ssh client on the lent machine. Run <cmd> here when <host> is this machine.
echo "ssh-shim: $*" | cut -c1-200 >> /tmp/ssh-shim.log
while [ $# -gt 0 ] && [ "$1" != "--" ]; do shift; done; shift
host=$1; shift
case "${host#*@}" in localhost|127.0.0.1|"$(hostname)") exec bash -c "$*";; *) echo "ssh-shim: refusing $host" >&2; exit 255;; esac
