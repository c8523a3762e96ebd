"""`registry plan` and `registry compare --plan` from the command line, and the README walk."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from registry_cli.main import app
from tests.conftest import FIXTURES

REPO = FIXTURES.parent
HERE = FIXTURES / "plans"
README = (REPO / "README.md").read_text()
PLAN_ID = "blake3:0ac3fa71e783cd768d13ca609e93fcf70f127f7caee621350b2efd75354a874e"
PREFIX = PLAN_ID[7:19]


def _section() -> str:
    start = README.index("### Plan, run, compare")
    end = README.index("\n### ", start + 1)
    return README[start:end]


def _readme_commands() -> list[tuple[list[str], int, str]]:
    """Return (arguments, expected exit code, line) of every command in the section."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", _section(), flags=re.S):
        for line in block.splitlines():
            if not line.strip():
                continue
            words = shlex.split(line, comments=True)
            assert words[0] == "registry", line
            code = int(m.group(1)) if (m := re.search(r"# exits (\d+)", line)) else 0
            commands.append((words[1:], code, line))
    return commands


def test_readme_section_walks_a_plan_from_freeze_to_verdict(runner, tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    env = {"REGISTRY_ROOT": str(tmp_path / "reg")}
    commands = _readme_commands()
    assert len(commands) >= 15
    outputs = {}
    for args, code, line in commands:
        result = runner.invoke(app, args, env=env)
        assert result.exit_code == code, f"{line}\n{result.output}"
        outputs[line] = result.stdout
    lines = [line for _, _, line in commands]
    frozen = json.loads(outputs[lines[0]])
    assert frozen["plan_id"] == PLAN_ID and frozen["created"] is True
    first, second, post_hoc = (outputs[lines[i]] for i in range(5, 8))
    assert "candidate ahead by 34.0 points, same direction on 10 of 10 tasks" in first
    assert "look 2: treat as unproven unless the plan allowed 2 looks" in second
    (item,) = json.loads(post_hoc)["comparisons"]
    assert item["look"] == 3 and "post_hoc" in item["verdict"]["flags"]
    assert "(look 1)" in outputs[lines[10]] and "(look 4)" in outputs[lines[10]]
    assert json.loads(outputs[lines[11]])["attempts_per_arm"] == 1471
    assert json.loads(outputs[lines[12]])["discordant_pairs"] == 49
    assert "minority 31.7% of the time" in outputs[lines[13]]


def test_readme_figures_are_the_commands_answers():
    section = _section()
    for figure in ("1471", "356", "49 at ψ = 0.7", "31.7%", "7.8%", "41.0%", "0ac3fa71e783"):
        assert figure in section
    assert PLAN_ID.startswith("blake3:" + PREFIX)


def test_freeze_prints_plan_id_and_created(invoke):
    first = invoke("plan", "freeze", str(HERE / "plan.json"), "--format", "json")
    again = invoke("plan", "freeze", str(HERE / "plan.json"), "--format", "json")
    assert first.exit_code == again.exit_code == 0
    assert json.loads(first.stdout)["created"] is True
    assert json.loads(again.stdout) == {**json.loads(first.stdout), "created": False}
    assert json.loads(first.stdout)["plan_id"] == PLAN_ID


def test_an_edit_names_its_predecessor(invoke, tmp_path):
    invoke("plan", "freeze", str(HERE / "plan.json"))
    edited = {**json.loads((HERE / "plan.json").read_text()), "attempts_per_task": 10}
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(edited))
    refused = invoke("plan", "freeze", str(path))
    assert refused.exit_code == 1 and "already frozen as" in refused.output
    accepted = invoke("plan", "freeze", str(path), "--replaces", PREFIX, "--format", "json")
    assert accepted.exit_code == 0, accepted.output
    second = json.loads(accepted.stdout)
    assert second["replaces"] == PLAN_ID and second["plan_id"] != PLAN_ID
    listed = json.loads(invoke("plan", "list", "--format", "json").stdout)
    assert [(p["plan_id"], p["replaced_by"]) for p in listed] == [
        (PLAN_ID, second["plan_id"]),
        (second["plan_id"], None),
    ]
    shown = json.loads(invoke("plan", "show", second["plan_id"][7:20]).stdout)
    assert shown["plan"]["attempts_per_task"] == 10 and shown["plan"]["replaces"] == PLAN_ID


