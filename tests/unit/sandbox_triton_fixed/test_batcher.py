"""The dynamic batcher (DynamicBatchScheduler::GetDynamicBatch): the planning rule itself, then its timing over
real HTTP against the started engine with fast execution (--fixed-cost-ms)."""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from sandbox.engine.dynamic_batcher import plan_batch
from sandbox.engine.fixed_model import Batching

from .conftest import bge, tokens, write_model

LB = '{model="bge",version="1"}'


def test_plan_batch_rules():
    pref = Batching((4, 8), 100_000, 0)
    same = [(1, "s")] * 3
    assert plan_batch(same, 0.01, pref, 64) == (0, pytest.approx(0.09))  # short of preferred, in the delay: wait
    assert plan_batch(same, 0.1, pref, 64) == (3, 0.0)  # the oldest waited the delay: send what is pending
    assert plan_batch([(1, "s")] * 5, 0.0, pref, 64) == (4, 0.0)  # a preferred size is reached: send it
    assert plan_batch([(1, "s")] * 9, 0.0, pref, 64) == (8, 0.0)  # the largest preferred size found
    assert plan_batch([(1, "s")] * 9, 0.2, pref, 64) == (9, 0.0)  # delay passed: all, up to max_batch_size
    assert plan_batch([(3, "s"), (3, "s"), (3, "s")], 0.0, pref, 64) == (2, 0.0)  # 9 would pass 8: send 6
    assert plan_batch([(2, "s"), (2, "s"), (2, "s")], 0.2, pref, 5) == (2, 0.0)  # never past max_batch_size
    assert plan_batch([(1, "a"), (1, "b")], 0.0, pref, 64) == (1, 0.0)  # another shape: send what is pending
    no_delay = Batching((8,), 0, 0)
    assert plan_batch(same, 0.0, no_delay, 64) == (3, 0.0)  # delay 0: whatever is pending goes now
    assert plan_batch(same, 0.0, None, 64) == (1, 0.0)  # no dynamic_batching: one request per execution


def send_together(t, n, body_of, model="bge"):
    barrier = threading.Barrier(n)

    def one(i):
        barrier.wait()
        start = time.monotonic()
        status, body = t.infer(model, body_of(i))
        return status, body, time.monotonic() - start

    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(one, range(n)))


def test_delay_zero_still_batches_while_the_instance_is_busy(tmp_path, triton):
    repo = tmp_path / "repo"
    write_model(repo, "bge", bge("dynamic_batching { max_queue_delay_microseconds: 0 }"))
    t = triton(repo, "--fixed-cost-ms", "300", "--per-item-us", "0")
    first = threading.Thread(target=t.infer, args=("bge", tokens()))
    first.start()
    time.sleep(0.1)  # the first request executes alone: the instance is busy 300 ms
    results = send_together(t, 5, lambda i: tokens(base=i))
    first.join()
    assert all(s == 200 for s, _, _ in results)
    info = t.info("bge")
    assert info["batch_sizes"] == [1, 5] and info["executions"] == 2 and info["inferences"] == 6
    m = t.metrics()
    assert m[f"nv_inference_exec_count{LB}"] == 2 and m[f"nv_inference_count{LB}"] == 6
    assert m[f"nv_inference_request_success{LB}"] == 6


def test_preferred_size_sends_without_waiting_the_delay(tmp_path, triton):
    repo = tmp_path / "repo"
    write_model(repo, "bge", bge("dynamic_batching { preferred_batch_size: 8 max_queue_delay_microseconds: 500000 }"))
    t = triton(repo, "--fixed-cost-ms", "20")
    results = send_together(t, 8, lambda i: tokens(base=i))
    assert all(s == 200 for s, _, _ in results)
    m = t.metrics()
    assert m[f"nv_inference_exec_count{LB}"] == 1 and m[f"nv_inference_count{LB}"] == 8
    assert max(lat for _, _, lat in results) < 0.4  # not the 500 ms delay


def test_eight_requests_sent_together_are_one_batch(tmp_path, triton):
    repo = tmp_path / "repo"
    write_model(repo, "bge", bge("dynamic_batching { preferred_batch_size: 8 max_queue_delay_microseconds: 50000 }"))
    t = triton(repo, "--fixed-cost-ms", "20")
    assert all(s == 200 for s, _, _ in send_together(t, 8, lambda i: tokens(base=i)))
    assert t.info("bge")["batch_sizes"] == [8]
    m = t.metrics()
    assert m[f"nv_inference_exec_count{LB}"] == 1 and m[f"nv_inference_count{LB}"] == 8


