"""Lowering of jaxprs to native code: the fusion planner and the LLVM (CPU) and WGSL (GPU)
renderers. This package is filled by the jit issues; nothing here is used yet."""