@pytest.mark.parametrize(
    ("drop", "message"),
    [("threshold", "threshold: missing"), ("decision_rule", "decision_rule: missing")],
)
def test_a_plan_without_a_threshold_or_rule_is_one_line(invoke, tmp_path, drop, message):
    document = json.loads((HERE / "plan.json").read_text())
    del document[drop]
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(document))
    result = invoke("plan", "freeze", str(path))
    assert result.exit_code == 1
    assert result.stderr.count("\n") == 1 and message in result.stderr


def test_status_require_complete_exits_1_on_the_incomplete_fixture(invoke):
    invoke("plan", "freeze", str(HERE / "plan.json"))
    invoke("ingest", str(HERE / "incomplete.jsonl"))
    table = invoke("plan", "status", PREFIX)
    assert table.exit_code == 0
    for shown in (
        "incomplete, 23 of 24 cells",
        "task not in the plan",
        "system not an arm",
        "grader_version is grader-1.1, the plan holds grader-1.0",
        "runtime 1250 s above the budget of 900 s",
    ):
        assert shown in table.stdout, shown
    gated = invoke("plan", "status", PREFIX, "--require-complete", "--format", "json")
    assert gated.exit_code == 1 and "5 planned valid attempts missing in 1 cells" in gated.stderr
    assert json.loads(gated.stdout)["complete"] is False


def test_status_of_an_unknown_plan_is_one_line(invoke):
    invoke("plan", "freeze", str(HERE / "plan.json"))
    result = invoke("plan", "status", "deadbeefdeadbeef")
    assert result.exit_code != 0 and "no frozen plan matches" in result.stderr


def test_compare_plan_keeps_the_plain_plan_id_filter(invoke, tmp_path):
    invoke("ingest", str(HERE / "attempts.jsonl"))  # no frozen plan: --plan is a label filter
    result = invoke(
        "compare",
        "--baseline",
        "agent_system=aaaaaaaa",
        "--candidate",
        "agent_system=bbbbbbbb",
        "--plan",
        PLAN_ID,
        "--format",
        "json",
    )
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["plan_id"] is None and document["scope"]["plan"] == PLAN_ID
    assert len(document["comparisons"][0]["tasks"]) == 12  # every task: no reporting split
    missing = invoke("compare", "--plan", PLAN_ID)
    assert missing.exit_code == 1 and "give --baseline and --candidate" in missing.stderr


def test_exploratory_without_a_plan_is_refused(invoke):
    invoke("ingest", str(HERE / "attempts.jsonl"))
    result = invoke(
        "compare",
        "--baseline",
        "agent_system=aaaaaaaa",
        "--candidate",
        "agent_system=bbbbbbbb",
        "--exploratory",
    )
    assert result.exit_code == 1 and "--exploratory needs --plan" in result.stderr


def test_size_json_figures(invoke):
    sized = invoke("plan", "size", "--rates", "0.60", "0.70", "--format", "json")
    assert json.loads(sized.stdout)["attempts_per_arm"] == 356
    pairs = invoke("plan", "size", "--discordant", "0.7", "--format", "json")
    assert json.loads(pairs.stdout)["discordant_pairs"] == 49
    nothing = invoke("plan", "size")
    assert nothing.exit_code == 1 and "give --rates" in nothing.stderr


def test_size_what_if_matches_registry_noise(invoke):
    invoke("ingest", str(HERE / "attempts.jsonl"))
    args = ("--system", "agent_system=bbbbbbbb", "--attempts", "2", "--attempts", "5")
    noise = json.loads(invoke("noise", *args, "--format", "json").stdout)
    sized = json.loads(invoke("plan", "size", *args, "--format", "json").stdout)
    assert {str(c["attempts"]): c["mdd"] for c in sized["mdd"]} == noise["mdd_by_attempts"]
    assert sized["measured_tasks"] == noise["tasks"] == 12


def test_plan_help_lists_every_subcommand(runner):
    result = runner.invoke(app, ["plan", "--help"])
    assert result.exit_code == 0
    for name in ("freeze", "list", "show", "status", "size"):
        assert name in result.stdout
        assert f"`registry plan {name}" in README or f"registry plan {name}" in README


def test_readme_commands_are_parsed(tmp_path: Path):
    commands = _readme_commands()
    assert [c for c in commands if c[1] == 1][0][0][:3] == ["compare", "--plan", PREFIX]
