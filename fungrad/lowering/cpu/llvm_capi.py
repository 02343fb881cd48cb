"""The few LLVM functions fungrad calls, bound straight from llvmlite's shared library.

fungrad compiles through llvmlite's ``libllvmlite`` (LLVM plus a C interface, the ``LLVMPY_*``
functions), but not through its Python package: ``import llvmlite.binding`` loads ~50 Python
modules and declares ~400 ctypes prototypes, ~65 ms of every process's first jit call on this
machine (the library itself loads in ~11 ms). This module declares only the ~50 functions fungrad
uses, when first needed, with the same argument types llvmlite declares for them.

Those prototypes are llvmlite's internal interface, so the supported llvmlite versions are
pinned (pyproject.toml) and :func:`lib` checks the installed version against them before
anything is called: an untested llvmlite raises an ImportError that says which to install,
rather than calling functions whose signatures may have changed.

Every function here must be called under ``cpu.llvm_lock`` (LLVM's global state is not thread
safe), except on a module in a private context (:func:`create_context`) with a target machine
no other thread uses: parsing, verifying, optimising and emitting it (``compiler`` compiles a
program's modules so, one thread each); errors LLVM reports come back as ``RuntimeError``
with its message. Handles (modules, target machines, engines, contexts) are plain
``ctypes.c_void_p`` values; their owners free them (``dispose_module``, ``dispose_engine``: an
engine owns the module and target machine it was made from; ``dispose_context``).
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import sys
from ctypes import POINTER, c_bool, c_char_p, c_int, c_size_t, c_uint, c_uint64, c_void_p

__all__ = [
    "SUPPORTED",
    "add_symbol",
    "address_of_symbol",
    "create_context",
    "create_engine",
    "create_target_machine",
    "data_layout",
    "dispose_context",
    "dispose_engine",
    "dispose_module",
    "emit",
    "engine_add_object",
    "finalize_engine",
    "function_address",
    "host_cpu_features",
    "host_cpu_name",
    "lib",
    "llvm_version",
    "llvmlite_version",
    "module_functions",
    "module_text",
    "optimize",
    "parse_module",
    "process_triple",
    "set_module_target",
    "set_option",
    "verify_module",
]

#: llvmlite versions whose C interface matches the prototypes below (major, minor)
SUPPORTED = ((0, 50),)

#: LLVMLinkage values (llvm-c/Core.h) of functions local to their module
LINKAGE_INTERNAL, LINKAGE_PRIVATE = 8, 9

_p = c_void_p
_PROTOTYPES = {  # name: (restype, argtypes), as llvmlite 0.50 declares them
    "LLVMPY_GetVersionInfo": (c_uint, []),
    "LLVMPY_DisposeString": (None, [c_void_p]),
    "LLVMPY_InitializeNativeTarget": (c_int, []),
    "LLVMPY_InitializeNativeAsmPrinter": (c_int, []),
    "LLVMPY_GetProcessTriple": (None, [POINTER(c_void_p)]),
    "LLVMPY_GetHostCPUName": (None, [POINTER(c_void_p)]),
    "LLVMPY_GetHostCPUFeatures": (c_int, [POINTER(c_void_p)]),
    "LLVMPY_GetTargetFromTriple": (_p, [c_char_p, POINTER(c_void_p)]),
    "LLVMPY_CreateTargetMachine": (
        _p,
        [_p, c_char_p, c_char_p, c_char_p, c_int, c_char_p, c_char_p, c_int, c_int, c_char_p],
    ),
    "LLVMPY_DisposeTargetMachine": (None, [_p]),
    "LLVMPY_CreateTargetMachineData": (_p, [_p]),
    "LLVMPY_CopyStringRepOfTargetData": (None, [_p, POINTER(c_void_p)]),
    "LLVMPY_DisposeTargetData": (None, [_p]),
    "LLVMPY_TargetMachineEmitToMemory": (_p, [_p, _p, c_int, POINTER(c_void_p)]),
    "LLVMPY_GetBufferStart": (c_void_p, [_p]),
    "LLVMPY_GetBufferSize": (c_size_t, [_p]),
    "LLVMPY_DisposeMemoryBuffer": (None, [_p]),
    "LLVMPY_GetGlobalContext": (_p, []),
    "LLVMPY_ContextCreate": (_p, []),
    "LLVMPY_ContextDispose": (None, [_p]),
    "LLVMPY_ParseAssembly": (_p, [_p, c_char_p, POINTER(c_void_p)]),
    "LLVMPY_DisposeModule": (None, [_p]),
    "LLVMPY_VerifyModule": (c_bool, [_p, POINTER(c_void_p)]),
    "LLVMPY_SetModuleName": (None, [_p, c_char_p]),
    "LLVMPY_SetTarget": (None, [_p, c_char_p]),
    "LLVMPY_SetDataLayout": (None, [_p, c_char_p]),
    "LLVMPY_PrintModuleToString": (None, [_p, POINTER(c_void_p)]),
    "LLVMPY_ModuleFunctionsIter": (_p, [_p]),
    "LLVMPY_FunctionsIterNext": (_p, [_p]),
    "LLVMPY_DisposeFunctionsIter": (None, [_p]),
    "LLVMPY_GetValueName": (c_char_p, [_p]),
    "LLVMPY_IsDeclaration": (c_int, [_p]),
    "LLVMPY_GetLinkage": (c_int, [_p]),
    "LLVMPY_CreatePipelineTuningOptions": (_p, []),
    "LLVMPY_PTOSetLoopVectorization": (None, [_p, c_bool]),
    "LLVMPY_PTOSetSLPVectorization": (None, [_p, c_bool]),
    "LLVMPY_DisposePipelineTuningOptions": (None, [_p]),
    "LLVMPY_CreatePassBuilder": (_p, [_p, _p]),
    "LLVMPY_DisposePassBuilder": (None, [_p]),
    "LLVMPY_buildPerModuleDefaultPipeline": (_p, [_p, c_int]),
    "LLVMPY_CreateNewModulePassManager": (_p, []),
    "LLVMPY_module_AddAlwaysInlinerPass": (None, [_p]),
    "LLVMPY_RunNewModulePassManager": (None, [_p, _p, _p]),
    "LLVMPY_DisposeNewModulePassManger": (None, [_p]),  # (sic)
    "LLVMPY_CreateMCJITCompiler": (_p, [_p, _p, c_bool, POINTER(c_void_p)]),
    "LLVMPY_DisposeExecutionEngine": (None, [_p]),
    "LLVMPY_CreateObjectFile": (_p, [c_char_p, c_size_t]),
    "LLVMPY_DisposeObjectFile": (None, [_p]),
    "LLVMPY_MCJITAddObjectFile": (None, [_p, _p]),
    "LLVMPY_FinalizeObject": (None, [_p]),
    "LLVMPY_GetFunctionAddress": (c_uint64, [_p, c_char_p]),
    "LLVMPY_AddSymbol": (None, [c_char_p, c_void_p]),
    "LLVMPY_SearchAddressOfSymbol": (c_void_p, [c_char_p]),
    "LLVMPY_SetCommandLine": (None, [c_char_p, c_char_p]),
}

_lib = None
_version: str | None = None


def llvmlite_version() -> str:
    """The installed llvmlite's version, read without importing its binding."""
    global _version
    if _version is None:
        import llvmlite  # its __init__ reads the version only (llvmlite.binding is the slow part)

        _version = llvmlite.__version__
    return _version


