"""Failures of the file system are one `Error:` line naming the path, never a traceback.

Disk full, a read-only file system and permission denied are injected where the store writes
(in process, so they hold whoever runs the tests, root included); where the machine allows
mounting, a real 1 MiB tmpfs fills up and a real read-only remount refuses writes. Reading
commands still answer on a registry that cannot be written.
"""

from __future__ import annotations

import builtins
import errno
import os
import shutil
import subprocess
from pathlib import Path

import pytest

import registry
import registry.importers.sources
import registry.storage.store
from registry_cli.main import app
from tests.conftest import QUICKSTART, make_record, tree_snapshot, write_jsonl

TASK = "astropy__astropy-12907"
REASONS = {
    errno.ENOSPC: "no space left on device (disk full)",
    errno.EROFS: "read-only file system",
    errno.EACCES: "permission denied",
}


def _refuse(code: int):
    def refuse(path: Path, *args, **kwargs):
        raise OSError(code, os.strerror(code), str(path))

    return refuse


def _files(root: Path) -> dict[str, str]:
    """Every file under root and its hash (a failed write may leave an empty directory)."""
    return {k: v for k, v in tree_snapshot(root).items() if v != "dir"}


def _one_line(result, code: int = 1) -> str:
    assert result.exit_code == code, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    assert "Traceback" not in result.output
    return lines[0]


@pytest.mark.parametrize("code", sorted(REASONS), ids=[errno.errorcode[c] for c in sorted(REASONS)])
def test_ingest_write_failure_is_one_line_and_commits_nothing(
    code, invoke, root, tmp_path, monkeypatch
):
    registry.ingest(root, [str(QUICKSTART)])
    before = _files(root)
    monkeypatch.setattr(
        registry.storage.store, "_fsync_file", _refuse(code)
    )  # publishing a segment
    path = write_jsonl(tmp_path / "new.jsonl", [make_record(experiment_id="exp-new")])

    line = _one_line(invoke("ingest", str(path)))

    assert line.startswith(f"Error: cannot write {root.absolute()}/")
    assert line.endswith(REASONS[code])
    assert _files(root) == before
    monkeypatch.undo()
    assert registry.verify(registry.open_store(root)).problems == []


@pytest.mark.parametrize("code", sorted(REASONS), ids=[errno.errorcode[c] for c in sorted(REASONS)])
def test_new_registry_that_cannot_be_created_is_one_line(code, invoke, root, tmp_path, monkeypatch):
    monkeypatch.setattr(registry.storage.store, "_create_dir", _refuse(code))
    path = write_jsonl(tmp_path / "in.jsonl", [make_record()])

    line = _one_line(invoke("ingest", str(path)))

    assert line.startswith(f"Error: cannot create a registry at {root.absolute()}")
    assert line.endswith(REASONS[code])


