"""Triton's dynamic batcher for a fixed-cost model: which queued requests one free instance executes, and when.

plan_batch is dynamic_batch_scheduler.cc DynamicBatchScheduler::GetDynamicBatch (preferred batch sizes,
max_queue_delay_microseconds, max_batch_size, equal-shape inputs); Batcher is its BatcherThread as one asyncio
task, with the queue limit of scheduler_utils.cc PriorityQueue. One batch execution takes the model's Timing on
one instance (asyncio.sleep); instances run batches concurrently.
Cited sources are triton-inference-server/core src/<file> <function> unless another repository is named.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .infer_request import InferError

if TYPE_CHECKING:
    from .fixed_model import Batching, FixedCostModel
    from .infer_request import InferRequest


def plan_batch(jobs: Iterable[tuple[int, Hashable]], oldest_age_s: float, batching: Batching | None,
               max_batch_size: int) -> tuple[int, float]:
    """dynamic_batch_scheduler.cc DynamicBatchScheduler::GetDynamicBatch for a free instance: (n, 0) executes the
    first n queued requests now; (0, s) waits s seconds (or until a request arrives) and asks again. jobs are the
    queued requests' (batch size, equal-shape key), oldest first. Without dynamic_batching each request runs alone."""
    if batching is None:
        return 1, 0.0
    limit = max(1, max_batch_size)
    max_pref = max(batching.preferred, default=0)
    pending = count = best = mark = 0
    send_now = False
    first_key: Hashable = None
    for size, key in jobs:
        if count == 0:
            first_key = key
        else:
            if pending + size > max_pref and best == 0:  # past every preferred size: remember this point
                best, mark = pending, count
            if pending + size > limit or key != first_key:  # too big, or a different shape: send what is pending
                send_now = True
                break
        pending += size
        count += 1
        if pending in batching.preferred:
            best, mark = pending, count
    delay = batching.delay_us / 1e6
    exceeded = delay > 0 and oldest_age_s >= delay
    if best and not exceeded:
        return mark, 0.0
    if send_now or pending >= max_pref or exceeded or delay == 0:
        return count, 0.0
    return 0, delay - oldest_age_s


@dataclass
class _Job:
    req: InferRequest
    enqueued: float  # loop time
    done: asyncio.Future[tuple[float, float]] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future())


class Batcher:
    """The scheduler thread of DynamicBatchScheduler::BatcherThread as one asyncio task: whenever an instance is
    free it forms a batch with plan_batch (Triton forms it when a payload slot frees, which with one slot per
    instance is the same) and the instance executes it while the next batch forms."""

    def __init__(self, model: FixedCostModel) -> None:
        self.model = model
        self.queue: deque[_Job] = deque()
        self.free: deque[int] = deque(range(len(model.instances)))
        self.wake: asyncio.Event | None = None
        self.task: asyncio.Task[None] | None = None
        self.running: set[asyncio.Task[None]] = set()

    def submit(self, req: InferRequest) -> _Job:
        b = self.model.batching
        if b and b.max_queue_size and len(self.queue) >= b.max_queue_size:
            # scheduler_utils.cc PriorityQueue::PolicyQueue::Enqueue: UNAVAILABLE, which HTTP answers with 503
            raise InferError(503, f"{req.log}Exceeds maximum queue size")
        loop = asyncio.get_running_loop()
        if self.task is None:
            self.wake = asyncio.Event()
            self.task = loop.create_task(self._run())
        job = _Job(req, loop.time())
        self.queue.append(job)
        self._changed()
        return job

    def _changed(self) -> None:
        if "pending" in self.model.metrics:
            self.model.metrics["pending"].set(self.model.labels, float(len(self.queue)))
        if self.wake is not None:
            self.wake.set()

    async def _run(self) -> None:
        assert self.wake is not None
        loop = asyncio.get_running_loop()
        while True:
            self.wake.clear()
            wait: float | None = None
            if self.queue and self.free:
                jobs = ((j.req.size, j.req.key) for j in self.queue)  # read only up to the batch's end
                n, wait = plan_batch(jobs, loop.time() - self.queue[0].enqueued, self.model.batching,
                                     self.model.max_batch_size)
                if n:
                    batch = [self.queue.popleft() for _ in range(n)]
                    task = loop.create_task(self._execute(self.free.popleft(), batch))
                    self.running.add(task)
                    task.add_done_callback(self.running.discard)
                    self._changed()
                    continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), wait)

    async def _execute(self, instance: int, batch: list[_Job]) -> None:
        m = self.model
        items = sum(j.req.size for j in batch)
        start = time.perf_counter()
        try:
            await asyncio.sleep(m.timing.exec_s(items))
        finally:
            end = time.perf_counter()
            m.executions += 1
            m.inferences += items
            m.batch_sizes.append(items)
            m.inc("exec", 1)
            m.inc("count", items)
            for j in batch:
                if not j.done.done():
                    j.done.set_result((start, end))
            self.free.append(instance)
            self._changed()

