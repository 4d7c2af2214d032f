#!/usr/bin/env python3
"""A WebSocket server for the tests, on Python's `websockets` (an implementation that is not
Courier's): run with the virtual environment's python.

Usage:  python serve_websocket.py [--parent-pid PID]

Listens on a free loopback port and prints exactly ``READY <port>`` once it accepts; exits
when the parent process disappears. Paths:

  /echo        every message back as it came (text as text, binary as binary); chooses the
               subprotocol ``v1`` or ``v2`` when offered (the first offered)
  /fragments   a text message in three fragments ("Hello, " "frag" "ments"), a ping with
               ``p``, then a close with 4001 "done"
  /close       a close with 4000 "bye" at once
"""
import argparse
import asyncio
import os
import sys

from websockets.asyncio.server import serve

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peerlib  # noqa: E402


def choose_subprotocol(connection, offered):
    for name in offered:
        if name in ("v1", "v2"):
            return name
    return None


async def handler(connection):
    path = connection.request.path
    if path == "/echo":
        async for message in connection:
            await connection.send(message)
    elif path == "/fragments":
        await connection.send(["Hello, ", "frag", "ments"])
        await connection.ping(b"p")
        await connection.close(4001, "done")
    elif path == "/close":
        await connection.close(4000, "bye")
    else:
        await connection.close(4004, "no such path")


async def watch_parent(pid):
    while peerlib.parent_alive(pid):
        await asyncio.sleep(0.5)
    os._exit(0)


async def main_async(parent_pid):
    async with serve(handler, "127.0.0.1", 0, select_subprotocol=choose_subprotocol, compression=None,
                     max_size=32 << 20) as server:
        port = server.sockets[0].getsockname()[1]
        peerlib.announce(f"READY {port}")
        await watch_parent(parent_pid)


def main() -> int:
    ap = argparse.ArgumentParser(description="A WebSocket server on a free loopback port.")
    ap.add_argument("--parent-pid", type=int, default=None,
                    help="exit when this process disappears (default: the parent)")
    args = ap.parse_args()
    asyncio.run(main_async(args.parent_pid or os.getppid()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
