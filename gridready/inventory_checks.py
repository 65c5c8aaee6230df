"""Checks of what an inventory hands to Ansible: nothing in it may run a command or read a file on the
controller, and nothing in it names one host or one group twice.

Ansible's ssh connection plugin puts `ansible_ssh_common_args` (and `ansible_ssh_args`) on the command lines of
ssh, scp and sftp, `ansible_ssh_extra_args` on ssh's, `ansible_scp_extra_args`/`ansible_sftp_extra_args` on
scp's/sftp's (docs.ansible.com, ansible.builtin.ssh connection). Those programs read their own options as
getopt does, and an `-o` value as a line of ssh_config(5) ("keyword value" or "keyword=value", keywords
case-insensitive). Every value is templated by Ansible on the controller, where `lookup`/`query`/`q` call lookup
plugins: `pipe` and `lines` run a command, `file`, `template`, `fileglob`, `first_found`, `csvfile`, `ini` and
`unvault` read controller files, `password` writes one, `url` fetches one, `env` reads the controller's
environment (docs.ansible.com, "Lookup plugins").
"""

from __future__ import annotations

import ipaddress
import re
import shlex
import socket
from collections.abc import Iterator
from typing import Any

import jinja2
from jinja2 import nodes

from gridready import secretscan

BASTION_HINT = "for a bastion set bastion: in cluster.yml (host, port, user, host_key; rendered as ProxyJump)"

# getopt option strings of OpenSSH 9.x (ssh.c, scp.c, sftp.c): a letter followed by ':' takes an argument
OPTSTRINGS = {
    "ssh": "1246ab:c:e:fgi:kl:m:no:p:qstvxyAB:CD:E:F:GI:J:KL:MNO:P:Q:R:S:TVw:W:XY",
    "scp": "12346ABCTdfOpqRrstvD:F:J:P:S:X:c:i:l:o:",
    "sftp": "1246AafhNpqrvCc:D:i:l:o:s:S:b:B:F:J:P:R:X:",
}
# flags that run or load something on the controller, or read a file that may: per program
REFUSED_FLAGS = {
    "ssh": {"F": "-F reads an ssh_config file (which may set ProxyCommand or LocalCommand)",
            "E": "-E writes a log file on the controller",
            "I": "-I loads a PKCS#11 library into ssh",
            "J": "-J is the raw form of a jump host; " + BASTION_HINT},
    "scp": {"F": "-F reads an ssh_config file", "S": "-S names a program scp runs instead of ssh",
            "D": "-D names a local sftp server scp runs", "J": "-J is the raw form of a jump host; " + BASTION_HINT},
    "sftp": {"F": "-F reads an ssh_config file", "S": "-S names a program sftp runs instead of ssh",
             "D": "-D names a local sftp server sftp runs", "b": "-b reads a batch file of sftp commands",
             "J": "-J is the raw form of a jump host; " + BASTION_HINT},
}
# ssh_config(5) keywords (lower case) that run a command or load code on the controller, or read more config
REFUSED_KEYWORDS = {
    "proxycommand": "ProxyCommand (a command ssh runs on the controller); " + BASTION_HINT,
    "proxyjump": "ProxyJump by hand (the raw form of a jump host); " + BASTION_HINT,
    "proxyusefdpass": "ProxyUseFdpass (it goes with a ProxyCommand); " + BASTION_HINT,
    "localcommand": "LocalCommand (a command ssh runs on the controller)",
    "permitlocalcommand": "PermitLocalCommand (it enables LocalCommand, a command on the controller)",
    "knownhostscommand": "KnownHostsCommand (a command ssh runs on the controller)",
    "match": "Match (Match exec runs a command on the controller)",
    "include": "Include (it reads more ssh_config files, which may run commands)",
    "pkcs11provider": "PKCS11Provider (a library ssh loads)",
    "securitykeyprovider": "SecurityKeyProvider (a library ssh loads)",
    "xauthlocation": "XAuthLocation (a program ssh runs)",
}
# variable -> the programs whose command line Ansible puts it on
SSH_ARG_VARS = {
    "ansible_ssh_common_args": ("ssh", "scp", "sftp"),
    "ansible_ssh_args": ("ssh", "scp", "sftp"),
    "ansible_ssh_extra_args": ("ssh",),
    "ansible_scp_extra_args": ("scp",),
    "ansible_sftp_extra_args": ("sftp",),
}
# checked against their own patterns by gridready.inventory.connection_problems
PATTERN_CHECKED = {"ansible_host", "ansible_ssh_host", "ansible_port", "ansible_ssh_port", "ansible_user",
                   "ansible_ssh_user"}