def test_root_under_a_file_is_one_line(runner, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    path = write_jsonl(tmp_path / "in.jsonl", [make_record()])

    result = runner.invoke(app, ["ingest", str(path), "--root", str(blocker / "reg")])

    line = _one_line(result)
    assert str(blocker) in line and "a parent is not a directory" in line


def test_unreadable_input_file_is_one_line(invoke, tmp_path, monkeypatch):
    path = write_jsonl(tmp_path / "in.jsonl", [make_record()])
    real_open = builtins.open

    def guarded(file, *args, **kwargs):
        if Path(file) == path:
            raise PermissionError(errno.EACCES, "Permission denied", str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(registry.importers.sources, "open", guarded, raising=False)

    line = _one_line(invoke("ingest", str(path)))

    assert str(path) in line and "ermission denied" in line


def _read_only(monkeypatch) -> None:
    """Every write the store attempts fails as on a read-only file system."""
    monkeypatch.setattr(registry.storage.store, "_create_dir", _refuse(errno.EROFS))
    monkeypatch.setattr(registry.storage.store, "_fsync_file", _refuse(errno.EROFS))


def test_report_on_a_read_only_registry_prints_the_report(invoke, loaded_root, monkeypatch):
    expected = invoke("report", "--task", TASK).stdout  # recorded once while writable
    store = registry.open_store(loaded_root)
    layers = len(registry.list_layers(store))
    _read_only(monkeypatch)
    before = tree_snapshot(loaded_root)
    registry.build_report(store, TASK)

    for fmt in ("table", "json", "markdown"):
        result = invoke("report", "--task", TASK, "--format", fmt)
        assert result.exit_code == 0, result.output
        assert result.stdout.strip()
        lines = result.stderr.splitlines()
        assert len(lines) == 1, result.stderr
        assert lines[0].startswith("warning: report not recorded as a layer: cannot write ")
        assert lines[0].endswith("read-only file system")
    assert invoke("report", "--task", TASK).stdout == expected
    assert tree_snapshot(loaded_root) == before
    assert len(registry.list_layers(store)) == layers


def test_suite_commands_on_a_read_only_registry_still_answer(invoke, loaded_root, monkeypatch):
    _read_only(monkeypatch)
    for args in (
        ("summary",),
        ("summary", "--format", "json"),
        ("sql", "SELECT count(*) FROM attempts"),
    ):
        result = invoke(*args)
        assert result.exit_code == 0, result.output
        assert result.stdout.strip()
        assert "Traceback" not in result.stderr
    result = invoke("summary")
    assert result.stderr.startswith("warning: summary not recorded as a layer")


def test_ingest_into_a_read_only_registry_is_one_line(invoke, loaded_root, tmp_path, monkeypatch):
    _read_only(monkeypatch)
    path = write_jsonl(tmp_path / "new.jsonl", [make_record(experiment_id="exp-new")])
    line = _one_line(invoke("ingest", str(path)))
    assert line.endswith("read-only file system")


@pytest.mark.parametrize("url", ["gs://bucket/a/b", "az://container", "https://host/registry"])
@pytest.mark.parametrize("command", ["ingest", "sql", "report", "summary"])
def test_url_root_of_another_scheme_is_refused_and_creates_nothing(
    url, command, runner, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    path = write_jsonl(tmp_path / "in.jsonl", [make_record()])
    args = {
        "ingest": ["ingest", str(path)],
        "sql": ["sql", "SELECT 1"],
        "report": ["report", "--task", "t"],
        "summary": ["summary"],
    }[command]
    before = sorted(p.name for p in tmp_path.iterdir())

    line = _one_line(runner.invoke(app, [*args, "--root", url]))

    scheme = url.partition("://")[0]
    assert line == (
        f"Error: --root {url}: unsupported scheme '{scheme}'; use a directory or s3://bucket/prefix"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == before


@pytest.mark.parametrize("command", ["ingest", "sql"])
def test_unreachable_bucket_is_one_line_and_creates_nothing(command, runner, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("REGISTRY_S3_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("REGISTRY_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    path = write_jsonl(tmp_path / "in.jsonl", [make_record()])
    args = ["ingest", str(path)] if command == "ingest" else ["sql", "SELECT 1"]
    before = sorted(p.name for p in tmp_path.iterdir())

    line = _one_line(runner.invoke(app, [*args, "--root", "s3://bucket/prefix"]))

    assert line.startswith("Error: s3://bucket/prefix/REGISTRY: could not read the object")
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_url_root_from_the_environment_is_used(runner, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("REGISTRY_ROOT", "gs://bucket/prefix")
    line = _one_line(runner.invoke(app, ["sql", "SELECT 1"]))
    assert "--root gs://bucket/prefix: unsupported scheme 'gs'" in line
    assert list(tmp_path.iterdir()) == []


# --- a real file system: a small tmpfs, then remounted read-only ------------------------------


@pytest.fixture
def tmpfs(tmp_path):
    """A 1 MiB tmpfs, where mounting is permitted (root with CAP_SYS_ADMIN); else skip."""
    mount, umount = shutil.which("mount"), shutil.which("umount")
    if os.geteuid() != 0 or mount is None or umount is None:
        pytest.skip("mounting a tmpfs needs root and mount(8)")
    point = tmp_path / "small"
    point.mkdir()
    done = subprocess.run(
        [mount, "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(point)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"mount not permitted here: {done.stderr.decode(errors='replace').strip()}")
    try:
        yield point
    finally:
        subprocess.run([umount, "-l", str(point)], capture_output=True)


def _big_records(count: int) -> list[dict]:
    # Incompressible labels, so the segment cannot fit in 1 MiB.
    return [
        make_record(
            experiment_id="exp-big",
            task_id=f"task-{i % 7}",
            repeat_index=i,
            labels={"noise": os.urandom(1024).hex()},
        )
        for i in range(count)
    ]


def test_disk_full_on_a_real_small_file_system(tmpfs, invoke, runner, tmp_path):
    root = tmpfs / "reg"
    small = write_jsonl(tmp_path / "small.jsonl", [make_record()])
    assert runner.invoke(app, ["ingest", str(small), "--root", str(root)]).exit_code == 0
    before = _files(root)
    big = write_jsonl(tmp_path / "big.jsonl", _big_records(1500))

    result = runner.invoke(app, ["ingest", str(big), "--root", str(root)])

    line = _one_line(result)
    assert line == f"Error: cannot write {root}: no space left on device (disk full)"
    assert _files(root) == before
    assert registry.verify(registry.open_store(root)).problems == []


def test_real_read_only_file_system(tmpfs, runner, tmp_path):
    root = tmpfs / "reg"
    assert runner.invoke(app, ["ingest", str(QUICKSTART), "--root", str(root)]).exit_code == 0
    subprocess.run(["mount", "-o", "remount,ro", str(tmpfs)], check=True)

    report = runner.invoke(app, ["report", "--task", TASK, "--root", str(root)])
    assert report.exit_code == 0, report.output
    assert report.stdout.startswith(f"Task {TASK}")
    assert report.stderr.startswith("warning: report not recorded as a layer: cannot write ")
    assert report.stderr.rstrip().endswith("read-only file system")

    path = write_jsonl(tmp_path / "new.jsonl", [make_record(experiment_id="exp-new")])
    line = _one_line(runner.invoke(app, ["ingest", str(path), "--root", str(root)]))
    assert line.endswith("read-only file system")
    assert registry.verify(registry.open_store(root)).problems == []
