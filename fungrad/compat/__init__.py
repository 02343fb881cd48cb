"""Run JAX programs on fungrad: ``import jax`` (and every ``jax.*`` module) resolves to fungrad.

    python -m fungrad.compat script.py [args]   # like ``python script.py``, jax -> fungrad

    import fungrad.compat
    fungrad.compat.enable()                      # the same in this process
    import jax.numpy as jnp                      # fungrad.numpy, behind a thin module proxy
    fungrad.compat.disable()

A ``sys.meta_path`` finder maps the module ``jax.X.Y`` to ``fungrad.X.Y`` (fungrad names its
modules as JAX does), so a module added to fungrad is found with no change here. Each ``jax``
module is a proxy holding its fungrad module's names (see :class:`_JaxModule`; a fungrad name
rebound after ``import jax.X`` is not seen through it, so monkeypatch fungrad before enabling).
A name fungrad lacks is never replaced by a stand-in: ``jax.numpy.foo`` raises AttributeError
and ``import jax.sharding`` ModuleNotFoundError, both saying that fungrad does not provide it
(see docs/porting.md). ``jaxlib`` has no fungrad counterpart; importing it says so.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import types

__all__ = ["disable", "enable", "enabled", "fungrad_module_name"]

_HELP = "(running JAX code through fungrad.compat); see docs/porting.md"


#: Private JAX modules that libraries built on JAX import, and the fungrad module standing for
#: each (its own classes and functions under JAX's names: ``jax._src.core.ShapedArray``).
#: Other ``jax._src.X`` are ``fungrad.compat.jax_src.X`` where that exists (stand-ins written
#: for such libraries), else not provided.
PRIVATE_MODULES = {
    "jax._src.core": "fungrad.core",
    "jax._src.tree_util": "fungrad.tree_util",
}


def fungrad_module_name(jax_name: str) -> str:
    """The fungrad module that stands for the jax module ``jax_name``: ``jax.X.Y`` ->
    ``fungrad.X.Y``; ``jax._src.X`` -> :data:`PRIVATE_MODULES` or ``fungrad.compat.jax_src.X``."""
    if jax_name != "jax" and not jax_name.startswith("jax."):
        raise ValueError(f"fungrad_module_name: {jax_name!r} is not a jax module name")
    if jax_name == "jax._src" or jax_name.startswith("jax._src."):
        return PRIVATE_MODULES.get(jax_name) or "fungrad.compat.jax_src" + jax_name[8:]
    return "fungrad" + jax_name[len("jax") :]


def _jax_version() -> dict:
    """``__version__`` and ``__version_info__`` of the JAX whose API fungrad follows: libraries
    compare them to pick the JAX API they call, which must be the one fungrad provides."""
    from fungrad.version import jax_api_version

    info = tuple(int(p) for p in jax_api_version.split("."))
    return {"__version__": jax_api_version, "__version_info__": info, "_version": jax_api_version}


def _not_provided(jax_name: str) -> str:
    return f"{jax_name} is not provided by fungrad {_HELP}"


class _JaxModule(types.ModuleType):
    """The module ``jax.X`` seen by a JAX program, standing for fungrad module ``target``.

    It starts as a copy of ``target``'s names (so ``jnp.sum`` is a plain module lookup, as fast
    as ``fnp.sum``; forwarding every access cost ~0.9 us, 15% of an eager op). A name
    ``target`` gains later (a lazily imported submodule, say) is looked up on first use; a
    submodule is returned as its own proxy so its missing names are reported too; a name
    ``target`` lacks raises AttributeError saying so."""

    def __init__(self, name: str, target: types.ModuleType):
        super().__init__(name, target.__doc__)
        own = self.__dict__
        own["_fungrad_module"] = target
        if name in ("jax", "jax.version"):
            own.update(_jax_version())
        for attr, value in vars(target).items():
            if attr[:2] != "__" and not isinstance(value, types.ModuleType):
                own.setdefault(attr, value)
        # A module-level __getattr__ (PEP 562), not a method: a method would route every
        # lookup through Python's slot hook (~200 ns instead of ~30 ns for ``jnp.sum``).
        own["__getattr__"] = lambda attr: _lookup(self, attr)

    def __dir__(self):
        return sorted(set(dir(self.__dict__["_fungrad_module"])) | set(self.__dict__))

    def __repr__(self) -> str:
        return f"<module {self.__name__!r} (fungrad.compat: {self._fungrad_module.__name__})>"


def _lookup(proxy: _JaxModule, attr: str):
    """``proxy.attr`` for a name not (yet) copied into the proxy: from its fungrad module."""
    target = proxy.__dict__["_fungrad_module"]
    if attr[:2] == "__":
        try:
            return getattr(target, attr)
        except AttributeError:
            raise AttributeError(
                f"module {proxy.__name__!r} has no attribute {attr!r}", name=attr, obj=proxy
            ) from None
    child = f"{proxy.__name__}.{attr}"
    try:
        value = getattr(target, attr)
    except AttributeError:
        if _fungrad_submodule(fungrad_module_name(child)) is None:
            raise AttributeError(_not_provided(child), name=attr, obj=proxy) from None
        return importlib.import_module(child)
    if isinstance(value, types.ModuleType):
        if value.__name__ == fungrad_module_name(child):
            return importlib.import_module(child)
    else:
        proxy.__dict__[attr] = value
    return value


def _fungrad_submodule(fg_name: str):
    """The import spec of fungrad module ``fg_name``, or None where there is none (its parent
    is not a package, or has no such file)."""
    try:
        return importlib.util.find_spec(fg_name)
    except (ModuleNotFoundError, ValueError):
        return None


class _JaxLoader(importlib.abc.Loader):
    def __init__(self, target: types.ModuleType):
        self.target = target

    def create_module(self, spec):
        return _JaxModule(spec.name, self.target)

    def exec_module(self, module):
        pass  # the proxy reads everything from the fungrad module, which is already imported


class _JaxFinder(importlib.abc.MetaPathFinder):
    """Finds ``jax`` and ``jax.*`` as proxies of fungrad's modules; refuses ``jaxlib``."""

    def find_spec(self, fullname, path=None, target=None):
        root = fullname.partition(".")[0]
        if root == "jaxlib":
            raise ModuleNotFoundError(
                f"{fullname} is not provided by fungrad {_HELP}; fungrad compiles with llvmlite "
                "and wgpu and has no jaxlib",
                name=fullname,
            )
        if root != "jax":
            return None
        fg_name = fungrad_module_name(fullname)
        module = _resolve(fullname, fg_name)
        # Every proxy is a package (an empty __path__), so ``from jax.random import foo`` of a
        # missing ``foo`` asks this finder and gets its message rather than a generic one.
        return importlib.util.spec_from_loader(fullname, _JaxLoader(module), is_package=True)