CONNECTIONS = {"ssh", "local", "ansible.builtin.ssh", "ansible.builtin.local"}
EXECUTABLE_VAR = re.compile(r"ansible_[a-z0-9_]*_(executable|exe)")
PROXY_VAR = re.compile(r"ansible_[a-z0-9_]*proxy_command")
# an interpreter Ansible runs as it is (on the controller for `ansible_connection: local`): a plain absolute path
# of a python, interpreter discovery, or the controller's own Python
INTERPRETER = re.compile(r"/[A-Za-z0-9._+/-]*/python[0-9.]*|/usr/bin/env python[0-9.]*"
                         r"|auto|auto_silent|auto_legacy|auto_legacy_silent"
                         r"|\{\{-?\s*ansible_playbook_python\s*-?\}\}")
TEMPLATE = re.compile(r"\{\{|\{%")
TEMPLATE_BLOCK = re.compile(r"\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}", re.DOTALL)
SHELL_SYNTAX = re.compile(r"[;|&`<>\n\r]|\$\(")
LOOKUP_FUNCTIONS = {"lookup", "query", "q"}
# ansible.builtin lookups that only reshape data already in the play (no command, file, URL or environment)
PURE_LOOKUPS = {"inventory_hostnames", "vars", "varnames", "items", "list", "dict", "indexed_items", "nested",
                "together", "subelements", "sequence", "random_choice"}
# the `env` lookup reads the controller's environment: only names that carry no secret and that Ansible's scrubbed
# environment passes anyway (gridready.ansible.PASSED_ENV)
ENV_LOOKUP_NAMES = {"GRIDREADY_PROBE_PYTHON", "HOME", "USER", "LOGNAME", "LANG", "TZ", "TMPDIR"}
# parse only, nothing is ever rendered here; with the extensions Ansible's templar enables
_JINJA = jinja2.Environment(extensions=["jinja2.ext.do", "jinja2.ext.loopcontrols"])
# a lookup call in a template Jinja cannot parse (an `!unsafe` value is never templated, but is not told apart)
LOOKUP_CALL = re.compile(r"\b(lookup|query|q)\s*\(")


def _option_letters(tool: str, args: list[str]) -> Iterator[tuple[str, str | None]]:
    """(flag letter, its argument) for each option of `args`, read as getopt reads them (`-oX`, `-o X`, `-vF f`)."""
    spec = OPTSTRINGS[tool]
    it = iter(args)
    for tok in it:
        if tok == "--" or not tok.startswith("-") or tok == "-":
            continue
        rest = tok[1:]
        while rest:
            letter, rest = rest[0], rest[1:]
            pos = spec.find(letter)
            if letter == ":" or pos < 0:
                yield letter, None
                continue
            if pos + 1 < len(spec) and spec[pos + 1] == ":":
                yield letter, rest if rest else next(it, "")
                break
            yield letter, None


def ssh_keyword(option: str) -> str:
    """The ssh_config keyword of an `-o` value, lower case: `ProxyCommand=x`, ` "proxycommand" x` -> proxycommand."""
    found = re.match(r"\s*\"?\s*([A-Za-z0-9]*)", option)
    return found.group(1).lower() if found else ""


def ssh_args_problem(var: str, value: Any) -> str | None:
    """What is wrong with one ssh argument variable, or None."""
    if not isinstance(value, str):
        return "must be a string of ssh options"
    if TEMPLATE.search(value):
        return "must be literal ssh options, not a Jinja template (a template can build any option)"
    try:
        args = shlex.split(value)
    except ValueError:
        return "is not a well-quoted list of ssh options"
    for tool in SSH_ARG_VARS[var]:
        for letter, arg in _option_letters(tool, args):
            if letter in REFUSED_FLAGS[tool]:
                return f"must not pass {REFUSED_FLAGS[tool][letter]}"
            if letter == "o" and arg is not None and ssh_keyword(arg) in REFUSED_KEYWORDS:
                return f"must not set {REFUSED_KEYWORDS[ssh_keyword(arg)]}"
    return None


