"""Every command on a bucket root: the same answers as on the directory it was synced from."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import registry
from registry_cli.main import app
from tests.conftest import make_record, write_jsonl


def run(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, f"{args}\n{result.output}"
    return result.stdout


@pytest.fixture
def pair(s3_prefix, tmp_path, monkeypatch):
    """A directory registry and the bucket it was synced to, both at the same head."""
    for key, value in s3_prefix.env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("REGISTRY_CACHE", str(tmp_path / "cache"))
    local = str(tmp_path / "reg")
    for arm, resolved in (("base", 3), ("cand", 4)):
        records = [
            make_record(
                experiment_id=arm,
                task_id=f"task-{t}",
                repeat_index=r,
                terminal_class="resolved" if r < resolved - t % 2 else "model_failure",
                envelope={**make_record()["envelope"], "model": f"m-{arm}"},
            )
            for t in range(6)
            for r in range(5)
        ]
        run("ingest", str(write_jsonl(tmp_path / f"{arm}.jsonl", records)), "--root", local)
    run("sync", local, s3_prefix.url)
    return local, s3_prefix.url


QUESTIONS = [
    ["report", "--task", "task-1", "--format", "json"],
    ["summary", "--format", "json"],
    ["noise", "--system", "experiment=base", "--format", "json"],
    ["compare", "--baseline", "experiment=base", "--candidate", "experiment=cand"]
    + ["--format", "json"],
    ["regressions", "--format", "json"],
    ["sql", "SELECT task_id, count(*) AS n FROM samples GROUP BY 1 ORDER BY 1", "--format", "json"],
]


def test_questions_as_of_the_synced_head_have_the_same_answers(pair):
    local, bucket = pair
    head = str(len(registry.read_ledger(registry.open_store(local))))
    for args in QUESTIONS:
        mine, theirs = (run(*args, "--as-of", head, "--root", root) for root in (local, bucket))
        assert mine == theirs, args
        assert json.loads(mine)


def test_writing_commands_work_on_the_bucket(pair, tmp_path):
    _, bucket = pair
    store = registry.open_store(bucket)
    attempt = registry.run_query(store, "SELECT attempt_id FROM attempts LIMIT 1").rows[0][0]

    run("report", "--task", "task-2", "--root", bucket)
    run("summary", "--root", bucket)
    ids = tmp_path / "ids.txt"
    ids.write_text(attempt + "\n")
    run("retract", "--attempts", str(ids), "--reason", "wrong grader", "--root", bucket)
    run("pack", "--root", bucket)
    run("proof", "inclusion", attempt, "--root", bucket)
    run("export", "--parquet", str(tmp_path / "export"), "--root", bucket)
    run("site", "--output", str(tmp_path / "site"), "--root", bucket)

    check = json.loads(run("verify", "--root", bucket, "--format", "json"))
    assert check["ok"] and check["unreferenced"] == []
    counted = registry.run_query(registry.open_store(bucket), "SELECT count(*) FROM attempts")
    assert counted.rows == [(59,)]  # 60 attempts, one retracted
    assert (tmp_path / "site" / "index.html").is_file()
