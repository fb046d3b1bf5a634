"""A TCP proxy that delays every byte by a fixed time in each direction,
one listener per Redis node, all served by one asyncio loop on a thread.

Replicas replicate through it (their `replicaof` and the addresses Redis
and Sentinel announce are the proxy's), so the master -> replica stream
and the replica's REPLCONF ACKs both arrive `delay_ms` late: a WAIT takes
at least two delays. `partition(port)` cuts a node off: its open
connections are closed and new ones are closed at once, until `heal(port)`.
When either end of a connection closes (a `kill -9` of the node), the
proxy drops the connection at once with what it still holds: what a
replica had not received within the delay is lost, as on a host that
crashed.
Bytes keep their order: each direction is one queue of (due time, chunk)
written by one task.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from typing import Dict, Optional, Set

CHUNK = 65536


class _Listener:
    def __init__(self, target: int):
        self.target = target
        self.server: Optional[asyncio.base_events.Server] = None
        self.blocked = False
        self.conns: Set[asyncio.StreamWriter] = set()


class DelayProxy:
    """`add(listen_port, target_port)` forwards 127.0.0.1:listen_port to
    127.0.0.1:target_port with `delay_ms` each way. `stop()` closes all."""

    def __init__(self, delay_ms: float = 20.0):
        self.delay = delay_ms / 1000.0
        self.loop = asyncio.new_event_loop()
        self.listeners: Dict[int, _Listener] = {}
        self.thread = threading.Thread(target=self.loop.run_forever, name='delay-proxy',
                                       daemon=True)
        self.thread.start()

    def _call(self, coro, timeout: float = 10.0):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def add(self, listen_port: int, target_port: int) -> None:
        self._call(self._add(listen_port, target_port))

    async def _add(self, listen_port: int, target_port: int) -> None:
        lst = _Listener(target_port)
        lst.server = await asyncio.start_server(
            lambda r, w: self._serve(lst, r, w), '127.0.0.1', listen_port, reuse_address=True)
        self.listeners[listen_port] = lst

    def partition(self, listen_port: int) -> None:
        """Cut the node behind `listen_port` off (its links drop now)."""
        self._call(self._set_blocked(listen_port, True))

    def heal(self, listen_port: int) -> None:
        self._call(self._set_blocked(listen_port, False))

    async def _set_blocked(self, listen_port: int, blocked: bool) -> None:
        lst = self.listeners[listen_port]
        lst.blocked = blocked
        if blocked:
            for w in list(lst.conns):
                w.transport.abort()
            lst.conns.clear()

    async def _serve(self, lst: _Listener, creader, cwriter) -> None:
        if lst.blocked:
            cwriter.transport.abort()
            return
        try:
            ureader, uwriter = await asyncio.wait_for(
                asyncio.open_connection('127.0.0.1', lst.target), 2.0)
        except (OSError, asyncio.TimeoutError):
            cwriter.transport.abort()
            return
        lst.conns.update((cwriter, uwriter))
        pumps = [asyncio.ensure_future(self._pump(creader, uwriter)),
                 asyncio.ensure_future(self._pump(ureader, cwriter))]
        await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        for p in pumps:
            p.cancel()
        for w in (cwriter, uwriter):
            lst.conns.discard(w)
            w.transport.abort()

    async def _pump(self, reader, writer) -> None:
        """reader -> writer, each chunk written `delay` after it was read.
        Returns at the reader's end of stream; the caller then aborts both
        sides, so the bytes still within the delay are lost, as the bytes a
        crashed host had not delivered yet."""
        q: asyncio.Queue = asyncio.Queue()
        sender = asyncio.ensure_future(self._send(q, writer))
        try:
            while True:
                data = await reader.read(CHUNK)
                if not data:
                    break
                q.put_nowait((time.monotonic() + self.delay, data))
        finally:
            sender.cancel()

    @staticmethod
    async def _send(q: asyncio.Queue, writer) -> None:
        while True:
            due, data = await q.get()
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()

    def stop(self) -> None:
        async def close() -> None:
            for lst in self.listeners.values():
                lst.server.close()
                for w in list(lst.conns):
                    w.transport.abort()
        with contextlib.suppress(Exception):
            self._call(close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
