"""Shared machinery of the control-flow primitives: checking their types, evaluating bodies.

(Bodies are traced by :func:`fungrad.transforms.staging.trace_body`.)"""

from __future__ import annotations

from fungrad import core, tree_util
from fungrad.transforms.api_util import fun_location, fun_name

# -- checking types ------------------------------------------------------------------------------


def avals_str(avals) -> str:
    return "(" + ", ".join(a.str_short() for a in avals) + ")"


def check_same_avals(what: str, expected, got, fix: str) -> None:
    exp = [a.strip_weak_type() for a in expected]
    gt = [a.strip_weak_type() for a in got]
    if exp != gt:
        raise TypeError(f"{what}: expected {avals_str(expected)} but got {avals_str(got)}. {fix}")


def check_same_outputs(
    what: str,
    ref,
    other,
    fix: str,
    *,
    root: str = "output",
    verbs=("returns", "returns"),
    must: str = "must return",
    types: str = "output types",
) -> None:
    """TypeError unless two pytrees of avals have the same structure and, leaf by leaf, the
    same shapes and dtypes (weak types may differ). ``ref`` and ``other`` are
    ``(label, function, tree, avals)``: by default the outputs of two traced functions (cond's
    branches); a loop compares its initial carry (``function`` None) with the carry its body
    returns (``root`` the carry's name, ``verbs`` ``("holds", "returns")``, ``must`` "must
    have", ``types`` "types"). The message names the functions (and where they are defined),
    the path of the first structural difference or of every differing leaf, and ``fix``."""
    (r_label, r_fun, r_tree, r_avals), (o_label, o_fun, o_tree, o_avals) = ref, other
    r_verb, o_verb = verbs
    where = (
        "".join(
            f"\n  {label} is {fun_name(fun)} at {fun_location(fun)}"
            for label, fun in ((r_label, r_fun), (o_label, o_fun))
            if fun is not None
        )
        + "\n"
    )
    diff = tree_util._tree_difference(r_tree, o_tree, root)
    if diff is not None:
        path, r_node, o_node = diff
        raise TypeError(
            f"{what} {must} the same pytree structure, but at {path} "
            f"{r_label} {r_verb} {r_node} and {o_label} {o_verb} {o_node}.{where}"
            f"{fix}"
        )
    lines = []
    for path, a, b in zip(tree_util._leaf_paths(r_tree, root), r_avals, o_avals):
        if a.strip_weak_type() != b.strip_weak_type():
            why = "shapes" if a.shape != b.shape else "dtypes"
            if a.shape != b.shape and a.dtype != b.dtype:
                why = "shapes and dtypes"
            lines.append(
                f"  * {path}: {r_label} {r_verb} {a.str_short()} but {o_label} "
                f"{o_verb} {b.str_short()} (the {why} differ)"
            )
    if lines:
        raise TypeError(
            f"{what} {must} equal {types}, but they differ:\n" + "\n".join(lines) + where + fix
        )


def eval_closed(closed: core.ClosedJaxpr, *args):
    return core.eval_jaxpr(closed.jaxpr, closed.consts, *args)
