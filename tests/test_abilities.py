"""A built kernel's abilities (cyloop/abilities.py): one frozen record per kernel, declared with
`declare` and read with `abilities_of`; a kernel that declares nothing has `NO_ABILITIES`. No
kernel states an ability as a loose attribute of its own: the engine reads only the record."""

import ast
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

import cyloop
from cyloop.abilities import NO_ABILITIES, Abilities, Recurrence, abilities_of, declare
from cyloop.accel.measured import Measured
from cyloop.kernels import registry

_PACKAGE = Path(cyloop.__file__).resolve().parent
_ROOT = _PACKAGE.parent
# The record's fields, once loose attributes of a kernel.
_FIELDS = Abilities._fields


def _plain(x):
    return x


class _Callable:
    def __call__(self, x):
        return x


@pytest.mark.parametrize("fn", [_plain, lambda x: x, np.add, np.tanh, np.matmul, len,
                                _Callable(), np.add.reduce],
                         ids=["function", "lambda", "binary ufunc", "unary ufunc", "gufunc",
                              "builtin", "callable object", "ufunc method"])
def test_a_kernel_that_declared_nothing_has_the_shared_empty_record(fn):
    abilities = abilities_of(fn)
    assert abilities is NO_ABILITIES
    assert abilities == Abilities()
    assert not any(getattr(abilities, name) for name in _FIELDS)
    assert not abilities.own_node_state


def test_declare_returns_the_kernel_and_keeps_what_it_declared_before():
    measured = Measured({"one": _plain, "other": _plain})

    def fn(x):
        return x

    assert declare(fn, measured=measured) is fn
    declare(fn, products=True)
    abilities = abilities_of(fn)
    assert abilities.measured is measured and abilities.products
    assert abilities.own_node_state
    assert abilities_of(_plain) is NO_ABILITIES  # (another kernel's record is its own)

    def wrapper(x):
        return fn(x)

    declare(wrapper, abilities, products=False)  # (like `fn`'s, but for one field)
    assert abilities_of(wrapper) == abilities.replace(products=False)
    assert abilities_of(fn) is abilities  # (records are not shared out for change)


def test_the_record_is_frozen_and_checks_its_fields_go_together():
    def fn(x):
        return x

    record = abilities_of(declare(fn, updates_first=True))
    with pytest.raises(AttributeError, match="cannot assign to field 'updates_first'"):
        record.updates_first = False
    with pytest.raises(ValueError, match="recurrent step declares its steps_for"):
        declare(fn, recurrence=Recurrence(per_step=0, feedback=(1,)))
    with pytest.raises(ValueError, match="steps_hold says how steps_for answers"):
        Abilities(steps_hold=True)
    assert abilities_of(fn) is record  # (a refused declaration changes nothing)
    assert registry.type_keeping(fn) == registry.FIRST_INPUT


def _loose(fn) -> set[str]:
    """The abilities `fn` carries as attributes of its own, outside the record."""
    own = getattr(fn, "__dict__", None)
    return set(own or ()) & set(_FIELDS)


def _kernels(compiled):
    """Every kernel a compiled program runs: its steps', its loops' bodies' (nested loops
    included), their hoisted parts' and each measured choice's candidates."""
    found = []
    for step in compiled.steps:
        found.append(step.fn)
    for loop in compiled.loops:
        found += _kernels(loop.body.compiled)
        if loop.hoist is not None:
            found += [step.probe for step in loop.hoist.steps if step.probe is not None]
    for fn in list(found):
        measured = abilities_of(fn).measured
        if measured is not None:
            found += list(measured.candidates.values())
    return found


