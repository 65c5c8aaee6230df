"""router_drain to the value: the exact requests a sync sends (path, quoting, method, timeout), what it reports
for each answer of vllm-router's worker API, what `held` reads, and `follow`'s waits on a fake clock.

The router stand-in answers at the level of `gridready.bench.http.fetch` (status, headers, body), in the shapes of
vllm-router 0.1.17's worker API: GET /list_workers -> {"urls": [...]}, POST /remove_worker?url=<quoted> and
POST /add_worker?url=<quoted> -> 200 with a text body (the same API the loopback stand-in of test_tier_router.py
serves over a socket)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from gridready.bench.http import HttpError
from gridready.serving import router_drain


@dataclass
class FakeWorkerApi:
    """vllm-router's worker set per router URL; `answers` overrides the status of one (router, verb)."""

    workers: dict[str, list[str]]
    answers: dict[tuple[str, str], tuple[int, bytes]] = field(default_factory=dict)
    raises: dict[str, Exception] = field(default_factory=dict)
    calls: list[tuple[str, str, str, float]] = field(default_factory=list)

    async def fetch(self, url: str, path: str, method: str = "GET", body: Any = None,
                    timeout: float = 10.0) -> tuple[int, dict[str, str], bytes]:
        self.calls.append((url, path, method, timeout))
        if url in self.raises:
            raise self.raises[url]
        parts = urlsplit(path)
        verb = parts.path.strip("/")
        if (url, verb) in self.answers:
            status, text = self.answers[(url, verb)]
            return status, {}, text
        if verb == "list_workers" and method == "GET":
            return 200, {}, json.dumps({"urls": self.workers[url]}).encode()
        target = parse_qs(parts.query)["url"][0]
        if verb == "remove_worker" and method == "POST":
            self.workers[url].remove(target)
            return 200, {}, f"Successfully removed worker: {target}".encode()
        if verb == "add_worker" and method == "POST":
            self.workers[url].append(target)
            return 200, {}, f"Successfully added worker: {target}".encode()
        return 404, {}, b"not found"


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> FakeWorkerApi:
    fake = FakeWorkerApi({"http://r1:9000": ["http://10.0.0.1:8000", "http://10.0.0.2:8000"],
                          "http://r2:9001": ["http://10.0.0.5:8001"]})
    monkeypatch.setattr(router_drain, "fetch", fake.fetch)
    return fake


@dataclass(frozen=True)
class Replica:
    head: str
    nodes: tuple[str, ...]


def test_replica_url_is_http_ip_colon_port():
    assert router_drain.replica_url("10.1.2.3", 8001) == "http://10.1.2.3:8001"


def test_wanted_workers_drops_a_replica_with_any_drained_node_and_keeps_the_order():
    replicas = [Replica("a", ("a", "b")), Replica("c", ("c",)), Replica("d", ("d", "e"))]
    url = {"a": "u-a", "c": "u-c", "d": "u-d"}

    def url_of(r: Replica) -> str:
        return url[r.head]

    # a worker node (not the head) drained takes its whole replica out
    assert router_drain.wanted_workers(replicas, url_of, {"e"}) == ["u-a", "u-c"]
    assert router_drain.wanted_workers(replicas, url_of, {"b", "x"}) == ["u-c", "u-d"]
    assert router_drain.wanted_workers(replicas, url_of, {"x"}) == ["u-a", "u-c", "u-d"]
    # every replica touched: all of them stay, in order
    assert router_drain.wanted_workers(replicas, url_of, {"a", "c", "e"}) == ["u-a", "u-c", "u-d"]


def test_sync_removes_then_adds_with_the_url_quoted_and_the_timeout_passed(api):
    done = asyncio.run(router_drain.sync("http://r1:9000", ["http://10.0.0.1:8000/", "http://10.0.0.3:8000"],
                                         timeout_s=2.5))
    assert done.as_dict() == {"router": "http://r1:9000", "removed": ["http://10.0.0.2:8000"],
                              "added": ["http://10.0.0.3:8000"], "error": None}
    assert api.calls == [
        ("http://r1:9000", "/list_workers", "GET", 2.5),
        ("http://r1:9000", "/remove_worker?url=http%3A%2F%2F10.0.0.2%3A8000", "POST", 2.5),
        ("http://r1:9000", "/add_worker?url=http%3A%2F%2F10.0.0.3%3A8000", "POST", 2.5),
    ]


def test_sync_default_timeout_is_five_seconds(api):
    asyncio.run(router_drain.sync("http://r2:9001", ["http://10.0.0.5:8001"]))
    assert api.calls == [("http://r2:9001", "/list_workers", "GET", 5.0)]


