"""How the local servers listen (the gateway, the embedded moto server)."""

LISTEN_BACKLOG = 1024
"""Connections the kernel queues before the server accepts them. socketserver's default is 5:
a burst of clients connecting at once (64 at the same instant, while the serving thread waits
for the GIL) overflowed it and some were reset or timed out (4 to 7 in 320). Used by the gateway
and the embedded moto server (leasehold_dev.local.stack); the kernel caps it at somaxconn."""
