"""Every primitive has every rule it should have: impl, abstract_eval, a jvp rule (or an explicit
declaration that it cannot be differentiated, with the reason users will see), a batching rule,
and a transpose rule when it is linear in some operand."""

import fungrad  # noqa: F401  (registers every primitive)
from fungrad import core
from fungrad.transforms.jvp import jvp_rules, no_jvp
from fungrad.transforms.transpose import transpose_rules
from fungrad.transforms.vmap import batch_rules

# Primitives linear in at least one operand: reverse mode needs their transpose.
LINEAR = {
    "add",
    "sub",
    "neg",
    "mul",
    "div",
    "convert_element_type",
    "real",
    "imag",
    "conj",
    "complex",
    "select_n",
    "reduce_sum",
    "broadcast_in_dim",
    "reshape",
    "transpose",
    "squeeze",
    "concatenate",
    "pad",
    "slice",
    "dynamic_slice",
    "dynamic_update_slice",
    "rev",
    "dot_general",
    "conv_general_dilated",
    "cumsum",
    "reduce_window_sum",
    "select_and_gather_add",
    "select_and_scatter_add",
    "gather",
    "scatter-add",
    "scatter",
    "scatter-mul",
    "cond",
    "scan",
    "while",
    "checkpoint",
    "custom_lin",
    "fft",
    "fft_c2c",
}

# Primitives that are only ever used on the way to others (no batching rule needed).
NO_BATCH = {"custom_lin"}


def test_every_primitive_has_impl_and_shape_rule():
    for name, p in core.primitives.items():
        assert callable(p.impl), f"{name}: no impl"
        assert callable(p.abstract_eval), f"{name}: no abstract_eval"


def test_every_primitive_has_a_jvp_rule_or_says_why_not():
    missing = [
        n
        for n, p in core.primitives.items()
        if p not in jvp_rules and p not in no_jvp and n != "custom_lin"
    ]
    assert not missing, f"primitives without a jvp rule: {sorted(missing)}"
    for p, reason in no_jvp.items():
        assert isinstance(reason, str) and len(reason) > 10, f"{p}: give users a reason"


def test_every_primitive_has_a_batching_rule():
    missing = [n for n, p in core.primitives.items() if p not in batch_rules and n not in NO_BATCH]
    assert not missing, f"primitives without a batching rule: {sorted(missing)}"


def test_linear_primitives_have_transpose_rules():
    names = set(core.primitives)
    assert LINEAR <= names, f"unknown names in LINEAR: {sorted(LINEAR - names)}"
    missing = [n for n in LINEAR if core.primitives[n] not in transpose_rules]
    assert not missing, f"linear primitives without a transpose rule: {sorted(missing)}"
