"""A burst: `clients` threads each open a connection of their own at the same instant (a
barrier) and send one request on it; what each got back, or the error it met, by kind. Bounded:
every socket has a timeout, every thread is joined with one."""

from __future__ import annotations

import socket
import threading
from collections import Counter

TIMEOUT_SECONDS = 20.0


def burst(port: int, request: bytes, *, clients: int = 64) -> Counter[str]:
    """`{"200": n, "ConnectionResetError": m, …}`: each client's status line code or error."""
    outcomes: Counter[str] = Counter()
    lock = threading.Lock()
    barrier = threading.Barrier(clients, timeout=TIMEOUT_SECONDS)

    def one() -> None:
        try:
            barrier.wait()
            with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_SECONDS) as conn:
                conn.sendall(request)
                answer = b""
                while b"\r\n" not in answer:
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    answer += chunk
            outcome = answer.split(b" ", 2)[1].decode() if answer else "no answer"
        except Exception as exc:  # noqa: BLE001 - every failure is counted by its kind
            outcome = type(exc).__name__
        with lock:
            outcomes[outcome] += 1

    threads = [threading.Thread(target=one, daemon=True) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(TIMEOUT_SECONDS * 2)
    outcomes["still running"] += sum(thread.is_alive() for thread in threads)
    return +outcomes
