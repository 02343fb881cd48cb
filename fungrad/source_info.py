"""Where in the user's program each traced equation came from.

Staging records a :class:`SourceInfo` on every :class:`~fungrad.core.JaxprEqn`: the first
frame on the Python stack outside the fungrad package (the user's call that produced the
equation). Capture is cheap: a walk up ``sys._getframe`` that looks each frame's file name up
in a table of the files already classified (a dict hit, no string comparison), keeping only
the code object and bytecode offset; line, file name and function are worked out only when
printed.

Transforms that interpret a jaxpr (``eval_jaxpr`` under jvp/vmap/staging, the transpose
loop) mark their own frame with :func:`set_equation_source`: while a rule for an equation runs,
an equation staged *below* that frame with no user frame in between inherits the source of the
equation being transformed, so a jvp, vmap or transpose equation points at its forward line.
User code called from inside such a rule (a custom_jvp rule, a scan body) is a user frame met
first, so its own lines win.

Equations made while differentiating a primitive also record *which* forward primitive they
differentiate (:attr:`SourceInfo.forward`): jvp (and the eager tape) bracket a jvp rule with
:func:`begin_forward` / :func:`end_forward`, the equations it stages carry that primitive, and
the transpose of a linear equation inherits it through the mark above. debug_nans uses it to
name the forward equation of a NaN born in a derivative.
"""

from __future__ import annotations

import os
import sys
import threading

_PKG_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_CONTEXTLIB = os.path.abspath(sys.modules["contextlib"].__file__)
_INTERNAL = (_PKG_DIR, _CONTEXTLIB)
_internal_files: dict[str, bool] = {}  # co_filename -> inside fungrad (or contextlib)?


def _is_internal(filename: str) -> bool:
    """Whether frames of ``filename`` are fungrad's own (classified once per file)."""
    internal = _internal_files[filename] = filename.startswith(_INTERNAL)
    return internal


def register_exclusion(path: str) -> None:
    """Treat frames of files under ``path`` as internal, as fungrad's own: an equation's source
    is then the first frame outside them (``jax.extend.source_info_util.register_exclusion``:
    a library built on fungrad names its user's line, not its own)."""
    global _INTERNAL
    if path not in _INTERNAL:
        _INTERNAL = (*_INTERNAL, path)
        _internal_files.clear()  # (files classified before are classified again)


class SourceInfo(tuple):
    """A user source location ``(code, lasti)``: the code object and the bytecode offset of
    the call, then, for an equation made while differentiating a primitive, that forward
    primitive ``(code, lasti, primitive)``. ``file``, ``line`` and ``function`` are worked out
    only when asked for (a tuple subclass so that capturing one costs a single C-level
    allocation)."""

    __slots__ = ()

    @property
    def forward(self):
        """The forward primitive this equation differentiates (its jvp, its transpose), or
        None for an equation of the forward computation."""
        return self[2] if len(self) > 2 else None

    def with_forward(self, primitive) -> SourceInfo:
        """This location, marked as made while differentiating ``primitive``."""
        return SourceInfo((self[0], self[1], primitive))

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
    fwd = None  # the primitive whose jvp rule runs now (see begin_forward)


_state = _State()


def current(depth: int = 2, _getframe=sys._getframe, _state=_state, _files=_internal_files):
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
            info = _state.info
            fwd = _state.fwd
            return info if fwd is None or len(info) > 2 else SourceInfo((info[0], info[1], fwd))
        code = f.f_code
        internal = _files.get(code.co_filename)
        if internal is None:
            internal = _is_internal(code.co_filename)
        if not internal:
            fwd = _state.fwd
            if fwd is None:
                return SourceInfo((code, f.f_lasti))
            return SourceInfo((code, f.f_lasti, fwd))
        f = f.f_back
    return None


def set_equation_source(frame, info):
    """Mark ``frame`` (the interpreter's own) as transforming an equation whose source is
    ``info``; returns the previous ``(frame, info, forward)`` for :func:`restore`. The
    equations interpreted below it name their own forward primitive (``info`` carries it), so
    the one of an enclosing jvp rule is set aside until then."""
    prev = (_state.frame, _state.info, _state.fwd)
    _state.frame = frame
    _state.info = info
    _state.fwd = None
    return prev


def restore(prev) -> None:
    _state.frame, _state.info, _state.fwd = prev


def begin_forward(primitive):
    """Equations staged from now until :func:`end_forward` are made while differentiating
    ``primitive`` (its jvp rule runs). An enclosing one wins: the rule of a higher-order
    derivative differentiates the first-order equations, which already differentiate the
    user's primitive. Returns the token for :func:`end_forward`."""
    prev = _state.fwd
    if prev is None:
        _state.fwd = primitive
    return prev


def end_forward(prev) -> None:
    _state.fwd = prev
