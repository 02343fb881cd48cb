"""Values made once: :class:`Once` (one value, whichever threads ask for it) and
:class:`JaxprMemo` (values derived from a ClosedJaxpr, per jaxpr object, in a bounded LRU).

``jit`` keeps its traced signatures' executables in ``Once`` cells and memoises the jaxprs its
call primitive's rules derive (jvp, partial evaluation, transpose, batching) in ``JaxprMemo``s.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict

from fungrad import core

__all__ = ["CacheDict", "JaxprMemo", "Once", "clear_caches", "register_cache"]

#: every object holding traces or executables (``jit``'s functions, the JaxprMemos): each has
#: a ``clear_cache()`` method; :func:`clear_caches` empties them all
_caches: weakref.WeakValueDictionary = weakref.WeakValueDictionary()  # id -> object


def register_cache(obj) -> None:
    """Let :func:`clear_caches` empty ``obj`` (a ``clear_cache()`` method; kept weakly)."""
    _caches[id(obj)] = obj


class CacheDict(dict):
    """A dict that :func:`clear_caches` empties (a module's own staging cache)."""

    def __init__(self):
        super().__init__()
        register_cache(self)

    def clear_cache(self) -> None:
        self.clear()


def clear_caches() -> None:
    """Empty every trace and compilation cache of this process (``jax.clear_caches``): each
    ``jit``'s traces and executables and the jaxprs its rules derived. The next call traces
    and compiles again (the on-disk object cache, if on, still serves the compile). Jitted
    functions stay valid; only their memory of earlier calls goes."""
    for obj in list(_caches.values()):
        obj.clear_cache()


class Once:
    """A value made at most once, even when several threads ask for it at the same time: the
    first caller makes it while the others wait on the lock. A failure is not kept (the next
    caller tries again), so errors are never cached."""

    __slots__ = ("lock", "done", "value")

    def __init__(self):
        self.lock = threading.RLock()
        self.done = False
        self.value = None

    def get(self, make):
        if self.done:
            return self.value
        with self.lock:
            if not self.done:
                self.value = make()
                self.done = True
        return self.value


class JaxprMemo:
    """Values derived from a ClosedJaxpr (its jvp, batched, partially evaluated or transposed
    jaxpr; its executable), memoised per jaxpr *object* and made once each.

    NB: ClosedJaxpr has no ``__weakref__`` slot, so this is keyed by ``id(jaxpr)`` with the
    jaxpr kept alive by its entry (so the id cannot be reused), in an LRU bounded to
    ``maxsize`` entries (JAX bounds the same memos, with weak keys).
    """

    def __init__(self, maxsize: int):
        self.maxsize = maxsize
        self._lock = threading.Lock()
        self._entries: OrderedDict = OrderedDict()
        register_cache(self)

    def get(self, jaxpr: core.ClosedJaxpr, extra, make):
        key = (id(jaxpr), extra)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                entry = self._entries[key] = (jaxpr, Once())
                if len(self._entries) > self.maxsize:
                    self._entries.popitem(last=False)
            else:
                self._entries.move_to_end(key)
        return entry[1].get(make)

    def clear(self):
        with self._lock:
            self._entries.clear()

    clear_cache = clear
