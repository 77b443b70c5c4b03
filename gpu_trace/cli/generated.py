"""Typer commands generated from plugin declarations (:mod:`gpu_trace.plugins`).

A plugin's options dataclass becomes the command's options: each field's flag, type,
default and help text, a choice check for fields that declare ``choices`` (the same
one-line "is not one of" usage error the hand-written commands give), a range check for
fields that declare ``check`` (``--load 0``: one ``error:`` line, exit 2), and for fields that
declare ``parse`` a text option whose value ``parse`` turns into the field's (a bad one is
the one-line ``error:`` of every hand-checked option, exit 2), and for fields that declare
``deprecated`` a hidden option with the old spelling (it still works, with a one-line
warning). The command's own fixed
parameters (``PATH`` or ``PATHS...`` from :func:`path_parameter`, ``--store``,
``--format`` ...) come first, as given. A command may also take only some fields of a
larger dataclass (``only``: the replay commands and :class:`~gpu_trace.replay.config.
ReplayConfig`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from gpu_trace.cli._boundary import domain_errors, escape, fail, warn
from gpu_trace.errors import UsageError
from gpu_trace.plugins import OptionSpec, option_specs

_OLD = "__deprecated"
"""Suffix of the hidden parameter that takes a field's deprecated spelling."""


def _choice_check(choices: tuple[str, ...]) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if value is not None and value not in choices:
            msg = f"{value!r} is not one of {', '.join(choices)}"
            raise typer.BadParameter(msg)
        return value

    return check


def _value_check(check: Callable[[Any], Any]) -> Callable[[typer.Context, Any], Any]:
    """A typer callback running a declaration's ``check`` on a given value (not during
    shell completion); its ``UsageError`` is the one-line ``error:`` and exit 2.
    """

    def callback(ctx: typer.Context, value: Any) -> Any:
        if value is None or ctx.resilient_parsing:
            return value
        try:
            check(value)
        except UsageError as exc:
            raise fail(escape(str(exc)), 2) from None
        return value

    return callback


def _callback(spec: OptionSpec) -> Callable[..., Any] | None:
    """The typer callback of a typed option: its choices or its ``check``."""
    if spec.choices:
        return _choice_check(spec.choices)
    if spec.check is not None:
        return _value_check(spec.check)
    return None


def _parsed(spec: OptionSpec, value: str | list[str]) -> Any:
    """The value of a ``parse`` option given on the command line: a repeated flag's texts
    joined with commas, then ``spec.parse``. A ``UsageError`` stays as it is (it is
    written for users: ``--interval 'soon' is not a duration ...``), a ``ValueError``
    becomes one naming the flag and the text; the command's boundary turns either into
    one ``error:`` line and exit 2.

    Parsed here, in the command, rather than in a typer callback: typer converts a
    callback's result to the parameter's declared type (a list for a repeatable flag),
    which would take a parsed string apart character by character.
    """
    assert spec.parse is not None
    text = ",".join(value) if isinstance(value, list) else value
    try:
        return spec.parse(text)
    except UsageError:
        raise
    except ValueError as e:
        msg = f"{spec.flag} {text!r}: {e}"
        raise UsageError(msg) from None


def path_parameter(help_text: str, *, many: bool = False) -> inspect.Parameter:
    """The positional input of a generated command: ``PATH``, or with ``many`` one or
    more ``PATHS...`` (a list; a command body reads ``paths[0]`` and ``paths[1:]``).
    """
    if many:
        return inspect.Parameter(
            "paths",
            inspect.Parameter.KEYWORD_ONLY,
            annotation=Annotated[list[Path], typer.Argument(help=help_text)],
        )
    return inspect.Parameter(
        "path",
        inspect.Parameter.KEYWORD_ONLY,
        annotation=Annotated[Path, typer.Argument(help=help_text)],
    )


def _specs(options: type[Any], only: Sequence[str] | None) -> list[OptionSpec]:
    """The option specs of ``options``: every field, or the fields named in ``only``
    (in that order: a command that takes a few of a config's fields).
    """
    specs = option_specs(options)
    if only is None:
        return specs
    by_name = {s.name: s for s in specs}
    return [by_name[name] for name in only]