def lib() -> ctypes.CDLL:
    """libllvmlite with the prototypes declared (loaded once; LLVM's native target and asm
    printer initialised)."""
    global _lib
    if _lib is None:
        version = llvmlite_version()
        major_minor = tuple(int(p) for p in version.split(".")[:2] if p.isdigit())
        if major_minor not in SUPPORTED:
            want = " or ".join(f"{a}.{b}.*" for a, b in SUPPORTED)
            raise ImportError(
                f"fungrad.jit: llvmlite {version} is installed, but fungrad "
                f"calls llvmlite's C functions directly and supports llvmlite "
                f"{want}; install it with: pip install 'llvmlite=={want}'"
            )
        spec = importlib.util.find_spec("llvmlite")
        folder = os.path.join(os.path.dirname(spec.origin), "binding")
        name = {"darwin": "libllvmlite.dylib", "win32": "llvmlite.dll"}.get(
            sys.platform, "libllvmlite.so"
        )
        handle = ctypes.CDLL(os.path.join(folder, name))
        for fn, (restype, argtypes) in _PROTOTYPES.items():
            f = getattr(handle, fn)
            f.restype, f.argtypes = restype, argtypes
        handle.LLVMPY_InitializeNativeTarget()
        handle.LLVMPY_InitializeNativeAsmPrinter()
        _lib = handle
    return _lib


# -- strings LLVM returns -----------------------------------------------------------------------


def _take(out: c_void_p) -> str:
    """The text of a string LLVM allocated into ``out`` (freed here); '' for none."""
    if not out.value:
        return ""
    try:
        return ctypes.string_at(out.value).decode("utf-8", "replace")
    finally:
        lib().LLVMPY_DisposeString(out)


