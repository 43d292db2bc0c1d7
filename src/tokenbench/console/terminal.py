"""The consoles the commands print to: as wide as the terminal, and wide when piped.

Rich sizes a console to the terminal, and to 80 columns when no stream is a terminal (output piped
to a file, `| tee`, CI): tables were cut to 80 columns ("throu…"). A console that is not a terminal
here renders at ``PIPED_WIDTH`` columns unless COLUMNS says otherwise, so a piped summary keeps
every figure whole.
"""

from __future__ import annotations

import os

from rich.console import Console, ConsoleDimensions

PIPED_WIDTH = 200


class WideWhenPiped(Console):
    """A Rich console that renders ``PIPED_WIDTH`` columns wide when its stream is not a terminal
    (and COLUMNS is not set); at a terminal, the terminal's width as before."""

    @property
    def size(self) -> ConsoleDimensions:
        size = super().size
        if self._width is None and not self.is_terminal and "COLUMNS" not in os.environ:
            return ConsoleDimensions(max(size.width, PIPED_WIDTH), size.height)
        return size

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        Console.size.fset(self, new_size)  # type: ignore[attr-defined]


def console(stderr: bool = False, soft_wrap: bool = False) -> Console:
    """A console for a command's output (stderr: the error/summary console)."""
    return WideWhenPiped(stderr=stderr, soft_wrap=soft_wrap)
