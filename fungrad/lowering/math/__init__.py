"""Vectorisable math functions (exp, log, sin, erf, ...) written once, rendered per backend.

``llvm`` holds the algorithms against a small SSA builder and renders them as LLVM IR for the
CPU's prelude; ``wgsl`` is the same builder interface writing WGSL for the GPU.
"""
