"""fungrad's direct binding of llvmlite's C functions, against llvmlite's own Python binding.

llvmlite.binding declares the same C functions; where both can answer (host, versions, layout)
the answers must agree, and code compiled through ours must run.
"""

import ctypes

import llvmlite.binding as llvm
import pytest

from fungrad.lowering.cpu import compiler as cpu
from fungrad.lowering.cpu import llvm_capi

IR = """
declare i64 @fg_test_external(i64)
define internal i64 @helper(i64 %x) {
  %y = mul i64 %x, 3
  ret i64 %y
}
define i64 @add3(i64 %a, i64 %b) {
  %s = add i64 %a, %b
  %t = call i64 @helper(i64 %s)
  ret i64 %t
}
"""


def test_host_matches_llvmlite():
    with cpu.llvm_lock:
        assert llvm_capi.process_triple() == llvm.get_process_triple()
        assert llvm_capi.host_cpu_name() == llvm.get_host_cpu_name()
        assert llvm_capi.host_cpu_features() == llvm.get_host_cpu_features().flatten()
        assert llvm_capi.llvm_version() == llvm.llvm_version_info
        h = cpu.host()
        target = llvm.Target.from_triple(h.triple)
        tm = target.create_target_machine(cpu=h.cpu, features=h.features, opt=3, jit=True)
        assert h.data_layout == str(tm.target_data)


def test_module_functions_and_compiled_code():
    h = cpu.host()
    with cpu.llvm_lock:
        mod = llvm_capi.parse_module(IR)
        try:
            llvm_capi.verify_module(mod)
            llvm_capi.set_module_target(mod, "capi_test", h.triple, h.data_layout)
            listed = {
                name: (decl, linkage) for name, decl, linkage in llvm_capi.module_functions(mod)
            }
            assert listed == {
                "fg_test_external": (True, 0),
                "helper": (False, 8),
                "add3": (False, 0),
            }
            assert "define i64 @add3" in llvm_capi.module_text(mod)
            llvm_capi.optimize(mod, h.target_machine, 3, True, True)
            obj = llvm_capi.emit(h.target_machine, mod)
            asm = llvm_capi.emit(h.target_machine, mod, object_file=False).decode()
        finally:
            llvm_capi.dispose_module(mod)
        assert len(obj) > 0 and "add3" in asm
        engine = llvm_capi.create_engine(llvm_capi.parse_module(""), h.new_target_machine())
        try:
            llvm_capi.engine_add_object(engine, obj)
            llvm_capi.finalize_engine(engine)
            address = llvm_capi.function_address(engine, "add3")
            assert address
            fn = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)(address)
            assert fn(4, 5) == 27
            assert fn(-10, 3) == -21
        finally:
            llvm_capi.dispose_engine(engine)


def test_errors_carry_llvm_messages():
    with cpu.llvm_lock:
        with pytest.raises(RuntimeError, match="parsing error"):
            llvm_capi.parse_module("define i32 @f( {")
        # parses, but %x is used where it may not be defined
        mod = llvm_capi.parse_module(
            "define i32 @f(i1 %c) {\nentry:\n  br i1 %c, label %a, "
            "label %b\na:\n  %x = add i32 1, 2\n  br label %b\n"
            "b:\n  ret i32 %x\n}\n"
        )
        try:
            with pytest.raises(RuntimeError, match="does not dominate"):
                llvm_capi.verify_module(mod)
        finally:
            llvm_capi.dispose_module(mod)


def test_symbols_are_shared_with_llvmlite():
    cell = ctypes.c_int64(7)
    with cpu.llvm_lock:
        llvm_capi.add_symbol("fg_capi_test_cell", ctypes.addressof(cell))
        assert llvm_capi.address_of_symbol("fg_capi_test_cell") == ctypes.addressof(cell)
        assert llvm.address_of_symbol("fg_capi_test_cell") == ctypes.addressof(cell)
        assert llvm_capi.address_of_symbol("fg_capi_no_such_symbol") is None


def test_unsupported_llvmlite_is_refused(monkeypatch):
    monkeypatch.setattr(llvm_capi, "_lib", None)
    monkeypatch.setattr(llvm_capi, "_version", "0.99.0")
    with pytest.raises(ImportError, match=r"llvmlite 0\.99\.0 .*pip install 'llvmlite==0\.50\.\*'"):
        llvm_capi.lib()
