"""A command imports only what it uses: module sets at start-up, and the benchmarks run.

Every check runs in a fresh interpreter, because the test process has imported everything
already. No timing is asserted (the machines are shared); which modules load is deterministic.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import registry
import registry_schemas as schemas

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("duckdb", "pyarrow", "scipy", "numpy", "statsmodels", "inspect_ai")
"""Top-level packages a command that reads no data must not import."""


def _loaded(code: str, *args: str, roots: tuple[str, ...] = HEAVY) -> list[str]:
    """Run `code` in a fresh interpreter; return the `roots` packages it left imported."""
    report = (
        "import atexit, json, sys\n"
        "atexit.register(lambda: sys.__stderr__.write('\\nLOADED ' + json.dumps(sorted("
        f"{{m.split('.')[0] for m in sys.modules if m.split('.')[0] in {set(roots)!r}}}))))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", report + code, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    marker = result.stderr.rpartition("\nLOADED ")[2]
    assert marker != result.stderr, result.stderr
    return json.loads(marker)


def _registry_modules() -> list[str]:
    return sorted(
        p.relative_to(ROOT).with_suffix("").as_posix().replace("/", ".").removesuffix(".__init__")
        for p in (ROOT / "registry").rglob("*.py")
    )


def test_import_registry_loads_nothing_heavy():
    code = (
        "import sys, registry\n"
        "extra = sorted(m for m in sys.modules if m.startswith(('registry.', 'registry_schemas',"
        " 'pydantic')))\n"
        "assert not extra, extra\n"
    )
    assert _loaded(code) == []


def test_cli_import_loads_no_engine():
    assert _loaded("import registry_cli.main") == []


@pytest.mark.parametrize("flag", ["--help", "--version"])
def test_help_and_version_load_no_engine(flag):
    code = "import sys; sys.argv[0] = 'registry'\nfrom registry_cli.main import main\nmain()\n"
    roots = (*HEAVY, "registry_schemas", "pydantic")  # typer needs pydantic only to coerce
    assert _loaded(code, flag, roots=roots) == []


@pytest.mark.parametrize("flag", ["--help", "--version"])
def test_help_and_version_exit_zero(flag):
    result = subprocess.run(
        [sys.executable, "-c", "from registry_cli.main import main; main()", flag],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert (
        ("Usage:" in result.stdout) if flag == "--help" else result.stdout.startswith("registry ")
    )


def test_a_command_collects_cycles_less_often_than_the_default():
    code = (
        "import atexit, gc, sys\n"
        "atexit.register(lambda: sys.__stderr__.write(f'\\nGC {gc.get_threshold()}'))\n"
        "from registry_cli.main import GC_THRESHOLD, main\n"
        "assert gc.get_threshold() != GC_THRESHOLD  # set by the entry point, not by an import\n"
        "main()\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, "--version"], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.rpartition("\nGC ")[2] == "(50000, 50, 100)"


def test_no_module_imports_scipy_or_statsmodels():
    """scipy loads only where a p-value is computed; statsmodels only in the tests."""
    modules = _registry_modules()
    assert "registry.analysis.planning" in modules and "registry.analysis.stats" in modules
    code = "import importlib\n" + "".join(f"importlib.import_module({m!r})\n" for m in modules)
    assert _loaded(code, roots=("scipy", "statsmodels", "inspect_ai")) == []


def test_statsmodels_is_a_test_dependency_only():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]

    def names(requirements):
        return {r.split(">")[0].split("=")[0].split("<")[0].strip() for r in requirements}

    assert "statsmodels" not in names(project["dependencies"])
    assert "statsmodels" in names(project["optional-dependencies"]["test"])
    for path in (ROOT / "registry").rglob("*.py"):
        assert "statsmodels" not in path.read_text(encoding="utf-8"), path


def _init_tree(package: str = "registry") -> ast.Module:
    return ast.parse((ROOT / package / "__init__.py").read_text(encoding="utf-8"))


@pytest.mark.parametrize(("folder", "package"), [("registry", registry), ("schemas", schemas)])
def test_every_public_name_is_typed_mapped_and_listed(folder, package):
    """The TYPE_CHECKING imports, the lazy map and __all__ name the same things."""
    tree = _init_tree(folder)
    guarded = next(
        n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING"
    )
    typed = {
        alias.name: "." * node.level + (node.module or "")
        for node in guarded.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    prefix = "." if package is schemas else ""
    mapped = {name: prefix + module for module, names in package._EXPORTS.items() for name in names}
    assert typed == mapped
    assert sorted(package.__all__) == sorted(mapped)
    assert len(package.__all__) == len(set(package.__all__))


def test_schema_names_are_the_defining_modules_objects():
    for module, names in schemas._EXPORTS.items():
        defined = importlib.import_module(f"registry_schemas.{module}")
        for name in names:
            assert getattr(schemas, name) is getattr(defined, name), name
    assert set(schemas.__all__) <= set(dir(schemas))
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        schemas.no_such_name  # noqa: B018


def test_every_schema_module_is_listed_in_dependency_order():
    """Field docs are applied module by module in `MODULES` order; every model module is there,
    after each module it imports models from."""
    from registry_schemas import _base

    assert set(_base.MODULES) == set(schemas._EXPORTS)
    for position, name in enumerate(_base.MODULES):
        tree = ast.parse((ROOT / "schemas" / f"{name}.py").read_text(encoding="utf-8"))
        used = {n.module for n in tree.body if isinstance(n, ast.ImportFrom) and n.level == 1}
        assert used - {"_base"} <= set(_base.MODULES[:position]), name


def test_importing_a_model_builds_no_validator_and_loads_only_its_modules():
    code = (
        "import sys\n"
        "import registry_schemas\n"
        "assert not [m for m in sys.modules if m.startswith(('registry_schemas.', 'pydantic'))]\n"
        "from registry_schemas import TaskReport\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('registry_schemas.'))\n"
        "assert loaded == ['registry_schemas._base', 'registry_schemas.report'], loaded\n"
        "assert not TaskReport.__pydantic_complete__\n"
        "assert TaskReport.model_fields['task_id'].description is None\n"
    )
    _loaded(code)


def test_json_schema_describes_fields_after_the_models_were_used():
    """A model validated before its JSON Schema is generated still gets every field's docs."""
    code = (
        "from registry_schemas import Rate, SegmentEntry, TaskReport, PackedSegment\n"
        "Rate(estimate=None, low=None, high=None)\n"
        "assert Rate.__pydantic_complete__ and not TaskReport.__pydantic_complete__\n"
        "schema = TaskReport.model_json_schema(by_alias=True)\n"
        "rate = schema['$defs']['Rate']['properties']['estimate']\n"
        "assert rate['description'].startswith('Point estimate'), rate\n"
        "packed = PackedSegment.model_json_schema()['properties']\n"
        "assert packed['digest']['description'] == "
        "SegmentEntry.model_json_schema()['properties']['digest']['description']\n"
    )
    _loaded(code)


