"""The GPU backend: kernels rendered as WGSL compute shaders and run through wgpu.

``wgsl`` renders a fusion Program's kernels, ``executable`` plans, compiles and runs a jaxpr on
the device, ``runtime`` owns the wgpu adapter, device, buffers and pipelines. Importing this
package does not touch the GPU.
"""
