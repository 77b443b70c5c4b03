"""Command groups that build a subcommand only when it is used (issue #25: start-up).

typer builds every click command before it parses anything, so without this ``gpu-trace
ingest helios FILE`` would import every loader, every analysis, replay and the report
(about 1 s of CPU before reading a byte). A :class:`LazyGroup` knows its subcommands'
names and, for listing them (``--help``, shell completion), their one-line help from a
generated table (:mod:`gpu_trace.command_index`, checked against the real commands by
``tests/test_command_index.py``); it imports a subcommand's module and builds the real
command only when that command is run, asked for its own help or completed.

``group.commands`` stays a mapping of every subcommand (iterating it builds them all),
so code that walks the tree (``docs/cli.md``, tests) sees the same commands as before.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, MutableMapping
from contextlib import contextmanager
from typing import Any

import typer
import typer.core
import typer.main

Command = Any
"""A click command built by typer (typer vendors click; typed loosely, as in ``docs``)."""


def convert(name: str, target: Any) -> Command:
    """The click command typer makes of ``target`` (a ``Typer`` app, added as a group, or
    a command function) registered as ``name``: the same conversion as when it is added
    to the root app, done through a throwaway parent.
    """
    holder = typer.Typer()
    if isinstance(target, typer.Typer):
        holder.add_typer(target, name=name)
    else:
        holder.command(name)(target)
    return typer.main.get_group(holder).commands[name]


def attribute(path: str) -> Any:
    """``module:attribute`` imported."""
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


def stub(name: str, help_text: str) -> Command:
    """A stand-in command for a listing: the name and first help paragraph are all a
    group's ``--help`` (rich or plain) and shell completion read of a subcommand.
    """
    return typer.core.TyperCommand(name, help=help_text)


class _Commands(MutableMapping[str, Command]):
    """Name -> command, built on first access (see :class:`LazyGroup`)."""

    def __init__(self, group: LazyGroup, given: MutableMapping[str, Command]) -> None:
        self._group = group
        self._built: dict[str, Command] = dict(given)

    def __getitem__(self, name: str) -> Command:
        if name not in self._built:
            if not self._group.known(name):
                raise KeyError(name)
            self._built[name] = self._group.build(name)
        return self._built[name]

    def __setitem__(self, name: str, command: Command) -> None:
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        del self._built[name]

    def __iter__(self) -> Iterator[str]:
        names = self._group.names()
        yield from names
        yield from (n for n in self._built if n not in names)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __contains__(self, name: object) -> bool:
        return name in self._built or (isinstance(name, str) and self._group.known(name))


class LazyGroup(typer.core.TyperGroup):
    """A typer group whose subcommands are named up front and built on demand.

    Subclasses say which names exist (:meth:`names`, in listing order), how to build
    one (:meth:`build`) and what a listing shows of one (:meth:`listed`). While the group
    prints its help or completes a subcommand name, :meth:`get_command` hands out
    :meth:`listed` stand-ins, so listing imports no subcommand's module.
    """

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.commands = _Commands(self, self.commands)
        self._listing = False

    def names(self) -> list[str]:
        """Every subcommand's name, in listing order."""
        raise NotImplementedError

    def build(self, name: str) -> Command:
        """The real command ``name`` (imports what it needs)."""
        raise NotImplementedError

    def known(self, name: str) -> bool:
        """Whether ``name`` is a subcommand (a subclass may answer without listing all)."""
        return name in self.names()

    def listed(self, name: str) -> Command:
        """What a listing shows of ``name``: by default the real command."""
        return self.commands[name]

    @contextmanager
    def _for_listing(self) -> Iterator[None]:
        self._listing, before = True, self._listing
        try:
            yield
        finally:
            self._listing = before

    def list_commands(self, ctx: Any) -> list[str]:
        """The names, without building any command."""
        return list(self.commands)

    def get_command(self, ctx: Any, cmd_name: str) -> Command | None:
        """The real command, or while listing its stand-in; None for an unknown name."""
        if cmd_name not in self.commands:
            return None
        if self._listing:
            return self.listed(cmd_name)
        return self.commands[cmd_name]

    def format_help(self, ctx: Any, formatter: Any) -> None:
        """The group's help; its command list from the stand-ins."""
        with self._for_listing():
            super().format_help(ctx, formatter)

    def shell_complete(self, ctx: Any, incomplete: str) -> list[Any]:
        """Completion of a subcommand name, from the stand-ins."""
        with self._for_listing():
            return super().shell_complete(ctx, incomplete)


def table_group(
    entries: Callable[[], dict[str, str]], helps: Callable[[], dict[str, str]]
) -> type[LazyGroup]:
    """A :class:`LazyGroup` over a fixed table: name -> ``module:attribute`` (a ``Typer``
    app or a command function), listed with the one-line help in ``helps()`` (a name
    missing there is built to be listed).
    """

    class TableGroup(LazyGroup):
        def names(self) -> list[str]:
            return list(entries())

        def build(self, name: str) -> Command:
            return convert(name, attribute(entries()[name]))

        def listed(self, name: str) -> Command:
            text = helps().get(name)
            return self.commands[name] if text is None else stub(name, text)

    return TableGroup