def test_sync_stops_at_a_list_that_is_not_200_and_changes_nothing(api):
    api.answers[("http://r1:9000", "list_workers")] = (503, b"busy")
    done = asyncio.run(router_drain.sync("http://r1:9000", []))
    assert (done.removed, done.added, done.error) == ([], [], "GET /list_workers answered 503")
    assert len(api.calls) == 1


def test_sync_stops_at_the_first_refused_change_and_quotes_200_bytes_of_its_answer(api):
    api.answers[("http://r1:9000", "remove_worker")] = (500, "é".encode() + b"x" * 300)
    done = asyncio.run(router_drain.sync("http://r1:9000", ["http://10.0.0.9:8000"]))
    # "é" is two bytes: the first 200 bytes are it and 198 x
    assert done.error == "POST /remove_worker http://10.0.0.1:8000 answered 500: " + "é" + "x" * 198
    assert [c[1].split("?")[0] for c in api.calls] == ["/list_workers", "/remove_worker"]  # no second POST


def test_sync_reports_a_refused_add_by_its_verb(api):
    api.answers[("http://r2:9001", "add_worker")] = (400, b"bad url")
    done = asyncio.run(router_drain.sync("http://r2:9001", ["http://10.0.0.5:8001", "http://10.0.0.6:8001"]))
    assert done.error == "POST /add_worker http://10.0.0.6:8001 answered 400: bad url"
    assert done.added == ["http://10.0.0.6:8001"] and done.removed == []


def test_sync_cuts_a_multi_byte_character_at_200_bytes_without_failing(api):
    api.answers[("http://r2:9001", "remove_worker")] = (500, b"y" * 199 + "é".encode())
    done = asyncio.run(router_drain.sync("http://r2:9001", []))
    assert done.error == "POST /remove_worker http://10.0.0.5:8001 answered 500: " + "y" * 199 + "\ufffd"


@pytest.mark.parametrize("err, said", [
    (HttpError("GET x: no answer within 5 s"), "HttpError: GET x: no answer within 5 s"),
    (ConnectionRefusedError("refused"), "ConnectionRefusedError: refused"),
])
def test_sync_reports_a_transport_failure_by_its_type(api, err, said):
    api.raises["http://r1:9000"] = err
    done = asyncio.run(router_drain.sync("http://r1:9000", ["http://10.0.0.1:8000"]))
    assert (done.removed, done.added, done.error) == ([], [], said)


def test_sync_reports_an_answer_that_is_not_json(api):
    api.answers[("http://r1:9000", "list_workers")] = (200, b"<html>")
    done = asyncio.run(router_drain.sync("http://r1:9000", []))
    assert done.error is not None and done.error.startswith("JSONDecodeError: ")


def test_sync_reads_a_list_without_urls_as_empty(api):
    api.answers[("http://r2:9001", "list_workers")] = (200, b'{"workers": 1}')
    done = asyncio.run(router_drain.sync("http://r2:9001", ["http://10.0.0.7:8001"]))
    assert (done.removed, done.added, done.error) == ([], ["http://10.0.0.7:8001"], None)


def test_held_sorts_and_strips_trailing_slashes(api):
    api.workers["http://r1:9000"] = ["http://10.0.0.9:8000/", "http://10.0.0.1:8000"]
    assert asyncio.run(router_drain.held("http://r1:9000")) == (
        ["http://10.0.0.1:8000", "http://10.0.0.9:8000"], None)
    assert api.calls == [("http://r1:9000", "/list_workers", "GET", 3.0)]
    # only slashes are stripped: a host name ending in X (port 80, no port written) keeps it
    api.workers["http://r1:9000"] = ["http://gpuX/", "http://gpuX"]
    assert asyncio.run(router_drain.held("http://r1:9000")) == (["http://gpuX", "http://gpuX"], None)


def test_held_says_why_it_could_not_read(api):
    api.answers[("http://r1:9000", "list_workers")] = (401, b"")
    assert asyncio.run(router_drain.held("http://r1:9000", timeout_s=1.5)) == ([], "GET /list_workers answered 401")
    assert api.calls[-1][3] == 1.5
    api.raises["http://r2:9001"] = OSError("no route")
    assert asyncio.run(router_drain.held("http://r2:9001")) == ([], "OSError: no route")
    api.answers[("http://r1:9000", "list_workers")] = (200, b"[1")
    held, why = asyncio.run(router_drain.held("http://r1:9000"))
    assert held == [] and why is not None and why.startswith("JSONDecodeError: ")
    api.answers[("http://r1:9000", "list_workers")] = (200, b"{}")
    assert asyncio.run(router_drain.held("http://r1:9000")) == ([], None)


