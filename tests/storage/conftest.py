"""Fixtures for the object-storage tests: one SeaweedFS server per session (per xdist worker)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.s3server import S3Server, seaweed_s3


@dataclass(frozen=True)
class S3Prefix:
    """A fresh, empty prefix in the test bucket: `s3://bucket/<prefix>`."""

    server: S3Server
    prefix: str

    @property
    def url(self) -> str:
        return self.server.url(self.prefix)

    @property
    def bucket(self) -> str:
        return self.server.bucket

    @property
    def endpoint(self) -> str:
        return self.server.endpoint

    @property
    def env(self) -> dict[str, str]:
        """AWS_* variables (credentials, region, endpoint, allow-http) that reach the server."""
        return self.server.env()

    def store(self) -> Any:
        """An `obstore.store.S3Store` rooted at this prefix (names are relative to it)."""
        return self.server.store(self.prefix)


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """A SeaweedFS S3 server on loopback, started once per session and stopped afterwards."""
    with seaweed_s3() as server:
        yield server


@pytest.fixture
def s3_prefix(s3_server: S3Server) -> S3Prefix:
    """A unique prefix in the session's bucket, so tests never see each other's objects."""
    return S3Prefix(server=s3_server, prefix=f"t-{uuid.uuid4().hex}")
