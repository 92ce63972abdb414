"""Memory scopes: open-ended strings (``"global"``, ``"local"``, later ``"local.inp_buffer"``)
described by a ``ScopeInfo`` that a backend registers in its own ``ScopeTable``."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ScopeInfo:
    """``name``: the scope string; ``max_bytes``: capacity (None: unbounded);
    ``alignment_bytes``: allocation alignment; ``on_stack``: the CPU backend keeps it in the
    function frame (registers after promotion) instead of the heap."""

    name: str
    max_bytes: int | None = None
    alignment_bytes: int = 64
    on_stack: bool = False


SHARED_ACROSS = {"global": ("blockIdx.", "threadIdx."), "shared": ("threadIdx.", "vthread")}
"""For each memory scope, the GPU launch indices (and ``vthread`` loops) whose blocks / threads
share one copy of a buffer in it (a ``shared`` tile is one per block, fetched by all its
threads, real and virtual). Bound inference relaxes the loops bound to these: the buffer holds
what all of them read. Scopes not listed (``local``: registers) are private to a thread."""


def shared_across(scope: str, tag: str) -> bool:
    """Whether one buffer in ``scope`` is shared across the loops bound to ``tag`` (a launch
    index or ``"vthread"``)."""
    return tag.startswith(SHARED_ACROSS.get(scope, ()))


class ScopeTable:
    """The scopes one backend understands. Not global: each target owns one."""

    def __init__(self, scopes=()):
        self._scopes: dict[str, ScopeInfo] = {}
        for s in scopes:
            self.register(s)

    def register(self, info: ScopeInfo) -> None:
        if info.name in self._scopes and self._scopes[info.name] != info:
            raise ValueError(f"scope {info.name!r} is already registered differently")
        self._scopes[info.name] = info

    def __contains__(self, name: str) -> bool:
        return name in self._scopes

    def get(self, name: str) -> ScopeInfo:
        if name not in self._scopes:
            raise ValueError(
                f"memory scope {name!r} is not supported by this backend "
                f"(allowed: {', '.join(sorted(self._scopes))})"
            )
        return self._scopes[name]

    def names(self) -> list[str]:
        return sorted(self._scopes)
