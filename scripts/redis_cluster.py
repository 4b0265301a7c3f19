"""A loopback Redis Cluster for tests and the benchmark: 3 masters and 3 replicas.

    python scripts/redis_cluster.py run [--node-timeout-ms N] -- <command...>

starts the cluster on free ports, runs the command with ``REDIS_URL`` set to the seeds,
``REDIS_CLUSTER=1``, ``WR_REDIS_CLUSTER_DIR`` naming where each node keeps its pid file (for
the failover test), and stops the cluster afterwards, whatever the command did. The channel
layer stays on the plain Redis (``CHANNELS_REDIS_URL``, default ``redis://127.0.0.1:6379/0``).

No Django here: the benchmark and the tests import ``start`` and ``stop`` too.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

MASTERS = 3
REPLICAS_PER_MASTER = 1
# How long a master may be silent before its replica takes over: short, so that a failover
# test sees it within seconds (production keeps Redis's default of 15 s or so).
NODE_TIMEOUT_MS = 1000


@dataclass(frozen=True)
class Cluster:
    directory: Path
    ports: tuple[int, ...]

    @property
    def seeds(self) -> str:
        return ",".join(f"redis://127.0.0.1:{port}" for port in self.ports)

    def pid_of(self, port: int) -> int:
        return int((self.directory / f"{port}.pid").read_text())


def _free_ports(count: int) -> list[int]:
    # The cluster bus listens on port + 10000: both must be free.
    ports: list[int] = []
    while len(ports) < count:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        if port + 10000 > 65535 or port in ports:
            continue
        with socket.socket() as bus:
            try:
                bus.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        ports.append(port)
    return ports


def start_node(directory: Path, port: int, *, node_timeout_ms: int = NODE_TIMEOUT_MS) -> None:
    subprocess.run(
        [
            "redis-server",
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            f"nodes-{port}.conf",
            "--cluster-node-timeout",
            str(node_timeout_ms),
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(directory),
            "--pidfile",
            str(directory / f"{port}.pid"),
            "--logfile",
            str(directory / f"{port}.log"),
            "--daemonize",
            "yes",
        ],
        check=True,
    )


def _cli(port: int, *args: str) -> str:
    return subprocess.run(
        ["redis-cli", "-p", str(port), *args], check=True, capture_output=True, text=True
    ).stdout


def _wait(check: object, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():  # type: ignore[operator]
                return
        except subprocess.CalledProcessError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"the Redis Cluster did not come up: {what}")


def start(directory: Path | None = None, *, node_timeout_ms: int = NODE_TIMEOUT_MS) -> Cluster:
    directory = directory or Path(tempfile.mkdtemp(prefix="wr-redis-cluster-"))
    ports = _free_ports(MASTERS * (1 + REPLICAS_PER_MASTER))
    for port in ports:
        start_node(directory, port, node_timeout_ms=node_timeout_ms)
    for port in ports:
        _wait(lambda port=port: _cli(port, "ping").strip() == "PONG", f"node {port}")
    subprocess.run(
        [
            "redis-cli",
            "--cluster",
            "create",
            *(f"127.0.0.1:{port}" for port in ports),
            "--cluster-replicas",
            str(REPLICAS_PER_MASTER),
            "--cluster-yes",
        ],
        check=True,
        capture_output=True,
    )
    for port in ports:
        _wait(
            lambda port=port: "cluster_state:ok" in _cli(port, "cluster", "info"),
            f"cluster state on {port}",
        )
    # Every node knows every other and its role before anyone uses the cluster.
    _wait(
        lambda: all(
            _cli(port, "cluster", "nodes").count("connected") == len(ports) for port in ports
        ),
        "every node connected",
    )
    # ...and every master has its replica in sync: until then a master lost is a slot lost.
    _wait(lambda: all(_replicated(port) for port in ports), "replicas in sync")
    return Cluster(directory=directory, ports=tuple(ports))


def _replicated(port: int) -> bool:
    info = _cli(port, "info", "replication")
    if "role:master" not in info:
        return "master_link_status:up" in info
    return f"connected_slaves:{REPLICAS_PER_MASTER}" in info and "state=online" in info


def stop(cluster: Cluster) -> None:
    for port in cluster.ports:
        try:
            os.kill(cluster.pid_of(port), signal.SIGKILL)
        except (OSError, ValueError):
            pass  # already gone (the failover test kills one)


def main(argv: list[str]) -> int:
    # --node-timeout-ms: a suite that kills no master asks for a long one (Redis's default is
    # 15 s): on a loaded machine a master busy or starved for a second would be failed over,
    # and the lanes on it would lose their index in the middle of a test.
    node_timeout_ms = NODE_TIMEOUT_MS
    if len(argv) >= 2 and argv[0] == "run" and argv[1] == "--node-timeout-ms":
        if len(argv) < 3 or not argv[2].isdigit():
            print(__doc__, file=sys.stderr)
            return 2
        node_timeout_ms = int(argv[2])
        argv = [argv[0], *argv[3:]]
    if len(argv) < 3 or argv[0] != "run" or argv[1] != "--":
        print(__doc__, file=sys.stderr)
        return 2
    cluster = start(node_timeout_ms=node_timeout_ms)
    env = {
        **os.environ,
        "REDIS_URL": cluster.seeds,
        "REDIS_CLUSTER": "1",
        "CHANNELS_REDIS_URL": os.environ.get("CHANNELS_REDIS_URL", "redis://127.0.0.1:6379/0"),
        "WR_REDIS_CLUSTER_DIR": str(cluster.directory),
    }
    print(f"Redis Cluster on {cluster.seeds}", flush=True)
    try:
        return subprocess.run(argv[2:], env=env).returncode
    finally:
        stop(cluster)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
