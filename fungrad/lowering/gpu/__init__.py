"""The GPU backend: kernels rendered as WGSL compute shaders and run through wgpu.

``executable`` plans, compiles and runs a jaxpr on the device (one renderer per step kind,
from a table); ``schemes`` holds the analyses and the choices between ways of running a step
(trees, scatters, blocked scans, split contractions, bitonic sorts); the renderers are
``shader`` (kernels; ``reduce`` adds workgroup trees and scatter atomics), ``gemm``, ``scan``
and ``sort``, on ``types`` (the type map), ``helpers`` (prelude functions), ``frame``
(bindings, scopes, grids) and ``schedule`` (statement order); ``runtime`` owns the wgpu
adapter, device, buffers and pipelines. Importing this package does not touch the GPU.
"""
