"""The elementwise op table (ember/_kernels/cpu/optable.py) is the one source of the
ops' metadata: its arities and classes agree with NumPy's ufuncs, its grad column with
the registered gradient rules, its gpu column with the CUDA kernels, and what is
generated from it (op codes, libm declarations) with the rows."""
import os
import re
import warnings

import numpy as np
import pytest

import ember
from ember._core import elementwise as _ew
from ember._kernels.cpu import gen_loops, optable
from ember.autograd import registry

ROWS = optable.OPS
IDS = [row.name for row in ROWS]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _numpy_result(row, dtype):
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return getattr(np, row.name)(*([np.array([1, 2], dtype=dtype)] * row.arity))


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_row_is_a_numpy_ufunc_of_the_same_arity(row):
    assert getattr(np, row.name).nin == row.arity
    uf = getattr(ember, row.name)
    assert isinstance(uf, ember.ufunc) and uf.nin == row.arity


# where ember's class differs from NumPy's on purpose (README, "Where ember differs from
# NumPy on purpose": integer inputs to float-valued functions give the default float)
FLOAT_ON_PURPOSE = {"reciprocal"}       # NumPy: 1 // x in the integer dtype


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_row_class_matches_numpys_result_dtypes(row):
    """'c': bool results; 'f': integers give floats; 'i': floats are refused; 'a':
    integers stay integers."""
    if row.cls == "i":
        with pytest.raises(TypeError):
            _numpy_result(row, np.float64)
        with pytest.raises(TypeError, match=row.name):
            getattr(ember, row.name)(*([ember.ones(2)] * row.arity))
        return
    got = _numpy_result(row, np.float64).dtype
    if row.cls == "c":
        assert got == np.bool_
    else:
        assert got == np.float64
    ints = _numpy_result(row, np.int32).dtype
    if row.name in FLOAT_ON_PURPOSE:
        assert row.cls == "f" and ints.kind == "i"
        assert getattr(ember, row.name)(ember.asarray([1, 2])).dtype == ember.float32
        return
    assert ints.kind == {"c": "b", "f": "f", "a": "i"}[row.cls]


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_op_codes_are_the_row_indices(row):
    assert _ew._op_index(row.name) == ROWS.index(row)
    assert f"    OP_{row.name.upper()} = {ROWS.index(row)}\n" in gen_loops.opcodes_pxd()


def test_op_names_and_table_agree():
    assert _ew.op_names() == IDS
    assert [r.name for r in _ew.op_table()] == IDS
    assert len(set(IDS)) == len(IDS)


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_grad_column_matches_the_rules(row):
    if row.grad:
        assert row.name in registry.RULES
        assert row.name not in registry.NONDIFF
    else:
        assert row.name not in registry.RULES
        assert row.name in registry.NONDIFF


def test_every_nondifferentiable_name_is_a_public_function():
    missing = []
    for name in sorted(registry.NONDIFF):
        obj = ember
        for part in name.split("."):
            obj = getattr(obj, part, None)
        if not callable(obj):
            missing.append(name)
    assert not missing, f"registered as non-differentiable but not in ember: {missing}"


def test_nondifferentiable_ops_record_nothing():
    x = ember.asarray([0.5, -1.0, 2.0], dtype=ember.float64, requires_grad=True)
    for row in ROWS:
        if row.grad or row.cls == "i":
            continue
        y = getattr(ember, row.name)(*([x] * row.arity))
        assert not y.requires_grad and y.grad_fn is None, row.name


def test_gpu_column_names_kernels_that_exist():
    with open(os.path.join(ROOT, "ember", "cuda", "kernels", "elementwise.cu")) as f:
        source = f.read()
    named = [row for row in ROWS if row.gpu]
    assert named
    for row in named:
        assert f"DEF_{'UNARY' if row.arity == 1 else 'BINARY'}({row.gpu})" in source, row
    assert _ew.gpu_kernels(2) == {r.name: r.gpu for r in named if r.arity == 2}
    assert _ew.gpu_kernels(1) == {r.name: r.gpu for r in named if r.arity == 1}


def test_libm_declarations_come_from_the_rows():
    found = gen_loops.libm_functions()
    assert found["pow"] == 2 and found["atan2"] == 2 and found["sqrt"] == 1
    assert "_exp" not in found and "floordiv_f" not in found   # ember's own helpers
    decl = gen_loops.libm_declarations()
    header = gen_loops.HEADER.replace("{LIBM}", decl)
    for fn, n in found.items():
        for ctype, name in (("float", fn + "f"), ("double", fn)):
            assert f"    {ctype} {name}({', '.join([ctype] * n)})\n" in header, name
            assert len(re.findall(rf"^    {ctype} {name}\(", header, re.M)) == 1, name


def test_a_new_row_needs_no_other_edit_to_generate():
    """A hypothetical float binary op (C99's fdim, not in NumPy): its libm declaration,
    its op code and its loops all come from the row."""
    row = optable._op("fdim", 2, "f", {"f": "fdim{F}(a, b)"})
    assert row.grad is True and row.gpu is None
    assert gen_loops.libm_functions([row]) == {"fdim": 2}
    code = gen_loops.emit_loop(row.name, row.arity, False, optable.DTYPES[10],
                               gen_loops.expression_for(row.loops, "f").format(F="f"))
    assert code[0] == "_fdim_float32" and "fdimf(a, b)" in code[1]


def test_bad_rows_are_refused():
    with pytest.raises(AssertionError):
        optable._op("x", 3, "a", {})
    with pytest.raises(AssertionError):
        optable._op("x", 1, "z", {})