def _string_of(fn, *args) -> str:
    out = c_void_p()
    fn(*args, ctypes.byref(out))
    return _take(out)


# -- the host -------------------------------------------------------------------------------------


def llvm_version() -> tuple[int, ...]:
    """LLVM's (major, minor, patch)."""
    x, parts = lib().LLVMPY_GetVersionInfo(), []
    while x:
        parts.append(x & 0xFF)
        x >>= 8
    return tuple(reversed(parts))


def process_triple() -> str:
    return _string_of(lib().LLVMPY_GetProcessTriple)


def host_cpu_name() -> str:
    return _string_of(lib().LLVMPY_GetHostCPUName)


def host_cpu_features() -> str:
    """The host's features as ``+a,-b,...`` sorted by name (llvmlite's ``flatten()``)."""
    out = c_void_p()
    if not lib().LLVMPY_GetHostCPUFeatures(ctypes.byref(out)):
        return ""
    feats = [f for f in _take(out).split(",") if f]
    return ",".join(sorted(feats, key=lambda f: f[1:]))


def create_target_machine(triple: str, cpu: str, features: str, opt: int) -> c_void_p:
    """A JIT target machine (code model chosen for JIT use); freed by its engine, or never."""
    err = c_void_p()
    target = lib().LLVMPY_GetTargetFromTriple(triple.encode(), ctypes.byref(err))
    if not target:
        raise RuntimeError(_take(err) or f"no LLVM target for {triple}")
    if os.name == "nt":  # MCJIT on Windows loads ELF objects only (as llvmlite does)
        triple += "-elf"
    tm = lib().LLVMPY_CreateTargetMachine(
        target,
        triple.encode(),
        cpu.encode(),
        features.encode(),
        opt,
        b"default",
        b"jitdefault",
        0,
        1,
        b"",
    )
    if not tm:
        raise RuntimeError(f"cannot create an LLVM target machine for {triple} / {cpu}")
    return c_void_p(tm)


def data_layout(tm: c_void_p) -> str:
    td = lib().LLVMPY_CreateTargetMachineData(tm)
    try:
        return _string_of(lib().LLVMPY_CopyStringRepOfTargetData, td)
    finally:
        lib().LLVMPY_DisposeTargetData(td)


# -- modules ---------------------------------------------------------------------------------------


def create_context() -> c_void_p:
    """A private LLVM context: modules parsed into it may be optimised and compiled on another
    thread while other threads use theirs (LLVM's contexts share no state). Freed by
    :func:`dispose_context`, after every module in it."""
    return c_void_p(lib().LLVMPY_ContextCreate())


def dispose_context(context: c_void_p) -> None:
    lib().LLVMPY_ContextDispose(context)


def parse_module(ir_text: str, context: c_void_p | None = None) -> c_void_p:
    """A module parsed from IR text into ``context`` (default: LLVM's global context, which
    only one thread at a time may use: ``cpu.llvm_lock``); RuntimeError with LLVM's message if
    it does not parse."""
    err = c_void_p()
    if context is None:
        context = lib().LLVMPY_GetGlobalContext()
    mod = lib().LLVMPY_ParseAssembly(context, ir_text.encode(), ctypes.byref(err))
    if not mod:
        raise RuntimeError(f"LLVM IR parsing error\n{_take(err)}")
    _take(err)
    return c_void_p(mod)


def dispose_module(mod: c_void_p) -> None:
    lib().LLVMPY_DisposeModule(mod)


def verify_module(mod: c_void_p) -> None:
    err = c_void_p()
    failed = lib().LLVMPY_VerifyModule(mod, ctypes.byref(err))
    message = _take(err)
    if failed:
        raise RuntimeError(message)


def set_module_target(mod: c_void_p, name: str, triple: str, layout: str) -> None:
    lib().LLVMPY_SetModuleName(mod, name.encode())
    lib().LLVMPY_SetTarget(mod, triple.encode())
    lib().LLVMPY_SetDataLayout(mod, layout.encode())


def module_functions(mod: c_void_p) -> list[tuple[str, bool, int]]:
    """``(name, is_declaration, linkage)`` of every function in the module."""
    it = lib().LLVMPY_ModuleFunctionsIter(mod)
    out = []
    try:
        while fn := lib().LLVMPY_FunctionsIterNext(it):
            out.append(
                (
                    lib().LLVMPY_GetValueName(fn).decode(),
                    bool(lib().LLVMPY_IsDeclaration(fn)),
                    lib().LLVMPY_GetLinkage(fn),
                )
            )
    finally:
        lib().LLVMPY_DisposeFunctionsIter(it)
    return out