def _corpus_paths() -> list[Path]:
    """The models cyloop ships (cyloop/data) and, in the repository, the exported corpus."""
    paths = sorted(p for p in (_PACKAGE / "data").iterdir() if p.suffix in (".onnx", ".xml"))
    corpus = _ROOT / "asv_benchmarks" / "corpus" / "__init__.py"
    if corpus.exists():
        spec = importlib.util.spec_from_file_location("cyloop_abilities_corpus", corpus)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # (its dataclasses look their module up there)
        spec.loader.exec_module(module)
        paths += [entry.path for entry in module.entries()]
    return paths


def test_every_kernel_of_the_shipped_models_declares_its_abilities_in_the_record():
    """Compiled (the Cython driver: fused and hoisted), no kernel of any shipped or exported
    model carries an ability as a loose attribute, and the record is what says them: the
    kinds of ability the recurrent models need are all declared somewhere."""
    declared, kernels = set(), 0
    for path in _corpus_paths():
        model = cyloop.load(str(path), driver="cython")
        for fn in _kernels(model._compiled):
            kernels += 1
            assert not _loose(fn), f"{path.name}: {fn!r} carries {sorted(_loose(fn))}"
            abilities = abilities_of(fn)
            assert isinstance(abilities, Abilities)
            declared |= {name for name in _FIELDS if getattr(abilities, name)}
    assert kernels
    assert {"measured", "products", "recurrence", "steps_for"} <= declared, declared


def _attribute_writes(tree) -> list[tuple[int, str]]:
    """(line, name) of each write of an ability as an attribute outside `self` (``fn.name =``,
    ``setattr(fn, "name", ...)``) in a parsed module."""
    found = []
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        flat = []
        for target in targets:
            flat += target.elts if isinstance(target, ast.Tuple) else [target]
        for target in flat:
            if isinstance(target, ast.Attribute) and target.attr in _FIELDS \
                    and not (isinstance(target.value, ast.Name) and target.value.id == "self"):
                found.append((node.lineno, target.attr))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id == "setattr" and len(node.args) >= 2 \
                and isinstance(node.args[1], ast.Constant) and node.args[1].value in _FIELDS:
            found.append((node.lineno, node.args[1].value))
    return found


@pytest.mark.parametrize("path", sorted(_PACKAGE.rglob("*.py")),
                         ids=lambda p: str(p.relative_to(_PACKAGE)))
def test_no_module_sets_an_ability_as_a_kernel_attribute(path):
    """Every kernel module states abilities through `declare` (an object's own state, ``self.``,
    is its own business)."""
    writes = _attribute_writes(ast.parse(path.read_text(encoding="utf-8")))
    assert not writes, f"{path.name}: " + ", ".join(f"line {n}: .{a}" for n, a in writes)


def test_the_attribute_check_finds_a_loose_ability():
    """The check above on a module that sets one each way (it must be able to fail)."""
    source = "fn.products = True\nrun.measured, run.cores = a, b\nsetattr(fn, 'steps_for', f)\n" \
             "self.measured = None\n"
    assert _attribute_writes(ast.parse(source)) == [(1, "products"), (2, "measured"),
                                                    (2, "cores"), (3, "steps_for")]


@pytest.mark.parametrize("alpha, beta, trans_b", [(1.0, 1.0, 0), (0.5, 0.0, 1)])
def test_gemm_declares_the_parts_its_hoisted_form_reads(alpha, beta, trans_b):
    """... and its product, given B as the node has it, is the product the kernel computes."""
    from cyloop.ir import Node

    node = Node("Gemm", ["a", "b", "c"], ["y"], {"alpha": alpha, "beta": beta, "transB": trans_b})
    fn = registry.build(node, {"": 13}).fn
    form = abilities_of(fn).gemm
    assert (form.alpha, form.beta, form.trans_b) == (alpha, beta, bool(trans_b))
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((5, 4) if trans_b else (4, 5)).astype(np.float32)
    np.testing.assert_allclose(form.product(a, b), a @ (b.T if trans_b else b), rtol=1e-6)
    assert abilities_of(registry.build(Node("MatMul", ["a", "b"], ["y"], {}), {"": 13}).fn).gemm \
        is None
