"""Things that fail on purpose: a private Redis server and a TCP proxy in front of PostgreSQL."""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

from tests.processes import free_port, wait_until


class RedisServer:
    """A Redis of the test's own (no persistence), which it may kill and start again."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.workdir = workdir
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--maxmemory-policy",
                "noeviction",
                "--dir",
                str(self.workdir),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_until(self._answers, timeout=10, what="redis-server")

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)  # a stopped one, too
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def pause(self) -> None:
        """Stall it (SIGSTOP), its data kept: clients connect but get no answer, as over a
        cut network or from a server stuck in a fork."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)


class TcpProxy:
    """Forwards a local port to PostgreSQL until cut; a cut drops every connection and
    refuses new ones, as a network partition would."""

    def __init__(self, target_port: int) -> None:
        self.port = free_port()
        self.target = ("127.0.0.1", target_port)
        self.open = threading.Event()
        self.open.set()
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._stop = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stop:
            try:
                ready, _, _ = select.select([self._listener], [], [], 0.1)
                if not ready:
                    continue
                client, _ = self._listener.accept()
            except (OSError, ValueError):
                return  # closed
            if not self.open.is_set():
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                try:
                    s.close()
                except OSError:
                    pass

    def cut(self) -> None:
        self.open.clear()
        with self._lock:
            for s in self._sockets:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self._sockets.clear()

    def restore(self) -> None:
        self.open.set()

    def close(self) -> None:
        self._stop = True
        self.cut()
        self._listener.close()


def kill_process_group(proc: subprocess.Popen[bytes]) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def wait_a_little(seconds: float) -> None:
    time.sleep(seconds)