def test_public_names_are_the_defining_modules_objects():
    for module, names in registry._EXPORTS.items():
        defined = importlib.import_module(module)
        for name in names:
            assert getattr(registry, name) is getattr(defined, name), name
    assert set(registry.__all__) <= set(dir(registry))
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        registry.no_such_name  # noqa: B018


def test_a_submodule_never_hides_the_function_it_shares_a_name_with():
    code = (
        "import sys, registry\n"
        "import registry.analysis.compare, registry.ingest, registry.evidence.retract\n"
        "import registry.storage.verify\n"
        "modules = {'compare': 'analysis.compare', 'ingest': 'ingest',"
        " 'retract': 'evidence.retract', 'verify': 'storage.verify'}\n"
        "for name, module in modules.items():\n"
        "    assert getattr(registry, name) is getattr(sys.modules['registry.' + module], name)\n"
        "from registry import compare, ingest\n"
        "assert callable(compare) and callable(ingest)\n"
    )
    _loaded(code)


def _bench(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_startup_benchmark_smoke():
    bench = _bench("startup")
    timings = bench.run(rounds=1, warmup=False)
    assert set(timings) == {bench.REFERENCE, "registry --help", "registry --version"}
    assert all(t.best() > 0 and t.cpu_median() >= 0 for t in timings.values())
    lines = bench.describe(timings, bench.REFERENCE)
    assert len(lines) == 4 and "reference" in lines[1] and lines[2].count("x") == 3


def test_report_latency_benchmark_smoke():
    bench = _bench("report_latency")
    timings = bench.run(attempts=200, tasks=10, rounds=1, warmup=False)
    assert set(timings) == {bench.REFERENCE, "registry report --task"}
    assert all(t.best() > 0 for t in timings.values())


def test_noise_simulations_default_is_the_library_default():
    import inspect

    from registry_cli import suite

    default = inspect.signature(suite.noise).parameters["simulations"].default
    assert default == registry.DEFAULT_SIMULATIONS


def test_report_path_loads_only_the_models_it_uses():
    """A one-task report needs the attempt, ledger (and plan) and report models only."""
    code = (
        "import sys\n"
        "import registry.analysis.report, registry.render.report, registry.storage.layers\n"
        "from registry import LAYER_MODELS\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('registry_schemas.'))\n"
        "expected = ['_base', 'attempt', 'ledger', 'plan', 'report']\n"
        "assert loaded == ['registry_schemas.' + m for m in expected], loaded\n"
        "assert LAYER_MODELS['summary'].__name__ == 'Summary'\n"
        "assert 'registry_schemas.suite' in sys.modules\n"
    )
    _loaded(code)


def test_listing_live_segments_and_retractions_loads_no_pyarrow():
    """pyarrow loads where tables are built, not where the ledger is read."""
    code = (
        "from registry.storage import pack\n"
        "from registry.evidence import layer_views, retract\n"
        "assert pack.live_segments([]) == [] and retract.retracted_ids([]) == {}\n"
        "assert 'reports' in layer_views.LAYER_VIEWS\n"
    )
    assert "pyarrow" not in _loaded(code)
    built = (
        "from registry.storage import pack\n"
        "from registry.evidence import retract\n"
        "assert pack.COMMIT_SEQ.name == 'commit_seq'\n"
        "assert retract.RETRACTIONS_SCHEMA.names[0] == 'attempt_id'\n"
        "assert retract.retraction_table([]).schema == retract.retractions_schema()\n"
    )
    assert "pyarrow" in _loaded(built)


def _command_names() -> list[str]:
    from registry_cli.main import app

    names = [info.name for info in app.registered_groups]
    for info in app.registered_commands:
        names.append(info.name or info.callback.__name__.replace("_", "-"))
    return sorted(names)


def test_a_named_command_is_built_alone_and_anything_else_builds_all():
    from registry_cli.main import app, command_app

    assert len(_command_names()) == len(app.registered_commands) + len(app.registered_groups)
    for name in _command_names():
        only = command_app([name, "--help"])
        assert len(only.registered_commands) + len(only.registered_groups) == 1, name
    for args in ([], ["--help"], ["--version"], ["--endpoint", "x", "report"], ["reprot"]):
        assert command_app(args) is app, args


def test_the_command_built_alone_answers_as_the_whole_app(runner, loaded_root, monkeypatch):
    """Output and exit code are the same whether one command or every command was built."""
    from registry_cli.main import app, command_app

    monkeypatch.setenv("COLUMNS", "100")
    root = str(loaded_root)
    task = "astropy__astropy-12907"
    cases = [[name, "--help"] for name in _command_names()]
    cases += [
        ["report", "--task", task, "--root", root],
        ["report", "--task", task, "--root", root, "--format", "json"],
        ["report", "--task", task, "--root", root, "--format", "nope"],
        ["report", "--root", root],
        ["report", "--bogus"],
        ["reports", "--root", root],
        ["reports", "show"],
        ["reports", "nothing"],
        ["plan"],
        ["proof"],
        ["sql", "SELECT count(*) AS n FROM attempts", "--root", root],
        ["sql", "DROP TABLE attempts", "--root", root],
        ["verify", "--root", root],
    ]
    runner.invoke(app, cases[len(_command_names())])  # records the report layer first
    for args in cases:
        whole = runner.invoke(app, args)
        alone = runner.invoke(command_app(args), args)
        assert command_app(args) is not app, args
        assert (alone.exit_code, alone.output) == (whole.exit_code, whole.output), args


def test_a_json_report_imports_no_rich(loaded_root):
    code = (
        "import sys; sys.argv[0] = 'registry'\n"
        "from registry_cli.main import main\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as exit:\n"
        "    assert not exit.code, exit.code\n"
    )
    args = ["report", "--task", "astropy__astropy-12907", "--format", "json"]
    assert _loaded(code, *args, "--root", str(loaded_root), roots=("rich",)) == []
    table = ["sql", "SELECT 1 AS one", "--root", str(loaded_root)]
    assert _loaded(code, *table, roots=("rich",)) == ["rich"]  # a table needs it
