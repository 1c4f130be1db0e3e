"""A TCP relay that delays every byte: ``python link_relay.py PORT DELAY_S [LISTEN]`` listens
on 127.0.0.1:LISTEN (a free port if left out; printed on the first line) and forwards each
connection to 127.0.0.1:PORT, both directions, every chunk ``DELAY_S`` after it arrived, order
kept (added latency; the bandwidth is the loopback's). It exits when its stdin closes.
``delayed_link`` starts one per peer a member of a delayed gloo group reads.
"""

from __future__ import annotations

import os
import queue
import socket
import sys
import threading
import time


def _pump(src: socket.socket, dst: socket.socket, delay_s: float) -> None:
    """Copy ``src`` to ``dst``, each chunk ``delay_s`` after it arrived (order kept)."""
    chunks: queue.Queue = queue.Queue()

    def read() -> None:
        while data := src.recv(1 << 16):
            chunks.put((time.monotonic() + delay_s, data))
        chunks.put(None)

    threading.Thread(target=read, daemon=True).start()
    while (item := chunks.get()) is not None:
        due, data = item
        time.sleep(max(0.0, due - time.monotonic()))
        dst.sendall(data)
    dst.shutdown(socket.SHUT_WR)


def serve(target_port: int, delay_s: float, listen_port: int = 0) -> None:
    """Relay 127.0.0.1:``target_port``: print the port listened on, serve until stdin closes
    (the rank that started it is gone)."""
    server = socket.create_server(("127.0.0.1", listen_port))
    print(server.getsockname()[1], flush=True)
    threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0)), daemon=True).start()
    while True:
        near, _ = server.accept()
        far = socket.create_connection(("127.0.0.1", target_port))
        for s in (near, far):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for a, b in ((near, far), (far, near)):
            threading.Thread(target=_pump, args=(a, b, delay_s), daemon=True).start()


if __name__ == "__main__":
    serve(*(int(a) if i != 1 else float(a) for i, a in enumerate(sys.argv[1:4])))