def controller_command_problems(hvars: dict[str, Any]) -> list[tuple[str, str]]:
    """(variable, problem) for connection variables that would run a program or read a file on the controller."""
    out: list[tuple[str, str]] = []
    for var, value in hvars.items():
        if not isinstance(var, str):
            continue
        if var in SSH_ARG_VARS and value is not None:
            if problem := ssh_args_problem(var, value):
                out.append((var, problem))
        elif EXECUTABLE_VAR.fullmatch(var):
            out.append((var, "must not be set: gridready runs the ssh, scp, sftp and shell Ansible finds by "
                             "itself (a program named here would run on the controller)"))
        elif var == "ansible_ssh_pkcs11_provider":
            out.append((var, "must not be set: ssh loads the PKCS#11 library it names on the controller"))
        elif PROXY_VAR.fullmatch(var):
            out.append((var, "must not be set: a proxy command runs on the controller; " + BASTION_HINT))
        elif var == "ansible_connection" and value not in CONNECTIONS:
            out.append((var, "must be ssh or local (the connections gridready supports)"))
        elif var == "ansible_python_interpreter" and not (isinstance(value, str) and INTERPRETER.fullmatch(value)):
            out.append((var, "must be an absolute path of a python (/usr/bin/python3), auto, or "
                             "'{{ ansible_playbook_python }}'"))
        elif var.startswith("ansible_") and var not in PATTERN_CHECKED and isinstance(value, str) \
                and not secretscan.SECRET_KEY.search(var) \
                and SHELL_SYNTAX.search(TEMPLATE_BLOCK.sub("", value)):
            out.append((var, "must not hold shell syntax (;, |, &, $(, a backquote, a redirection or a newline): "
                             "Ansible puts connection and become settings into shell command lines, on the "
                             "controller for a local connection"))
    return out


def _lookup_problem(call: nodes.Call) -> str | None:
    first = call.args[0] if call.args else None
    if not isinstance(first, nodes.Const) or not isinstance(first.value, str):
        return "a lookup whose plugin is computed; inventory values are data"
    plugin = first.value.strip()
    short = plugin.removeprefix("ansible.builtin.")
    if short in PURE_LOOKUPS:
        return None
    if short != "env":
        return (f"lookup plugin {plugin!r} runs on the controller (pipe and lines run commands; file, template "
                "and others read its files); inventory values are data")
    names = call.args[1:]
    if not names or not all(isinstance(n, nodes.Const) and n.value in ENV_LOOKUP_NAMES for n in names) \
            or call.dyn_args is not None:
        return ("the env lookup reads the controller's environment, which holds secrets; only "
                f"{', '.join(sorted(ENV_LOOKUP_NAMES))} may be read")
    return None


def template_problem(value: str) -> str | None:
    """What makes a templated value run or read something on the controller when Ansible renders it, or None."""
    if not TEMPLATE.search(value):
        return None
    try:
        tree = _JINJA.parse(value)
    except jinja2.TemplateSyntaxError:
        return "calls a lookup, which runs on the controller; inventory values are data" \
            if LOOKUP_CALL.search(value) else None
    called = set()
    for call in tree.find_all(nodes.Call):
        if isinstance(call.node, nodes.Name) and call.node.name in LOOKUP_FUNCTIONS:
            called.add(id(call.node))
            if problem := _lookup_problem(call):
                return problem
    for name in tree.find_all(nodes.Name):
        if name.name in LOOKUP_FUNCTIONS and id(name) not in called:
            return f"{name.name} used other than as a call; inventory values are data"
    private = "reaches a private attribute of a template object; inventory values are data"
    if any(attr.attr.startswith("_") for attr in tree.find_all(nodes.Getattr)):
        return private
    # `x['__class__']`, `x|attr('__class__')`, `map(attribute='__globals__')`: any dunder string at all
    if any(isinstance(c.value, str) and "__" in c.value for c in tree.find_all(nodes.Const)):
        return private
    attrs = [f for f in tree.find_all(nodes.Filter) if f.name == "attr"]
    if any(not all(isinstance(a, nodes.Const) for a in f.args) for f in attrs):
        return "an attr filter with a computed name; inventory values are data"
    return None


