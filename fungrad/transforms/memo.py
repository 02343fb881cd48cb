"""Values made once: :class:`Once` (one value, whichever threads ask for it) and
:class:`JaxprMemo` (values derived from a ClosedJaxpr, per jaxpr object, in a bounded LRU).

``jit`` keeps its traced signatures' executables in ``Once`` cells and memoises the jaxprs its
call primitive's rules derive (jvp, partial evaluation, transpose, batching) in ``JaxprMemo``s.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from fungrad import core

__all__ = ["JaxprMemo", "Once"]


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