def module_text(mod: c_void_p) -> str:
    return _string_of(lib().LLVMPY_PrintModuleToString, mod)


def optimize(
    mod: c_void_p, tm: c_void_p, speed_level: int, loop_vectorization: bool, slp_vectorization: bool
) -> None:
    """Run LLVM's default module pipeline at ``speed_level`` (0-3) on ``mod``, then its
    always-inliner once more.

    The second inliner is for calls the pipeline itself created: the loop vectoriser calls the
    masked vector variants of sin/cos/tan's large-argument function (llvm_math), which are
    ``alwaysinline``, so each becomes a branch around an out-of-line call inside the loop
    instead of a call per vector."""
    L = lib()
    pto = L.LLVMPY_CreatePipelineTuningOptions()
    pb = None
    try:
        L.LLVMPY_PTOSetLoopVectorization(pto, loop_vectorization)
        L.LLVMPY_PTOSetSLPVectorization(pto, slp_vectorization)
        pb = L.LLVMPY_CreatePassBuilder(tm, pto)
        for build in (
            lambda: L.LLVMPY_buildPerModuleDefaultPipeline(pb, speed_level),
            _always_inliner,
        ):
            mpm = build()
            try:
                L.LLVMPY_RunNewModulePassManager(mpm, mod, pb)
            finally:
                L.LLVMPY_DisposeNewModulePassManger(mpm)
    finally:
        if pb:
            L.LLVMPY_DisposePassBuilder(pb)
        L.LLVMPY_DisposePipelineTuningOptions(pto)


def _always_inliner() -> c_void_p:
    """A module pass manager holding only LLVM's always-inliner."""
    mpm = lib().LLVMPY_CreateNewModulePassManager()
    lib().LLVMPY_module_AddAlwaysInlinerPass(mpm)
    return mpm


def emit(tm: c_void_p, mod: c_void_p, object_file: bool = True) -> bytes:
    """The module compiled to an object file (or, ``object_file=False``, assembly text)."""
    L = lib()
    err = c_void_p()
    buf = L.LLVMPY_TargetMachineEmitToMemory(tm, mod, int(object_file), ctypes.byref(err))
    if not buf:
        raise RuntimeError(_take(err) or "LLVM code generation failed")
    try:
        return ctypes.string_at(L.LLVMPY_GetBufferStart(buf), L.LLVMPY_GetBufferSize(buf))
    finally:
        L.LLVMPY_DisposeMemoryBuffer(buf)


# -- loading code ----------------------------------------------------------------------------------


def create_engine(mod: c_void_p, tm: c_void_p) -> c_void_p:
    """An MCJIT engine that owns ``mod`` and ``tm`` from now on."""
    err = c_void_p()
    machine = os.uname().machine if hasattr(os, "uname") else ""
    use_lmm = machine.lower() in ("arm64", "aarch64")  # llvmlite's memory manager, as it does
    engine = lib().LLVMPY_CreateMCJITCompiler(mod, tm, use_lmm, ctypes.byref(err))
    if not engine:
        raise RuntimeError(_take(err) or "cannot create an MCJIT engine")
    return c_void_p(engine)


def engine_add_object(engine: c_void_p, obj: bytes) -> None:
    """Load object file ``obj`` into ``engine``; :func:`finalize_engine` then links the objects
    loaded so far (relocates, resolves their symbols, makes the code executable)."""
    L = lib()
    handle = L.LLVMPY_CreateObjectFile(obj, len(obj))
    if not handle:
        raise RuntimeError("LLVM could not read the object file")
    try:
        L.LLVMPY_MCJITAddObjectFile(engine, handle)  # moves the binary into the engine
    finally:
        L.LLVMPY_DisposeObjectFile(handle)


def finalize_engine(engine: c_void_p) -> None:
    lib().LLVMPY_FinalizeObject(engine)


def function_address(engine: c_void_p, name: str) -> int:
    return lib().LLVMPY_GetFunctionAddress(engine, name.encode())


def dispose_engine(engine: c_void_p) -> None:
    lib().LLVMPY_DisposeExecutionEngine(engine)


def add_symbol(name: str, address: int) -> None:
    """Make ``name`` resolve to ``address`` in code loaded from now on (process wide)."""
    lib().LLVMPY_AddSymbol(name.encode(), address)


def set_option(option: str) -> None:
    """Set one of LLVM's command-line options (``-name=value``), process wide: it applies to
    every compile in this process from now on, fungrad's or not, until set again."""
    lib().LLVMPY_SetCommandLine(b"fungrad", option.encode())


def address_of_symbol(name: str) -> int | None:
    return lib().LLVMPY_SearchAddressOfSymbol(name.encode())