def template_problems(data: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """(key path, problem) for every value (and key) of an inventory file that Ansible would template into a
    command or a read on the controller."""
    if isinstance(data, dict):
        for key, value in data.items():
            where = f"{path}.{key}" if path else str(key)
            if isinstance(key, str) and (problem := template_problem(key)):
                yield where, problem
            yield from template_problems(value, where)
    elif isinstance(data, list):
        for i, value in enumerate(data):
            yield from template_problems(value, f"{path}[{i}]")
    elif isinstance(data, str) and (problem := template_problem(data)):
        yield path or "(top level)", problem


def group_cycles(data: Any) -> list[tuple[str, str]]:
    """(key path, problem) for each group of a YAML hosts file that contains itself, directly or through other
    groups' children (Ansible merges groups by name wherever they are defined)."""
    children: dict[str, set[str]] = {}
    where: dict[tuple[str, str], str] = {}

    def walk(name: str, body: Any, path: str) -> None:
        kids = body.get("children") if isinstance(body, dict) else None
        if not isinstance(kids, dict):
            return
        for child, child_body in kids.items():
            child = str(child)
            children.setdefault(name, set()).add(child)
            where.setdefault((name, child), f"{path}.children.{child}")
            walk(child, child_body, f"{path}.children.{child}")

    if isinstance(data, dict):
        for name, body in data.items():
            walk(str(name), body, str(name))
    out = []
    looped: set[str] = set()  # groups of a loop already reported: one line per loop
    for (parent, child), path in where.items():
        if child == "all":
            out.append((path, "'all' holds every group; it cannot be the child of another"))
        elif parent not in looped and child not in looped and _reaches(children, child, parent):
            looped.update((parent, child))
            out.append((path, f"group {parent!r} contains itself (through {child!r}); a group cannot be its own "
                              "child"))
    return out


def _reaches(children: dict[str, set[str]], start: str, goal: str) -> bool:
    seen, todo = set(), [start]
    while todo:
        node = todo.pop()
        if node == goal:
            return True
        if node not in seen:
            seen.add(node)
            todo.extend(children.get(node, ()))
    return False


NUMERIC_HOST = re.compile(r"[0-9][0-9A-Fa-fXx.]*", re.ASCII)


def address_key(address: str) -> str:
    """One spelling per address: IPv6 compressed and lower case, an IPv4-mapped IPv6 as its IPv4, a DNS name in
    lower case without the final dot."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        try:  # getaddrinfo takes inet_aton's forms too: 10.1, 010.0.0.1 (octal), 0xa.0.0.1, 167772161
            return str(ipaddress.IPv4Address(socket.inet_aton(address))) if NUMERIC_HOST.fullmatch(address) \
                else address.lower().rstrip(".")
        except OSError:
            return address.lower().rstrip(".")
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip) + (("%" + address.split("%", 1)[1]) if "%" in address else "")


def duplicate_addresses(hostvars: dict[str, dict[str, Any]]) -> Iterator[tuple[str, str]]:
    """(host, the earlier host it duplicates) for hosts that reach one address and port under two spellings (or
    one): `::1` and `0:0::1`, `::ffff:10.0.0.1` and `10.0.0.1`, `Node1.example` and `node1.example`."""
    seen: dict[tuple[str, int], str] = {}
    for host, hvars in hostvars.items():
        if str(hvars.get("ansible_connection", "")).split(".")[-1] == "local":
            continue
        addr = hvars.get("ansible_host", hvars.get("ansible_ssh_host", host))
        port = hvars.get("ansible_port", hvars.get("ansible_ssh_port", 22))
        if not isinstance(addr, str) or not isinstance(port, int) or isinstance(port, bool):
            continue
        other = seen.setdefault((address_key(addr), port), host)
        if other != host:
            yield host, other


def hosts_file_problems(data: Any, hostvars: dict[str, dict[str, Any]]) -> list[tuple[str, str]]:
    """(key path, problem) of a whole hosts.yml beyond its shape: templates that reach the controller, groups that
    contain themselves, one host under two spellings of one address."""
    out = list(template_problems(data))
    out.extend(group_cycles(data))
    out.extend((f"{host}.ansible_host", f"the same address and port as host {other!r} (one host, one address, "
                                        "however it is spelled)")
               for host, other in duplicate_addresses(hostvars))
    return out


# `vault.yml`, `vault.yaml`, `vault`, `secrets.vault.yml`, `vault_acme.yml` (Ansible's "Keep vaulted variables
# safely visible": group_vars/<group>/vault); only the file's own name counts, not the folder of its group
VAULT_NAME = re.compile(r"(?:^|[._-])vault(?:$|[._-])", re.IGNORECASE)


def vault_named(relative: Any) -> bool:
    """Whether a file under group_vars/ or host_vars/ (path relative to the inventory) is named like a vault."""
    return len(relative.parts) > 1 and bool(VAULT_NAME.search(relative.parts[-1]))