def _resolve(jax_name: str, fg_name: str) -> types.ModuleType:
    """Import fungrad module ``fg_name`` for ``jax_name``, or raise ModuleNotFoundError."""
    parent_name, _, attr = fg_name.rpartition(".")
    if parent_name:
        parent = importlib.import_module(parent_name)
        value = parent.__dict__.get(attr)
        if value is not None and not isinstance(value, types.ModuleType):
            # e.g. ``import jax.config``: config is an object, in JAX as in fungrad.
            raise ModuleNotFoundError(
                f"{jax_name} is not a module (in JAX as in fungrad): {parent_name}.{attr} is a "
                f"{type(value).__name__} object; use it as an attribute, e.g. "
                f"`from {jax_name.rpartition('.')[0]} import {attr}` {_HELP}",
                name=fg_name,
            )
        if isinstance(value, types.ModuleType):
            return value
    if _fungrad_submodule(fg_name) is None:
        raise ModuleNotFoundError(_not_provided(jax_name), name=fg_name)
    return importlib.import_module(fg_name)


_FINDER = _JaxFinder()


def enabled() -> bool:
    """Whether ``import jax`` currently resolves to fungrad in this process."""
    return _FINDER in sys.meta_path


def enable() -> None:
    """Make ``import jax`` and ``import jax.*`` resolve to fungrad's modules in this process
    (idempotent). Call it before anything imports the real jax."""
    if enabled():
        return
    for name in ("jax", "jaxlib"):
        mod = sys.modules.get(name)
        if mod is not None and not isinstance(mod, _JaxModule):
            raise RuntimeError(
                f"fungrad.compat.enable: the real {name} is already imported (from "
                f"{getattr(mod, '__file__', '?')}); call enable() before anything imports jax"
            )
    sys.meta_path.insert(0, _FINDER)


def disable() -> None:
    """Undo :func:`enable`: forget the ``jax`` proxies (objects already bound keep working)."""
    while _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)
    for name, mod in list(sys.modules.items()):
        if isinstance(mod, _JaxModule):
            del sys.modules[name]
