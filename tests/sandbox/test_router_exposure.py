"""With the router on, a tier port admits the router and no other client; every way a client has in asks for a key
(issue #43, finding 6), witnessed on a sandbox fleet.

vLLM 0.33 checks its API key on /v1 paths only (AuthenticationMiddleware, vllm/entrypoints/openai/server_utils.py)
and serves the SageMaker routes (/invocations: vllm/entrypoints/sagemaker/api_router.py) to anyone who reaches the
port. Two certified hosts, one vLLM tier of one node (SIMULATED engine) with the real LiteLLM router beside it: the
serving node is the only member, the other host is a declared firewall client (serving.firewall_clients) and
stands for a customer's client machine. From it the tier port is dropped, the router's port answers, and the router
answers /invocations, its vLLM pass-through and /v1 with a refusal when no client key is sent.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from gridready.stages.serve import router as serve_router
from tests.roles.serve_run import fleet_env, serve_fleet
from tests.sandbox.test_reboot_firewall import PROBE, _probe
from tests.sandbox.waiting import health, wait

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]
TIER, SERVED, API, ROUTER = "llama8b-routed", "llama-3.1-8b", 8000, 4000
ROUTER_LIVE_S = 600  # LiteLLM imports slowly on the shared controller (docs/layer3.md: 1.5-2 min)
# from the client host: status and body head of each request, with the key given in argv[3] ("" for none)
# (urllib raises on 4xx/5xx: its code is the answer)
REQUESTS = """\
import json, sys, urllib.error, urllib.request
base, model, key = sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else ""
headers = {"Content-Type": "application/json", **({"Authorization": "Bearer " + key} if key else {})}
out = {}
for path, body in (("/invocations", {"prompt": "hi", "max_tokens": 1}),
                   ("/vllm/invocations", {"model": model, "prompt": "hi", "max_tokens": 1}),
                   ("/v1/completions", {"model": model, "prompt": "hi", "max_tokens": 1})):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(), method="POST", headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            out[path] = [resp.status, resp.read(300).decode(errors="replace")]
    except urllib.error.HTTPError as err:
        out[path] = [err.code, err.read(300).decode(errors="replace")]
    except OSError as err:
        out[path] = [0, str(err)]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


@pytest.fixture(scope="module")
def served(make_module_fleet, tmp_path_factory, monkeypatch_module) -> dict[str, Any]:
    fleet = make_module_fleet(2, healthy=True)
    first, second = fleet.names

    def edit(cluster: dict[str, Any]) -> None:
        serving = cluster["serving"]
        serving["tiers"] = [{
            "name": TIER, "engine": "vllm", "served_name": SERVED,
            "model": {"hf_id": "meta-llama/Llama-3.1-8B-Instruct",
                      "revision": "0e9e39f249a16976918f6564b8830bc894c89659"},
            "tensor_parallel": 8, "pipeline_parallel": 1, "replicas": 1,
        }]
        serving["router"]["enabled"] = True
        # both hosts are certified, one serves: declare the other a client of the serving firewall
        serving["firewall_clients"] = [f"{fleet.addresses[first]}/32", f"{fleet.addresses[second]}/32"]

    monkeypatch_module.setenv("GRIDREADY_SERVE_SKIP_BENCH", "1")  # the bench has its own tests
    with fleet_env(fleet):
        out = serve_fleet(fleet, tmp_path_factory.mktemp("artifacts"), "20261201T020000Z-routed", edit)
    assert out["result"].exit_code == 0, out["result"].messages
    active = {h: fleet.ssh(h, "systemctl is-active ray-head", check=False).stdout.strip() for h in fleet.names}
    (member,) = [h for h, state in active.items() if state == "active"]
    (client,) = [h for h in fleet.names if h != member]
    ip = fleet.addresses[member]
    wait(lambda: health(ip, API), 300, f"the tier's /health on {member}")
    wait(lambda: fleet.ssh(member, f"python3 - {ip} {ROUTER}", input=PROBE).stdout.count("open") == 1,
         ROUTER_LIVE_S, "the router's port")
    return {**out, "member": member, "client": client}


def test_the_firewall_gives_the_tier_port_to_the_router_alone(served) -> None:
    fleet, member, client = served["fleet"], served["member"], served["client"]
    ip = fleet.addresses[member]
    record = json.loads(fleet.ssh(member, "cat /etc/gridready/firewall-ray.json").stdout)
    assert record["routed_ports"] == [API], record
    assert f"{ip}/32" in record["routers"] and f"{fleet.addresses[client]}/32" not in record["routers"], record
    assert f"{fleet.addresses[client]}/32" in record["clients"] and ROUTER in record["client_ports"], record
    # a declared client: the router's port answers, the tier's is dropped by the table
    assert _probe(fleet, client, ip, (API, ROUTER)) == {API: "dropped", ROUTER: "open"}
    assert health(ip, API)  # the controller still measures the tier directly (readiness, the router's overhead)


def test_every_route_a_client_reaches_asks_for_a_key(served) -> None:
    """No key, or a wrong one: never an answer of the engine. The router has no /invocations route (404); /v1
    needs a client key: 401 for a wrong one, and for none either 401 or (LiteLLM) the 500 of the DB-less proxy's
    auth error path (tests/router/test_litellm_router.py says why), with no completion."""
    fleet, member, client = served["fleet"], served["member"], served["client"]
    base = f"http://{fleet.addresses[member]}:{ROUTER}"

    def ask(key: str) -> dict[str, list[Any]]:
        out = fleet.ssh(client, f"python3 - {base} {SERVED} {key}", input=REQUESTS, timeout=120).stdout
        return json.loads(out)

    for key, refusals in (("", (401, 403, 404, 500)), ("sk-not-a-client-key", (401, 403, 404))):
        answers = ask(key)
        assert all(code in refusals and "choices" not in body for code, body in answers.values()), (key, answers)
        assert answers["/invocations"][0] == 404, answers  # no such route: nothing passed to the tier
    # LiteLLM's /vllm pass-through asks for a client key (401); HAProxy serves no such route (404)
    assert ask("sk-not-a-client-key")["/vllm/invocations"][0] in (401, 404)
    # the control: the same request with the sandbox's client key is served through the router
    status, body = ask(serve_router.client_key(served["inv"]))["/v1/completions"]
    assert status == 200 and "choices" in body, (status, body)


def test_the_engine_user_writes_its_remote_code_modules(served) -> None:
    """Issue #43, finding 3 on the same host: the Ray user (vLLM's driver and workers) can create transformers'
    dynamic-module package under the HF_MODULES_CACHE its environment names, and not under root's HF_HOME."""
    fleet, member = served["fleet"], served["member"]
    env = dict(line.split("=", 1) for line in fleet.ssh(member, "cat /etc/gridready/ray.env").stdout.splitlines()
               if "=" in line and not line.startswith("#"))
    modules, home = env["HF_MODULES_CACHE"], env.get("HF_HOME", "/var/lib/gridready/hf")
    probe = ("import os, sys; p = os.path.join(sys.argv[1], 'transformers_modules'); os.makedirs(p, exist_ok=True); "
             "open(os.path.join(p, '__init__.py'), 'a').close(); print(os.access(sys.argv[2], os.W_OK))")
    out = fleet.ssh(member, f"runuser -u ray -- python3 -c \"{probe}\" {modules} {home}").stdout.strip()
    assert out == "False", out  # the modules folder is the engine's, HF_HOME stays read-only to it
