"""Generated commands: an option declared with ``parse=`` takes text and holds the parsed
value, keeps the dataclass default when left out, and turns a bad value into a one-line
usage error (exit 2), like the hand-written commands' ``values.parse_duration`` checks."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from functools import partial
from typing import Any

import typer
from typer.testing import CliRunner

from gpu_trace.cli.generated import add_command
from gpu_trace.plugins import option, option_specs
from gpu_trace.values import parse_duration, split_list


@dataclass(frozen=True)
class _Options:
    timeout: float = option(
        30.0, "Give up after this long.", parse=partial(parse_duration, what="--timeout")
    )
    names: tuple[str, ...] = option(
        ("a",), "Comma list.", parse=lambda text: tuple(split_list(text)), metavar="A,B"
    )
    plain: int = option(3, "An ordinary option.")


def _app(seen: list[Any]) -> typer.Typer:
    app = typer.Typer()
    path = inspect.Parameter("path", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=str)
    add_command(app, "toy", "A toy.", [path], _Options, lambda fixed, opts: seen.append(opts))

    @app.command("other")
    def other() -> None:  # a second command, so typer keeps "toy" as a subcommand
        """Nothing."""

    return app


def test_parse_option_holds_the_parsed_value() -> None:
    seen: list[Any] = []
    r = CliRunner().invoke(_app(seen), ["toy", "p", "--timeout", "2m", "--names", "x,y"])
    assert r.exit_code == 0, r.output
    # 2m is 2 x 60 s; "x,y" split on the comma.
    assert seen == [_Options(timeout=120.0, names=("x", "y"), plain=3)]


def test_parse_option_left_out_keeps_the_default() -> None:
    seen: list[Any] = []
    r = CliRunner().invoke(_app(seen), ["toy", "p"])
    assert r.exit_code == 0, r.output
    assert seen == [_Options()]
    assert seen[0].timeout == 30.0 and seen[0].names == ("a",)


def test_parse_option_bad_value_is_a_usage_error() -> None:
    seen: list[Any] = []
    r = CliRunner().invoke(_app(seen), ["toy", "p", "--timeout", "soon"])
    assert r.exit_code == 2
    assert "--timeout" in r.output and "Traceback" not in r.output
    assert seen == []


def test_parse_option_help_shows_metavar_and_default() -> None:
    r = CliRunner().invoke(_app([]), ["toy", "--help"], terminal_width=120)
    assert r.exit_code == 0
    assert "A,B" in r.output
    assert "30.0" in r.output
    specs = {s.name: s for s in option_specs(_Options)}
    assert specs["plain"].parse is None and specs["timeout"].parse is not None