def test_held_all_keys_each_router_by_url_with_the_timeout(api):
    api.raises["http://r2:9001"] = HttpError("down")
    out = router_drain.held_all(["http://r2:9001", "http://r1:9000"], timeout_s=0.5)
    assert out == {"http://r2:9001": ([], "HttpError: down"),
                   "http://r1:9000": (["http://10.0.0.1:8000", "http://10.0.0.2:8000"], None)}
    assert {c[3] for c in api.calls} == {0.5}
    router_drain.held_all(["http://r1:9000"])
    assert api.calls[-1][3] == 3.0


def test_sync_all_syncs_every_router_in_the_mapping_order(api):
    results = router_drain.sync_all({"http://r2:9001": [], "http://r1:9000": ["http://10.0.0.1:8000"]},
                                    timeout_s=4.0)
    assert [r.as_dict() for r in results] == [
        {"router": "http://r2:9001", "removed": ["http://10.0.0.5:8001"], "added": [], "error": None},
        {"router": "http://r1:9000", "removed": ["http://10.0.0.2:8000"], "added": [], "error": None},
    ]
    assert {c[3] for c in api.calls} == {4.0}
    router_drain.sync_all({"http://r1:9000": []})
    assert api.calls[-1][3] == 5.0


class FakeClock:
    """time.monotonic and time.sleep on a counter: each sync advances it by `sync_s`; sleeps are recorded."""

    def __init__(self, sync_s: float) -> None:
        self.now, self.sync_s, self.sleeps = 100.0, sync_s, []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.sleeps.append(s)
        self.now += s


def _follow(monkeypatch: pytest.MonkeyPatch, sync_s: float, rounds: int, results: list[list[Any]],
            **kw: Any) -> tuple[FakeClock, list[Any], list[Any]]:
    clock = FakeClock(sync_s)
    monkeypatch.setattr(router_drain, "time", clock)
    asked: list[Any] = []
    answers = iter(results)

    def sync_all(wanted: Any, timeout_s: float = 5.0) -> list[Any]:
        asked.append(dict(wanted))
        clock.now += sync_s
        return next(answers)

    monkeypatch.setattr(router_drain, "sync_all", sync_all)
    reported: list[Any] = []
    left = iter(range(rounds, -1, -1))
    router_drain.follow(lambda: {"http://r1:9000": [f"w{len(asked)}"]}, until=lambda: next(left) == 0,
                        report=reported.append, **kw)
    return clock, asked, reported


def test_follow_waits_out_the_rest_of_each_interval(monkeypatch):
    quiet = [router_drain.SyncResult("http://r1:9000")]
    clock, asked, reported = _follow(monkeypatch, 0.25, 3, [quiet] * 3, interval_s=1.5)
    assert clock.sleeps == [1.25, 1.25, 1.25]
    # read afresh every round
    assert asked == [{"http://r1:9000": ["w0"]}, {"http://r1:9000": ["w1"]}, {"http://r1:9000": ["w2"]}]
    assert reported == []  # nothing changed, nothing failed: nothing said


def test_follow_default_interval_is_two_seconds_and_a_slow_sync_does_not_wait(monkeypatch):
    quiet = [router_drain.SyncResult("http://r1:9000")]
    clock, _, _ = _follow(monkeypatch, 0.5, 1, [quiet])
    assert clock.sleeps == [1.5]
    clock, _, _ = _follow(monkeypatch, 2.0, 1, [quiet])
    assert clock.sleeps == [0.0]
    clock, _, _ = _follow(monkeypatch, 3.0, 1, [quiet])
    assert clock.sleeps == [0.0]


def test_follow_reports_a_round_with_any_removal_addition_or_error(monkeypatch):
    quiet = router_drain.SyncResult("http://r2:9001")
    rounds = [
        [quiet, router_drain.SyncResult("http://r1:9000", removed=["u"])],
        [router_drain.SyncResult("http://r1:9000", added=["u"]), quiet],
        [quiet, router_drain.SyncResult("http://r1:9000", error="HttpError: down")],
        [quiet, quiet],
    ]
    _, _, reported = _follow(monkeypatch, 0.0, 4, rounds)
    assert reported == rounds[:3]


def test_follow_does_not_sync_when_already_told_to_stop(monkeypatch):
    clock, asked, _ = _follow(monkeypatch, 0.0, 0, [])
    assert asked == [] and clock.sleeps == []
