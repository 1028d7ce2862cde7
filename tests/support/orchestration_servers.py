"""Local servers for the scale-out tests: PostgreSQL (Debian's binaries) and moto's S3. Each runs in its own
process group and is stopped by PID; nothing is installed here: a missing binary is a skip with the reason, and a
failure under CI=true (tools.missing_tool)."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tools import missing_tool


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# A stateless fake server has nothing to shut down gracefully: SIGKILL after this grace. One full run saw these
# servers outlive SIGTERM (every stop took the whole 20 s grace, ~240 s of the suite) without a reproducible cause.
FAKE_SERVER_GRACE_S = 3


def stop_process_group(process: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 20) -> None:
    """Signal the server's own process group (it was started with start_new_session=True), then wait."""
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, sig)
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
    except ProcessLookupError:
        pass


def _wait_for_port(port: int, process: subprocess.Popen, log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(
                f"server exited with {process.returncode}: {log.read_text(errors='replace')[-2000:]}"
            )
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    stop_process_group(process)
    raise RuntimeError(
        f"server did not listen on {port} within {timeout}s: {log.read_text(errors='replace')[-2000:]}"
    )


def postgres_bin_dir() -> Path | None:
    """Directory holding initdb + postgres: PATH first, then Debian's /usr/lib/postgresql/<version>/bin."""
    found = shutil.which("initdb")
    candidates = [Path(found).resolve().parent] if found else []
    candidates += [Path(p) for p in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)]
    for folder in candidates:
        if (folder / "initdb").is_file() and (folder / "postgres").is_file():
            return folder
    return None


@dataclass
class PostgresServer:
    host: str
    port: int
    username: str
    db_name: str

    @property
    def url(self) -> str:
        return f"postgresql://{self.username}@{self.host}:{self.port}/{self.db_name}"


@contextmanager
def local_postgres(db_name: str = "dagster", password: str | None = None) -> Iterator[PostgresServer]:
    """A throwaway PostgreSQL cluster in a temp dir on a free port, on 127.0.0.1 only: trust auth, or with
    `password` the `dagster` user's password is required (scram-sha-256), so a client that does not send it fails.

    PostgreSQL refuses to run as root; under root the cluster runs as the `postgres` system user."""
    bin_dir = postgres_bin_dir()
    if bin_dir is None:
        missing_tool("PostgreSQL server binaries (initdb, postgres) not found; install Debian's `postgresql`")
    run_as = None
    if os.geteuid() == 0:
        try:
            run_as = pwd.getpwnam("postgres")
        except KeyError:
            missing_tool("running as root and there is no `postgres` user to run the PostgreSQL server as")
    root = Path(tempfile.mkdtemp(prefix="lumina-pg-"))
    data, log = root / "data", root / "server.log"
    user_kwargs = {}
    if run_as is not None:
        os.chown(root, run_as.pw_uid, run_as.pw_gid)
        user_kwargs = {"user": run_as.pw_uid, "group": run_as.pw_gid, "extra_groups": []}
    env = {**os.environ, "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"}
    process = None
    try:
        auth = ["--auth=trust"]
        if password is not None:
            password_file = root / "password"
            password_file.write_text(password + "\n", encoding="utf-8")
            if run_as is not None:
                os.chown(password_file, run_as.pw_uid, run_as.pw_gid)
            auth = ["--auth=scram-sha-256", f"--pwfile={password_file}"]
        subprocess.run(
            [
                str(bin_dir / "initdb"),
                "-D",
                str(data),
                "-U",
                "dagster",
                *auth,
                "-E",
                "UTF8",
                "--no-sync",
            ],
            check=True,
            capture_output=True,
            env=env,
            cwd=root,
            **user_kwargs,
        )
        port = free_port()
        with log.open("wb") as log_handle:
            process = subprocess.Popen(
                [str(bin_dir / "postgres"), "-D", str(data), "-p", str(port), "-k", str(root)]
                + ["-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"],
                stdout=log_handle,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=env,
                cwd=root,
                **user_kwargs,
            )
        _wait_for_port(port, process, log, timeout=60)
        import psycopg2

        deadline = time.monotonic() + 30
        while True:  # the port opens a moment before the server accepts logins
            try:
                connection = psycopg2.connect(
                    host="127.0.0.1", port=port, user="dagster", dbname="postgres", password=password or None
                )
                break
            except psycopg2.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.3)
        connection.autocommit = True
        with connection.cursor() as cursor:
            cursor.execute(f'CREATE DATABASE "{db_name}"')
        connection.close()
        yield PostgresServer("127.0.0.1", port, "dagster", db_name)
    finally:
        if process is not None:
            stop_process_group(process, signal.SIGINT)  # SIGINT = PostgreSQL's "fast" shutdown
        shutil.rmtree(root, ignore_errors=True)


@dataclass
class S3Server:
    endpoint: str
    access_key: str = "lumina-test"
    secret_key: str = "lumina-test-secret"
    region: str = "us-east-1"

    def client(self):
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            region_name=self.region,
        )

    def lancedb_storage_options(self) -> dict[str, str]:
        return {
            "aws_endpoint": self.endpoint,
            "aws_region": self.region,
            "aws_access_key_id": self.access_key,
            "aws_secret_access_key": self.secret_key,
            "allow_http": "true",
        }


@contextmanager
def local_moto_s3() -> Iterator[S3Server]:
    """moto's S3 server (the dev extra's moto[server]) on a free 127.0.0.1 port."""
    server = Path(sys.executable).parent / "moto_server"
    if not server.is_file():
        found = shutil.which("moto_server")
        if not found:
            missing_tool("moto_server not found; install the dev extra (moto[server])")
        server = Path(found)
    root = Path(tempfile.mkdtemp(prefix="lumina-moto-"))
    log = root / "moto.log"
    port = free_port()
    process = None
    try:
        with log.open("wb") as log_handle:
            process = subprocess.Popen(
                [str(server), "-H", "127.0.0.1", "-p", str(port)],
                stdout=log_handle,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        _wait_for_port(port, process, log, timeout=60)
        yield S3Server(endpoint=f"http://127.0.0.1:{port}")
    finally:
        if process is not None:
            stop_process_group(process)
        shutil.rmtree(root, ignore_errors=True)


@contextmanager
def static_http_server(directory: Path) -> Iterator[str]:
    """`python -m http.server` serving `directory` on 127.0.0.1 (any GET / HEAD answers, proxy-form requests too;
    404 for paths that are not there), in its own session, stopped by PID; yields its base URL."""
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "http.server",
            str(port),
            "--bind",
            "127.0.0.1",
            "--directory",
            str(directory),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "local server did not start"
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_process_group(server, timeout=FAKE_SERVER_GRACE_S)
