"""Typer commands generated from plugin declarations (:mod:`gpu_trace.plugins`).

A plugin's options dataclass becomes the command's options: each field's flag, type,
default and help text, a choice check for fields that declare ``choices`` (the same
one-line "is not one of" usage error the hand-written commands give), and for fields that
declare ``parse`` a text option whose value ``parse`` turns into the field's, and for fields
that declare ``deprecated`` a hidden option with the old spelling (it still works, with a
one-line warning). The command's own fixed parameters (``PATH``, ``--store``, ``--format``
...) come first, as given.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Annotated, Any

import typer

from gpu_trace.cli._boundary import domain_errors, warn
from gpu_trace.errors import UsageError
from gpu_trace.plugins import OptionSpec, option_specs

_OLD = "__deprecated"
"""Suffix of the hidden parameter that takes a field's deprecated spelling."""


def _choice_check(choices: tuple[str, ...]) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if value is not None and value not in choices:
            raise typer.BadParameter(f"{value!r} is not one of {', '.join(choices)}")
        return value

    return check


def _parse_check(parse: Callable[[str], Any]) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if value is None:
            return None
        try:
            return parse(value)
        except (ValueError, UsageError) as e:
            raise typer.BadParameter(str(e)) from None

    return check


def option_parameters(options: type[Any]) -> list[inspect.Parameter]:
    """One keyword parameter per field of ``options``, annotated for typer."""
    params = []
    for spec in option_specs(options):
        # Typer derives --name (and --name/--no-name for a bool) from the parameter;
        # only a flag that differs from that, or one the declaration names, is passed on.
        derived = "--" + spec.name.replace("_", "-")
        flags = () if spec.flag == derived and not spec.flag_given else (spec.flag,)
        if spec.parse is not None:
            # Typed as text; None means "not given", so the dataclass default holds.
            info = typer.Option(
                *flags,
                help=spec.help,
                callback=_parse_check(spec.parse),
                metavar=spec.metavar or "TEXT",
                show_default=False if spec.default is None else str(spec.default),
            )
            annotation: Any = Annotated[str | None, info]
            default = None
        else:
            info = typer.Option(
                *flags,
                help=spec.help,
                callback=_choice_check(spec.choices) if spec.choices else None,
            )
            annotation, default = Annotated[spec.type, info], spec.default
        params.append(
            inspect.Parameter(
                spec.name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation
            )
        )
        if spec.deprecated is not None:
            parse = _parse_check(spec.parse) if spec.parse is not None else None
            old = typer.Option(spec.deprecated, hidden=True, callback=parse)
            kind = str if spec.parse is not None else spec.type
            params.append(
                inspect.Parameter(
                    spec.name + _OLD,
                    inspect.Parameter.KEYWORD_ONLY,
                    default=None,
                    annotation=Annotated[kind | None, old],
                )
            )
    return params


def _chosen(specs: list[OptionSpec], values: dict[str, Any]) -> dict[str, Any]:
    """The options' values from the parsed parameters: a ``parse`` option left out keeps
    the dataclass default; a deprecated spelling, when used, wins with a warning."""
    chosen = {}
    for s in specs:
        value = values[s.name]
        old = values.get(s.name + _OLD)
        if s.deprecated is not None and old is not None and old != []:
            arg = f" {s.metavar}" if s.metavar else ""
            warn(f"{s.deprecated}{arg} is deprecated: use {s.flag}{arg}")
            value = old
        if not (s.parse is not None and value is None):
            chosen[s.name] = value
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
    it. Errors go through the same ``domain_errors`` boundary as every other command."""
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
