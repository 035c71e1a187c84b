"""Loop graphs several test modules run."""

import numpy as np

from cyloop.ir import CarriedInput, ConcatOutput, GraphBuilder, LastOutput

__all__ = ["keep_going", "nested"]


def keep_going(body, i, n, name):
    """The condition result of a loop of n iterations (i < n - 1); n None: always true."""
    if n is None:
        return body.node("Identity", body.const(np.bool_(True)), outputs=[name])
    return body.node("Less", i, body.const(np.int64(n - 1)), outputs=[name])


def nested(outer, inner, by_condition):
    """An outer loop of `outer` iterations, each running an inner loop of `inner` iterations
    that adds 1 to a carried count; the outer loop emits the count after each inner loop.
    `by_condition`: each loop stops by its condition result (its length is not known before it
    runs; None: it never stops), else by its trip count. Runs outer + outer * inner iterations.
    The inner loop's label names 'counted', the outer one's 'total'."""
    inner_body = GraphBuilder("inner_body")
    j = inner_body.input("j", np.int64, ())
    inner_body.input("j_cond", np.bool_, ())
    acc = inner_body.input("acc", np.int64, ())
    results = [inner_body.node("Add", acc, inner_body.const(np.int64(1)), outputs=["acc_next"])]
    if by_condition:
        results.insert(0, keep_going(inner_body, j, inner, "j_more"))
    inner_body.output(*results)

    outer_body = GraphBuilder("outer_body")
    i = outer_body.input("i", np.int64, ())
    outer_body.input("i_cond", np.bool_, ())
    count = outer_body.input("count", np.int64, ())
    outer_body.loop(inner_body.build(), inputs=[(count, CarriedInput(0, "acc", "acc_next"))],
                    outputs=[LastOutput("acc_next")],
                    trip_count=None if by_condition else inner, iteration_param="j",
                    cond_param="j_cond", cond_result="j_more" if by_condition else None,
                    output_names=["counted"])
    results = ["counted"]
    if by_condition:
        results.insert(0, keep_going(outer_body, i, outer, "i_more"))
    outer_body.output(*results)

    g = GraphBuilder()
    g.input("acc0", np.int64, ())
    g.loop(outer_body.build(), inputs=[("acc0", CarriedInput(0, "count", "counted"))],
           outputs=[LastOutput("counted"), ConcatOutput("counted")],
           trip_count=None if by_condition else outer, iteration_param="i", cond_param="i_cond",
           cond_result="i_more" if by_condition else None, output_names=["total", "totals"])
    g.output("total", "totals")
    return g.build(), {"acc0": np.array(0, np.int64)}