def option_parameters(
    options: type[Any], only: Sequence[str] | None = None
) -> list[inspect.Parameter]:
    """One keyword parameter per field of ``options`` (or per field named in ``only``),
    annotated for typer.
    """
    params = []
    for spec in _specs(options, only):
        # Typer derives --name (and --name/--no-name for a bool) from the parameter;
        # only a flag that differs from that, or one the declaration names, is passed on.
        derived = "--" + spec.name.replace("_", "-")
        flags = () if spec.flag == derived and not spec.flag_given else (spec.flag,)
        if spec.parse is not None:
            # Typed as text (a list of texts when the flag repeats), parsed by the
            # command (_parsed); None means "not given", so the dataclass default holds.
            # The default is shown as typed.
            info = typer.Option(
                *flags,
                help=spec.help,
                metavar=spec.metavar,
                show_default=spec.default_text or False,
            )
            text: Any = list[str] if spec.repeat else str
            annotation: Any = Annotated[text | None, info]
            default = None
        else:
            info = typer.Option(
                *flags,
                help=spec.help,
                callback=_callback(spec),
            )
            annotation, default = Annotated[spec.type, info], spec.default
        params.append(
            inspect.Parameter(
                spec.name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation
            )
        )
        if spec.deprecated is not None:
            old = typer.Option(spec.deprecated, hidden=True)
            kind: Any = (list[str] if spec.repeat else str) if spec.parse is not None else spec.type
            params.append(
                inspect.Parameter(
                    spec.name + _OLD,
                    inspect.Parameter.KEYWORD_ONLY,
                    default=None,
                    annotation=Annotated[kind | None, old],
                )
            )
    return params


def option_values(
    options: type[Any], values: dict[str, Any], only: Sequence[str] | None = None
) -> dict[str, Any]:
    """The fields of ``options`` (or those named in ``only``) from a command's
    parameters, as :func:`option_parameters` declared them: a ``parse`` option left out
    is missing, so the dataclass default holds.
    """
    return _chosen(_specs(options, only), values)


def _chosen(specs: list[OptionSpec], values: dict[str, Any]) -> dict[str, Any]:
    """The options' values from the command-line parameters: a ``parse`` option is
    parsed (:func:`_parsed`) and, left out, keeps the dataclass default; a deprecated
    spelling, when used, wins with a one-line warning.
    """
    chosen = {}
    for s in specs:
        value = values[s.name]
        old = values.get(s.name + _OLD)
        if s.deprecated is not None and old is not None and old != []:
            arg = f" {s.metavar}" if s.metavar else ""
            warn(f"{s.deprecated}{arg} is deprecated: use {s.flag}{arg}")
            value = old
        if s.parse is None:
            chosen[s.name] = value
        elif value is not None and value != []:
            chosen[s.name] = _parsed(s, value)
    return chosen


def add_command(
    app: typer.Typer,
    name: str,
    help_text: str,
    fixed: list[inspect.Parameter],
    options: type[Any],
    body: Callable[[dict[str, Any], Any], None],
    after: Sequence[inspect.Parameter] = (),
) -> None:
    """Register ``name`` on ``app``: ``fixed`` parameters, then the options' fields, then
    ``after`` (output options); ``body(fixed_and_after_values, options_instance)`` runs
    it. Errors go through the same ``domain_errors`` boundary as every other command.
    """
    fixed_names = [p.name for p in [*fixed, *after]]
    specs = option_specs(options)

    def command(**values: Any) -> None:
        given = {k: values[k] for k in fixed_names}
        body(given, options(**_chosen(specs, values)))

    wrapped = domain_errors(command)
    params = [
        *(p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in fixed),
        *option_parameters(options),
        *(p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in after),
    ]
    wrapped.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    wrapped.__annotations__ = {}
    wrapped.__doc__ = help_text
    wrapped.__name__ = name.replace("-", "_")
    app.command(name)(wrapped)


def command_names(app: typer.Typer) -> set[str]:
    """The names already registered on ``app`` (hand-written commands win over generated)."""
    out = set()
    for info in app.registered_commands:
        out.add(info.name or (info.callback.__name__.replace("_", "-") if info.callback else ""))
    return out
