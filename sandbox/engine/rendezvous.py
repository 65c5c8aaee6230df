"""SIMULATED multi-node start of SGLang: node rank 0 waits at --dist-init-addr for the other ranks.

Real SGLang initialises torch.distributed at `--dist-init-addr` (rank 0's host:port) with `--nnodes` nodes; only
rank 0 runs the tokenizer and HTTP server, ranks >= 1 "do not need to run tokenizer or detokenizer, so they can
just wait" (python/sglang/srt/entrypoints/engine.py, _launch_subprocesses). The simulator keeps that shape: rank 0
listens on the init port and is not ready until nnodes-1 peers connected; every other rank connects (retrying
until it reaches rank 0) and stays connected, serving nothing.
"""

from __future__ import annotations

import asyncio
import logging

log = logging.getLogger("gridready.sim")


class Rendezvous:
    def __init__(self, nnodes: int) -> None:
        self.expected = nnodes - 1
        self.peers: set[int] = set()
        self.server: asyncio.base_events.Server | None = None

    @property
    def missing(self) -> int:
        return max(0, self.expected - len(self.peers))

    async def listen(self, host: str, port: int) -> None:
        async def on_peer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            line = await reader.readline()
            try:
                rank = int(line.decode().split()[1])  # "rank <n>"
            except (IndexError, ValueError):
                writer.close()
                return
            self.peers.add(rank)
            log.info("dist-init: node rank %d joined (%d missing)", rank, self.missing)
            await reader.read()  # until the peer goes away
            self.peers.discard(rank)
            log.warning("dist-init: node rank %d left", rank)
            writer.close()

        self.server = await asyncio.start_server(on_peer, host, port, reuse_address=True)


async def join(addr: str, rank: int, stop: asyncio.Event) -> None:
    """Connect to rank 0 and hold the connection until stopped; retry while rank 0 is not up."""
    host, _, port = addr.rpartition(":")
    while not stop.is_set():
        try:
            reader, writer = await asyncio.open_connection(host, int(port))
        except OSError as err:
            log.info("dist-init: %s not reachable yet (%s)", addr, err)
            await asyncio.sleep(1.0)
            continue
        writer.write(f"rank {rank}\n".encode())
        await writer.drain()
        log.info("dist-init: joined %s as node rank %d", addr, rank)
        done = asyncio.ensure_future(reader.read())
        await asyncio.wait([done, asyncio.ensure_future(stop.wait())], return_when=asyncio.FIRST_COMPLETED)
        writer.close()
        if not stop.is_set():
            log.warning("dist-init: lost %s; reconnecting", addr)
            await asyncio.sleep(1.0)
