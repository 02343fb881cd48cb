"""Where in the user's program each traced equation came from.

Staging records a :class:`SourceInfo` on every :class:`~fungrad.core.JaxprEqn`: the first
frame on the Python stack outside the fungrad package (the user's call that produced the
equation). Capture is cheap: a walk up ``sys._getframe`` with a prefix check on each frame's
file name, keeping only the code object and bytecode offset; line, file name and function are
worked out only when printed.

Transforms that interpret a jaxpr (``eval_jaxpr`` under jvp/vmap/staging, the transpose
loop) mark their own frame with :func:`set_equation_source`: while a rule for an equation runs,
an equation staged *below* that frame with no user frame in between inherits the source of the
equation being transformed, so a jvp, vmap or transpose equation points at its forward line.
User code called from inside such a rule (a custom_jvp rule, a scan body) is a user frame met
first, so its own lines win.
"""

from __future__ import annotations

import os
import sys
import threading

_PKG_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_CONTEXTLIB = os.path.abspath(sys.modules["contextlib"].__file__)
_INTERNAL = (_PKG_DIR, _CONTEXTLIB)


class SourceInfo(tuple):
    """A user source location ``(code, lasti)``: the code object and the bytecode offset of
    the call. ``file``, ``line`` and ``function`` are worked out only when asked for (a tuple
    subclass so that capturing one costs a single C-level allocation)."""

    __slots__ = ()

    @property
    def file(self) -> str:
        return self[0].co_filename

    @property
    def line(self) -> int | None:
        lasti = self[1]
        for start, end, line in self[0].co_lines():
            if start <= lasti < end:
                return line
        return self[0].co_firstlineno

    @property
    def function(self) -> str:
        code = self[0]
        return getattr(code, "co_qualname", code.co_name)

    def __str__(self):
        return f"{os.path.basename(self.file)}:{self.line} ({self.function})"

    def __repr__(self):
        return f"SourceInfo({self.file}:{self.line} ({self.function}))"


class _State(threading.local):
    frame = None  # the interpreter frame that set ``info``
    info: SourceInfo | None = None


_state = _State()


def current(depth: int = 2, _getframe=sys._getframe, _internal=_INTERNAL, _state=_state):
    """The source of an equation being staged now: the first user frame above the caller's
    caller (``depth``), or the marked equation's source when an interpreter frame that set one
    is met first."""
    try:
        f = _getframe(depth)
    except ValueError:  # the stack is shallower than ``depth``: no user frame to name
        return None
    mark = _state.frame
    while f is not None:
        if f is mark and _state.info is not None:
            return _state.info
        code = f.f_code
        if not code.co_filename.startswith(_internal):
            return SourceInfo((code, f.f_lasti))
        f = f.f_back
    return None


def set_equation_source(frame, info):
    """Mark ``frame`` (the interpreter's own) as transforming an equation whose source is
    ``info``; returns the previous ``(frame, info)`` for :func:`restore`."""
    prev = (_state.frame, _state.info)
    _state.frame = frame
    _state.info = info
    return prev


def restore(prev) -> None:
    _state.frame, _state.info = prev
