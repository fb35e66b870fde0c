#!/usr/bin/env python3
"""A fixed number of keep-alive requests, for measurements that need one
(callgrind's instructions per request, strace's calls per request), where
wrk can only run for a time.

  bench/http/fixed_load.py PORT [--conns=C] [--requests=N] [--pipeline=D]

C connections (default 64) share N requests (default 100000): each sends
GET / on a persistent connection, D at a time in one write (default 1: no
pipelining), reads the answers, checks each one's status and body, and
repeats. It prints how many were answered and how long it took. Python is
slow but the servers measured this way are slower still (callgrind runs
them 50 times slower); only what the server does per request counts.
Exit status 1 if any answer was wrong or a connection failed.
"""

import argparse
import selectors
import socket
import sys
import time

REQUEST = b"GET / HTTP/1.1\r\nHost: bench\r\n\r\n"
BODY = b"Hello, world!\n"


class Conn:
    def __init__(self, port, quota, depth):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.setblocking(False)
        self.quota, self.depth = quota, depth
        self.outstanding = 0
        self.buf = b""
        self.done = 0

    def send(self):
        n = min(self.depth, self.quota - self.done - self.outstanding)
        if n > 0:
            self.sock.sendall(REQUEST * n)  # small: the socket takes it
            self.outstanding += n

    def receive(self):
        """Reads what is there; returns False if the connection broke."""
        try:
            data = self.sock.recv(65536)
        except BlockingIOError:
            return True
        if not data:
            return False
        self.buf += data
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                break
            head = self.buf[:end].decode("latin-1").split("\r\n")
            length = 0
            for line in head[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            if len(self.buf) < end + 4 + length:
                break
            body = self.buf[end + 4:end + 4 + length]
            self.buf = self.buf[end + 4 + length:]
            if not head[0].startswith("HTTP/1.1 200") or body != BODY:
                raise RuntimeError(f"bad answer: {head[0]!r} {body!r}")
            self.outstanding -= 1
            self.done += 1
        if self.outstanding == 0:
            self.send()
        return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("--conns", type=int, default=64)
    ap.add_argument("--requests", type=int, default=100000)
    ap.add_argument("--pipeline", type=int, default=1)
    a = ap.parse_args()
    sel = selectors.DefaultSelector()
    conns = []
    for i in range(a.conns):
        quota = a.requests // a.conns + (1 if i < a.requests % a.conns else 0)
        c = Conn(a.port, quota, a.pipeline)
        conns.append(c)
        sel.register(c.sock, selectors.EVENT_READ, c)
    t0 = time.monotonic()
    for c in conns:
        c.send()
    live = sum(1 for c in conns if c.done < c.quota)
    failed = 0
    while live:
        for key, _ in sel.select():
            c = key.data
            if not c.receive():
                failed += 1
                sel.unregister(c.sock)
                live -= 1
            elif c.done == c.quota:
                sel.unregister(c.sock)
                live -= 1
    dt = time.monotonic() - t0
    total = sum(c.done for c in conns)
    for c in conns:
        c.sock.close()
    print(f"requests={total} conns={a.conns} pipeline={a.pipeline} "
          f"seconds={dt:.3f} rps={total / dt:.0f}")
    return 1 if failed or total != a.requests else 0


if __name__ == "__main__":
    sys.exit(main())
