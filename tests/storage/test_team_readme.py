"""The README's "A registry for a team" walk, executed against the test S3 server."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from typer.testing import CliRunner

import registry
from registry_cli.main import app
from tests import s3server

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text()


def section() -> str:
    start = README.index("## A registry for a team")
    return README[start : README.index("\n## ", start + 1)]


def test_readme_team_walk(s3_prefix, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (block,) = re.findall(r"```bash\n(.*?)```", section(), flags=re.S)
    text = block.replace("http://127.0.0.1:8333", s3_prefix.endpoint)
    text = text.replace("s3://registry-test/team", s3_prefix.url)
    text = text.replace("fixtures/", f"{REPO}/fixtures/")
    env = {"REGISTRY_CACHE": str(tmp_path / "cache"), "AWS_ENDPOINT_URL": ""}
    outputs = []
    for line in text.strip().splitlines():
        words = shlex.split(line, comments=True)
        if words[0] == "export":
            env.update(word.split("=", 1) for word in words[1:])
            continue
        assert words[0] == "registry", line
        result = CliRunner().invoke(app, words[1:], env=env)
        assert result.exit_code == 0, f"{line}\n{result.output}"
        outputs.append(result.stdout)
    assert (env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"]) == (
        s3server.ACCESS_KEY_ID,
        s3server.SECRET_ACCESS_KEY,
    )
    assert "astropy__astropy-12907" in outputs[1]

    for key, value in env.items():
        monkeypatch.setenv(key, value)
    bucket, copy = registry.open_store(s3_prefix.url), registry.open_store(tmp_path / "team-copy")
    assert registry.verify(bucket).ok and registry.verify(copy).ok
    names = [n for n in bucket.names("") if not n.startswith("tmp/")]
    assert names == [n for n in copy.names("") if not n.startswith("tmp/")]
    assert all(bucket.read_bytes(n) == copy.read_bytes(n) for n in names)
    published = json.loads(
        CliRunner()
        .invoke(
            app,
            ["publish", "iceberg", "--format", "json"]
            + ["--catalog", "sqlite:///iceberg/catalog.db", "--table", "evidence.attempts"],
            env=env,
        )
        .stdout
    )
    assert published["published"] is False  # the walk published this head already
    assert published["commit_seq"] == len(registry.read_ledger(bucket))
