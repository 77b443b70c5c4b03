"""What a new user hits on the command line (issue 20, CLI items of issue 17): reads
never create a store, usage mistakes exit 2 with "did you mean", numbers are checked,
Ctrl-C exits 130, ``-h`` / ``-V`` / ``-q`` / ``-v`` / completion, SQL from stdin, a file
and with parameters, renamed options keep their old spelling, help is not cut.

Expected values are worked out by hand from the bundled openb sample (8152 pods: the
counts are the ones tests/test_cli.py already pins) or from the SQL itself.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from gpu_trace import __version__
from gpu_trace.cli import app
from gpu_trace.store.generations import snapshot_root
from gpu_trace.store.scan import scan
from tests.conftest import OPENB, ROOT

runner = CliRunner()


def run(*args: str | Path, input: str | None = None):
    return runner.invoke(app, [str(a) for a in args], input=input, prog_name="gpu-trace")


def one_line_error(result, code: int) -> str:
    """The single stderr line of a failed command (no traceback), after the exit code."""
    assert result.exit_code == code, (result.exit_code, result.output)
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


# -- 1. reads never create a store ---------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ["sql", "select count(*) from jobs"],
        ["sql", "--views"],
        ["analyze", "summary"],
        ["analyze", "failures"],
        ["replay", "run", "-s", "openb"],
        ["replay", "export", "-s", "openb", "--to", "chronus", "-o", "x.csv"],
        ["telemetry", "jobs"],
    ],
)
def test_read_commands_refuse_a_missing_store(tmp_path: Path, command: list[str]) -> None:
    missing = tmp_path / "typo"
    line = one_line_error(run(*command, "--store", missing), 1)
    assert f"no store at {missing}" in line and "gpu-trace ingest" in line
    assert not missing.exists()


def test_report_refuses_a_missing_store(tmp_path: Path) -> None:
    missing = tmp_path / "typo"
    site = tmp_path / "site"
    line = one_line_error(run("report", "--store", missing, "--out", site), 1)
    assert f"no store at {missing}" in line
    assert not missing.exists() and not site.exists()


def test_default_store_is_not_created_in_another_folder(tmp_path: Path) -> None:
    """``cd /tmp && gpu-trace sql ...``: data/store relative to the working directory."""
    env = {k: v for k, v in os.environ.items() if k != "GPU_TRACE_STORE"}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run(
        [sys.executable, "-c", "from gpu_trace.cli import main; main()", "sql", "select 1"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.strip() == (
        "error: no store at data/store; create one with "
        "`gpu-trace ingest SOURCE PATH --store data/store` (or set --store / $GPU_TRACE_STORE)"
    )
    assert list(tmp_path.iterdir()) == []


def test_an_unrelated_folder_is_not_a_store(tmp_path: Path) -> None:
    """A mistyped --store that exists (a home folder, /tmp) must not get tables in it."""
    folder = tmp_path / "photos"
    folder.mkdir()
    (folder / "a.jpg").write_bytes(b"x")
    one_line_error(run("sql", "select 1", "--store", folder), 1)
    assert [p.name for p in folder.iterdir()] == ["a.jpg"]


def test_ingest_creates_the_store(tmp_path: Path) -> None:
    store = tmp_path / "new" / "store"
    assert run("ingest", "openb", OPENB, "--store", store).exit_code == 0
    assert run("sql", "select count(*) from jobs", "--store", store, "-f", "csv").stdout == (
        "count_star()\n8152\n"
    )


def test_output_folder_is_not_created(openb_store: Path, tmp_path: Path) -> None:
    target = tmp_path / "nonexistent" / "dir" / "x.csv"
    line = one_line_error(run("sql", "select 1", "--store", openb_store, "-o", target), 1)
    assert f"no folder {target.parent}" in line
    assert not (tmp_path / "nonexistent").exists()
    line = one_line_error(run("analyze", "summary", "--store", openb_store, "-o", tmp_path), 1)
    assert "is a folder" in line


# -- 2. no tracebacks; numbers checked -----------------------------------------------


def test_several_statements_print_the_last_result(openb_store: Path) -> None:
    result = run("sql", "select 1 as a; select 2 as b", "--store", openb_store, "-f", "csv")
    assert result.exit_code == 0 and result.stdout == "b\n2\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["replay", "run", "-s", "openb", "--load", "0"], "--load must be > 0, got 0"),
        (["replay", "run", "-s", "openb", "--load", "-1"], "--load must be > 0, got -1"),
        (["replay", "run", "-s", "openb", "--load", "nan"], "--load must be a finite number"),
        (["replay", "run", "-s", "openb", "--load", "inf"], "--load must be a finite number"),
        (["replay", "compare", "-s", "openb", "--load", "0"], "--load must be > 0"),
        (["replay", "run", "-s", "openb", "--restore-s", "-5"], "--restore-s must be >= 0"),
        (["replay", "run", "-s", "openb", "--multinode-slowdown", "0"], "multinode_slowdown"),
        (["replay", "run", "-s", "openb", "--retries", "-1"], "retries must be >= 0"),
        (["replay", "run", "-s", "openb", "--checkpoint", "soon"], "is not a duration"),
        (["replay", "live", "-s", "openb", "--out", "x", "--time-scale", "0"], "--time-scale"),
        (["replay", "live", "-s", "openb", "--out", "x", "--fail-rate", "2"], "must be <= 1"),
        (["analyze", "energy", "--max-gap", "0"], "--max-gap must be > 0"),
        (["sql", "select 1", "--max-rows", "-1"], "--max-rows must be >= 0"),
    ],
)
def test_bad_numbers_are_one_line_usage_errors(
    openb_store: Path, args: list[str], message: str
) -> None:
    assert message in one_line_error(run(*args, "--store", openb_store), 2)


def test_synth_jobs_must_be_positive(tmp_path: Path) -> None:
    line = one_line_error(run("synth", "openb", "--jobs", "0", "--out", tmp_path / "s"), 2)
    assert "--jobs must be >= 1, got 0" in line
    assert not (tmp_path / "s").exists()


# -- 3. usage mistakes: exit 2, "did you mean" ---------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["replay", "run", "-s", "openb", "--policy", "sfj"], "did you mean 'sjf'?"),
        (["replay", "run", "-s", "openb", "--placement", "bestfit"], "did you mean 'best-fit'?"),
        (["replay", "compare", "-s", "openb", "--policies", "fifo,sfj"], "did you mean 'sjf'?"),
        (["analyze", "failures", "--by", "sise"], "did you mean 'size'?"),
        (["analyze", "queueing", "--by", "gpu"], "did you mean 'gpus'?"),
        (["analyze", "jobs", "--by", "gpu_typ"], "did you mean 'gpu_type'?"),
        (["report", "-s", "opnb"], "unknown source 'opnb'; did you mean 'openb'?"),
        (["analyze", "summary", "-s", "opnb"], "unknown source 'opnb'; did you mean 'openb'?"),
    ],
)
def test_unknown_names_suggest_the_closest(
    openb_store: Path, tmp_path: Path, args: list[str], message: str
) -> None:
    extra = ["--out", str(tmp_path / "site")] if args[0] == "report" else []
    assert message in one_line_error(run(*args, *extra, "--store", openb_store), 2)
    assert not (tmp_path / "site").exists()


def test_policy_typo_message_is_exact(openb_store: Path) -> None:
    result = run("replay", "run", "-s", "openb", "--policy", "sfj", "--store", openb_store)
    assert (
        one_line_error(result, 2) == "error: unknown scheduling policy 'sfj'; did you mean 'sjf'?"
    )


def test_names_without_a_close_match_list_the_known_ones(openb_store: Path, tmp_path: Path) -> None:
    line = one_line_error(run("analyze", "failures", "--by", "foo", "--store", openb_store), 2)
    known = "cause, gpus, size, user, vc, status, account, qos, partition"
    assert line == f"error: unknown --by value 'foo'; known: {known}"
    assert "(" not in line  # no Python tuple
    line = one_line_error(run("synth", "alibaba", "--out", tmp_path / "s"), 2)
    assert line.startswith("error: unknown trace family 'alibaba'; known: philly, helios, pai")
    line = one_line_error(
        run("report", "--images", "jpg", "--store", openb_store, "--out", tmp_path / "r"), 2
    )
    assert "unknown image format 'jpg'" in line and not (tmp_path / "r").exists()
    assert "unknown table 'job'; did you mean 'jobs'?" in one_line_error(run("schema", "job"), 2)


def test_a_known_source_missing_from_the_store_is_a_data_error(
    openb_store: Path, tmp_path: Path
) -> None:
    line = one_line_error(
        run("report", "-s", "helios", "--store", openb_store, "--out", tmp_path / "r"), 1
    )
    assert "no data for source 'helios'" in line and "it holds: openb" in line
    assert not (tmp_path / "r").exists()


# -- 4. Ctrl-C and strict booleans ---------------------------------------------------


def _big_openb(folder: Path, copies: int) -> None:
    """The bundled pod list repeated ``copies`` times with unique pod names (an input that
    takes seconds to ingest), plus the node lists."""
    folder.mkdir()
    pods = pl.read_csv(OPENB / "openb_pod_list_default.csv", infer_schema=False)
    big = pl.concat(
        [pods.with_columns(pl.col("name") + f"-{k}") for k in range(copies)], how="vertical"
    )
    big.write_csv(folder / "openb_pod_list_default.csv")
    for node in OPENB.glob("openb_node_list_*.csv"):
        (folder / node.name).write_bytes(node.read_bytes())


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_exits_130_and_keeps_the_store(store_copy: Path, tmp_path: Path) -> None:
    """SIGINT while ingest is staging its files: one ``interrupted`` line, exit 130, the
    store still at its previous generation with the same 8152 jobs, nothing staged left."""
    big = tmp_path / "big"
    _big_openb(big, 40)
    snapshot_root(store_copy)  # the copy followed the `current` link: restore the layout
    before = (store_copy / "current").readlink()
    proc = subprocess.Popen(
        [sys.executable, "-c", "from gpu_trace.cli import main; main()", "ingest", "openb",
         str(big), "--store", str(store_copy)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not any(p.name.startswith(".tx-") for p in store_copy.iterdir()):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "ingest never started staging"
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    out, errors = proc.communicate(timeout=120)
    assert proc.returncode == 130, (out, errors)
    assert errors.strip().splitlines()[-1] == "interrupted" and "Traceback" not in errors
    assert (store_copy / "current").readlink() == before
    assert not any(p.name.startswith(".tx-") for p in store_copy.iterdir())
    assert scan(store_copy, "jobs").select(pl.len()).collect().item() == 8152


@pytest.mark.parametrize("flag", ["--option", "-o"])
def test_boolean_policy_options_are_strict(openb_store: Path, flag: str) -> None:
    result = run("replay", "run", "-s", "openb", "--store", openb_store, flag, "blocking=maybe")
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "option blocking='maybe' is not a boolean" in result.stderr.strip().splitlines()[-1]


def test_boolean_spellings(store_copy: Path) -> None:
    from gpu_trace.values import parse_bool

    assert [parse_bool(v, "x") for v in ("true", "YES", "1", "False", "no", "0")] == [
        True, True, True, False, False, False,
    ]  # fmt: skip
    for bad in ("maybe", "on", "", "2"):
        with pytest.raises(Exception, match="is not a boolean"):
            parse_bool(bad, "x")
    result = run(
        "replay", "run", "-s", "openb", "--store", store_copy, "--gpus", "32x8",
        "--option", "blocking=no",
    )  # fmt: skip
    assert result.exit_code == 0, result.output


# -- 5. -h, -V, completion, -q / -v --------------------------------------------------


def _commands() -> list[list[str]]:
    from typer.main import get_command

    def walk(cmd, path):
        yield path
        for name, sub in getattr(cmd, "commands", {}).items():
            yield from walk(sub, [*path, name])

    return list(walk(get_command(app), []))


def test_short_help_and_version_everywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    import typer.testing
    from typer.main import get_command

    # typer's CliRunner rebuilds the click command tree (every signature) on each call;
    # handed the tree built once (for this test only), the ~90 help calls take a fraction.
    root = get_command(app)
    monkeypatch.setattr(typer.testing, "_get_command", lambda _app: root)

    def helped(*args: str):
        return runner.invoke(app, list(args), prog_name="gpu-trace")

    commands = _commands()
    assert len(commands) > 40
    for path in commands:
        short, long = helped(*path, "-h"), helped(*path, "--help")
        assert short.exit_code == 0, (path, short.output)
        assert short.output == long.output
        assert "Usage: gpu-trace" in short.output
        assert "…" not in short.output, (path, [x for x in short.output.splitlines() if "…" in x])
    assert run("-V").stdout == run("--version").stdout == f"gpu-trace {__version__}\n"


def test_shell_completion_is_generated_and_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    # With shellingham installed (a typer dependency), typer's ``--show-completion`` is a
    # flag: the shell is detected from the process's ancestors and ``bash`` is ignored.
    # Under ``make test -n 2`` (or any run whose parent shell has exited, or lies more
    # than 10 processes up) no shell is found and typer prints "Shell  not supported."
    # (exit 1). typer's own tests (docs_src/commands/index, tests/test_tutorial) set
    # this variable so that the option takes the shell as its value; then it is
    # honoured whatever the ancestry.
    monkeypatch.setenv("_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION", "1")
    script = run("--show-completion", "bash")
    assert script.exit_code == 0 and "_GPU_TRACE_COMPLETE" in script.stdout, script.output
    assert "complete -o default -F _gpu_trace_completion gpu-trace" in script.stdout
    zsh = run("--show-completion", "zsh")
    assert zsh.exit_code == 0 and "#compdef gpu-trace" in zsh.stdout, zsh.output
    env = {"_GPU_TRACE_COMPLETE": "complete_bash", "COMP_WORDS": "gpu-trace replay ru"}
    done = runner.invoke(app, [], prog_name="gpu-trace", env={**env, "COMP_CWORD": "2"})
    assert done.stdout.split() == ["run"], done.output


def test_quiet_silences_progress_not_errors(tmp_path: Path) -> None:
    loud = run("ingest", "openb", OPENB, "--store", tmp_path / "a")
    assert "read 10888 = written 10888 + quarantined 0" in loud.stderr
    quiet = run("-q", "ingest", "openb", OPENB, "--store", tmp_path / "b")
    assert quiet.exit_code == 0 and quiet.stderr == ""
    assert quiet.stdout == loud.stdout.replace(str(tmp_path / "a"), str(tmp_path / "b"))
    bad = run("-q", "sql", "select * from nope", "--store", tmp_path / "b")
    assert one_line_error(bad, 1).startswith("error: Catalog Error")
    assert run("-q", "-v", "schema").exit_code == 2


def test_verbose_names_the_error_type(openb_store: Path) -> None:
    plain = run("sql", "selec 1", "--store", openb_store)
    verbose = run("-v", "sql", "selec 1", "--store", openb_store)
    assert verbose.exit_code == plain.exit_code == 1
    lines = verbose.stderr.strip().splitlines()
    assert lines[0].startswith("QueryError: ") and lines[-1] == plain.stderr.strip()
    debug = run("-vv", "sql", "selec 1", "--store", openb_store)
    assert "Traceback (most recent call last)" in debug.stderr


# -- 6. SQL from stdin, a file, with parameters --------------------------------------


def test_sql_from_stdin_file_and_parameters(openb_store: Path, tmp_path: Path) -> None:
    # 8152 pods, of which 7064 request a GPU (tests/test_cli.py pins both)
    q = "select count(*) as n from jobs where gpus > $min_gpus::DOUBLE"
    dash = run("sql", "-", "-p", "min_gpus=0", "--store", openb_store, "-f", "csv", input=q)
    assert dash.exit_code == 0 and dash.stdout == "n\n7064\n"
    piped = run("sql", "--store", openb_store, "-f", "csv", "--param", "min_gpus=-1", input=q)
    assert piped.stdout == "n\n8152\n"
    file = tmp_path / "q.sql"
    file.write_text("select $a::INTEGER + $b::INTEGER as s;\n")
    out = run("sql", "--file", file, "-p", "a=40", "-p", "b=2", "--store", openb_store, "-f", "csv")
    assert out.stdout == "s\n42\n"
    # a parameter is bound, never spliced into the SQL
    quote = run("sql", "select $t as t", "-p", "t=x'; drop table y; --", "--store", openb_store,
                "-f", "csv")  # fmt: skip
    assert quote.stdout == "t\nx'; drop table y; --\n"


def test_sql_input_mistakes(openb_store: Path, tmp_path: Path) -> None:
    unused = run("sql", "select 1", "-p", "x=1", "--store", openb_store)
    assert "--param x is not used by the SQL" in one_line_error(unused, 2)
    assert "not NAME=VALUE" in one_line_error(
        run("sql", "select $x", "-p", "x", "--store", openb_store), 2
    )
    missing = run("sql", "select $x", "--store", openb_store)
    assert "x" in one_line_error(missing, 1)
    assert "no SQL on standard input" in one_line_error(
        run("sql", "-", "--store", openb_store, input=""), 2
    )
    file = tmp_path / "q.sql"
    file.write_text("select 1")
    assert "not both" in one_line_error(
        run("sql", "select 2", "--file", file, "--store", openb_store), 2
    )


def test_read_only_guard_applies_to_stdin_and_files(openb_store: Path, tmp_path: Path) -> None:
    target = tmp_path / "leak.csv"
    copy = f"copy (select 1) to '{target}'"
    assert "read-only" in one_line_error(run("sql", "-", "--store", openb_store, input=copy), 1)
    file = tmp_path / "q.sql"
    file.write_text(f"select 1; {copy}")
    assert "read-only" in one_line_error(run("sql", "--file", file, "--store", openb_store), 1)
    assert not target.exists()


# -- 7. one convention; old spellings still work -------------------------------------


def test_renamed_options_warn_and_still_work(openb_store: Path, tmp_path: Path) -> None:
    new = tmp_path / "new.csv"
    old = tmp_path / "old.csv"
    a = run("replay", "export", "-s", "openb", "--to", "chronus", "-o", new, "--store", openb_store)
    b = run("replay", "export", "-s", "openb", "-f", "chronus", "--output", old,
            "--store", openb_store)  # fmt: skip
    assert a.exit_code == b.exit_code == 0
    assert new.read_bytes() == old.read_bytes()
    assert "deprecated" not in a.stderr
    assert "warning: --format (a trace format) is deprecated: use --to" in b.stderr


def test_lists_take_commas_or_repeats(openb_store: Path) -> None:
    comma = run("analyze", "summary", "-s", "openb,openb", "--store", openb_store, "-f", "csv")
    repeat = run("analyze", "summary", "-s", "openb", "-s", "openb", "--store", openb_store,
                 "-f", "csv")  # fmt: skip
    assert comma.exit_code == 0 and comma.stdout == repeat.stdout


def test_one_duration_syntax(openb_store: Path) -> None:
    from gpu_trace.values import parse_duration

    assert [parse_duration(t, "x") for t in ("90s", "15m", "2h", "1d", "120", "500ms")] == [
        90.0, 900.0, 7200.0, 86400.0, 120.0, 0.5,
    ]  # fmt: skip
    for bad in ("5parsecs", "-1s", "1 week"):
        with pytest.raises(Exception, match="is not a duration"):
            parse_duration(bad, "x")
    line = one_line_error(run("analyze", "energy", "--max-gap", "soon", "--store", openb_store), 2)
    assert "--max-gap 'soon' is not a duration" in line


# -- 8. help and policy descriptions are whole ---------------------------------------


def test_policy_descriptions_are_whole_sentences() -> None:
    result = run("replay", "policies")
    assert result.exit_code == 0
    names = [line for line in result.stdout.splitlines() if line.startswith("  ") and
             not line.startswith("      ")]  # fmt: skip
    assert len(names) > 15
    for line in names:
        description = re.sub(r" \[[^]]*\]$", "", line.rstrip())  # drop "[reads estimates...]"
        assert description.endswith("."), line
    assert "with optional starvation promotion." in result.stdout
