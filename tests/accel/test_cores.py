"""How many cores a product runs on: each candidate of where a loop's products run is named by
the cores it takes here (threadpoolctl and the process's affinity are the oracle), numpy's BLAS
is held to the cores the process may use while a model runs, and the plan and `cyloop info
--system` say which candidates there are."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import cyloop
from cyloop import system
from cyloop.accel import gemm
from cyloop.accel.blas import cores_available
from cyloop.engine._core import running

from ..support.loops import rnn_loop_feeds, rnn_loop_model
from ..support.plans import loop_plan

threadpoolctl = pytest.importorskip("threadpoolctl", reason="threadpoolctl reads BLAS's threads")

bound = pytest.mark.skipif(gemm.blas_status() is not None,
                           reason="numpy's bundled OpenBLAS is not found or is off here: "
                                  "its thread count is not read or set")


def _blas_threads() -> int:
    """numpy's BLAS's thread count, as threadpoolctl reads it."""
    (info,) = [i for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"
               and i["filepath"].startswith(os.path.dirname(np.__file__))]
    return info["num_threads"]


@bound
def test_blas_takes_its_threads_bounded_by_the_cores_the_process_may_use():
    expected = min(_blas_threads(), len(os.sched_getaffinity(0)))
    assert gemm.blas_cores() == expected
    name = gemm.blas_candidate()
    assert name == "on one core" if expected == 1 else f"up to {expected} cores" in name


def test_each_candidate_names_the_cores_it_takes():
    candidates = gemm.product_candidates()
    if candidates is None:
        assert not gemm.two_cores_here()
        name, why = gemm.no_choice()
        assert name == gemm.blas_candidate() and why
        return
    assert list(candidates.values()) == [True, False]  # (the helper's first: the default)
    helper, by_blas = candidates
    assert by_blas == gemm.blas_candidate()
    helped = _blas_threads() >= 2 and cores_available() >= 2
    assert ("two cores" in helper) == helped and ("one core" in helper) == (not helped)


def _feeds(rng):
    """h = tanh(x_t W + h R + B), h @ R [16,64] @ [64,64], its weights scaled so that a step's
    sums stay near 1 (no saturated units, whose rounding the loop would amplify)."""
    feeds = rnn_loop_feeds(rng, hidden=64, steps=12, batch=16, features=32)
    for name in ("W", "R"):
        feeds[name] *= 0.125
    return feeds


def _loop_model():
    return cyloop.load(rnn_loop_model(), driver="cython")


def test_the_plan_says_where_a_loops_products_run(rng):
    """With a choice, its candidates by their cores; without one (one core, no bundled BLAS),
    where they run and why. Either way the values are the reference driver's."""
    model = _loop_model()
    feeds = _feeds(rng)
    got = model.run(feeds)
    expected = cyloop.load(rnn_loop_model(), driver="python").run(feeds)
    for name, value in expected.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-5, atol=1e-6)
    (choice,) = loop_plan(model).choices_of("cores")
    candidates = gemm.product_candidates()
    if candidates is None:
        assert choice.declined and choice.candidates == (gemm.blas_candidate(),)
    else:
        assert choice.candidates == tuple(candidates) and not choice.declined
    assert all(name in str(model.plan()) for name in choice.candidates)


def test_info_names_the_candidates_and_the_cores():
    described = system.describe()
    assert described["cores"].startswith(f"{cores_available()} this process may use")
    candidates = gemm.product_candidates()
    names = list(candidates) if candidates is not None else [gemm.no_choice()[0]]
    assert all(name in described["products"] for name in names)


@bound
def test_blas_is_held_to_the_cores_of_a_run_and_given_back():
    """In a run, BLAS takes no more threads than the process's cores; with as many cores as
    its threads it is left as it is. (Narrowed affinity: the next test.)"""
    before = _blas_threads()
    with running(None):
        assert _blas_threads() == min(before, cores_available())
    assert _blas_threads() == before


# A process that narrows itself, every thread of it, to one core after numpy has sized BLAS's
# threads for two: while a model runs BLAS takes one thread, values stay numpy's, and after the
# run BLAS has its threads back.
_NARROWED = textwrap.dedent("""
    import os, sys
    import numpy as np
    import threadpoolctl
    import cyloop
    from cyloop.accel import gemm
    from cyloop.engine._core import running
    sys.path.insert(0, sys.argv[1])
    from tests.support.loops import rnn_loop_feeds, rnn_loop_model

    def threads():
        return [i["num_threads"] for i in threadpoolctl.threadpool_info()
                if i["user_api"] == "blas"][0]

    before = threads()
    for task in os.listdir("/proc/self/task"):
        os.sched_setaffinity(int(task), {sorted(os.sched_getaffinity(0))[0]})
    with running(None):
        inside = threads()
    rng = np.random.default_rng(0)
    feeds = rnn_loop_feeds(rng, hidden=64, steps=12, batch=16, features=32)
    for name in ("W", "R"):
        feeds[name] *= 0.125
    got = cyloop.load(rnn_loop_model(), driver="cython").run(feeds)
    expected = cyloop.load(rnn_loop_model(), driver="python").run(feeds)
    same = all(np.allclose(got[k], v, rtol=1e-5, atol=1e-6) for k, v in expected.items())
    print(before, inside, threads(), same, gemm.blas_candidate())
""")


@bound
@pytest.mark.skipif(cores_available() < 2 or os.environ.get("OPENBLAS_NUM_THREADS") == "1",
                    reason="BLAS has one thread here: no narrower affinity to hold it to")
@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no affinity on this platform")
def test_blas_is_held_to_an_affinity_narrowed_after_it_loaded():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    result = subprocess.run([sys.executable, "-c", _NARROWED, root], capture_output=True,
                            text=True, timeout=300, check=True)
    before, inside, after, same, name = result.stdout.split(maxsplit=4)
    if int(before) < 2:
        pytest.skip("BLAS sized itself to one thread here")
    assert (int(inside), int(after), same, name.strip()) == (1, int(before), "True",
                                                              "on one core")