def test_a_lone_request_waits_about_the_delay(tmp_path, triton):
    repo = tmp_path / "repo"
    write_model(repo, "bge", bge("dynamic_batching { preferred_batch_size: 8 max_queue_delay_microseconds: 200000 }"))
    t = triton(repo, "--fixed-cost-ms", "10", "--per-item-us", "0")
    t.infer("bge", tokens())  # warm the connection path
    start = time.monotonic()
    status, _ = t.infer("bge", tokens())
    took = time.monotonic() - start
    assert status == 200 and 0.2 <= took < 0.45
    m = t.metrics()
    assert m[f"nv_inference_queue_duration_us{LB}"] >= 2 * 195_000  # both waited the delay in the queue
    assert 2 * 9_000 <= m[f"nv_inference_compute_infer_duration_us{LB}"] < 2 * 60_000


def test_request_batch_sizes_add_up_and_shapes_must_match(tmp_path, triton):
    repo = tmp_path / "repo"
    write_model(repo, "bge", bge("dynamic_batching { preferred_batch_size: 8 max_queue_delay_microseconds: 150000 }"))
    t = triton(repo, "--fixed-cost-ms", "10")
    results = send_together(t, 4, lambda i: tokens(rows=2, base=i))  # 4 requests of 2 = preferred 8
    assert all(s == 200 for s, _, _ in results)
    assert t.info("bge")["batch_sizes"] == [8]
    assert t.metrics()[f"nv_inference_request_success{LB}"] == 4
    # a variable dim batches only with requests of the same shape (enforce_equal_shape_tensors)
    results = send_together(t, 2, lambda i: tokens(seq=3 + 2 * i))
    assert t.info("bge")["batch_sizes"][1:] == [1, 1]


def test_without_dynamic_batching_each_request_runs_alone(tmp_path, triton):
    repo = tmp_path / "repo"
    write_model(repo, "bge", bge())
    t = triton(repo, "--fixed-cost-ms", "50")
    results = send_together(t, 4, lambda i: tokens(base=i))
    assert all(s == 200 for s, _, _ in results)
    assert t.info("bge")["batch_sizes"] == [1, 1, 1, 1]
    assert max(lat for _, _, lat in results) >= 0.19  # one instance: four executions in a row


def test_instances_execute_concurrently(tmp_path, triton):
    repo = tmp_path / "repo"
    write_model(repo, "bge", bge(instances="instance_group { count: 4 kind: KIND_GPU gpus: 0 }"))
    t = triton(repo, "--fixed-cost-ms", "200")
    results = send_together(t, 4, lambda i: tokens(base=i))
    assert all(s == 200 for s, _, _ in results)
    assert max(lat for _, _, lat in results) < 0.35  # four instances, not 4 x 200 ms
    assert t.info("bge")["instance_count"] == 4


def test_full_queue_rejects(tmp_path, triton):
    repo = tmp_path / "repo"
    write_model(repo, "bge", bge("dynamic_batching { default_queue_policy { max_queue_size: 1 } }")
                .replace("max_batch_size: 64", "max_batch_size: 1"))
    t = triton(repo, "--fixed-cost-ms", "400")
    running = threading.Thread(target=t.infer, args=("bge", tokens()))
    running.start()
    time.sleep(0.1)  # executing; the next request waits in the queue, the one after finds it full
    queued = threading.Thread(target=t.infer, args=("bge", tokens()))
    queued.start()
    time.sleep(0.1)
    status, body = t.infer("bge", {**tokens(), "id": "r9"})
    running.join()
    queued.join()
    assert (status, body) == (503, {"error": "[request id: r9] Exceeds maximum queue size"})
    assert t.info("bge")["requests"] == 2


def test_throttled_gpu_slows_executions(tmp_path, triton):
    repo = tmp_path / "repo"
    write_model(repo, "bge", bge(instances=""))
    profile = tmp_path / "profile.json"
    profile.write_text(json.dumps({"sku": "H100-SXM-80GB", "gpus": 2, "faults": [{"kind": "hw_slowdown", "gpu": 1}]}))
    t = triton(repo, "--fixed-cost-ms", "100", "--per-item-us", "0", "--hardware-profile", str(profile))
    info = t.info("bge")
    assert info["exec_ms"]["throttle_factor"] == 1.5 and info["instance_count"] == 2
    start = time.monotonic()
    assert t.infer("bge", tokens())[0] == 200
    assert time.monotonic() - start >= 0.15
