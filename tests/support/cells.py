"""The recurrent cells' equations as OpenVINO's opset documents them, step by step in numpy: the
oracle of the cell and sequence tests; and a spy on the cells' steps kernels."""

import numpy as np

__all__ = ["numpy_cells", "steps_spy"]


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


_NUMPY_ACTIVATIONS = {"sigmoid": _sigmoid, "tanh": np.tanh, "relu": lambda x: np.maximum(x, 0)}


def numpy_cells(cell, x, h0, c0, w, r, b, linear_before_reset=False, clip=0.0,
                 activations=None):
    """The cell equations in float64, step by step, as OpenVINO's opset documents them."""
    if activations is None:
        activations = {"lstm": ["sigmoid", "tanh", "tanh"], "gru": ["sigmoid", "tanh"],
                       "rnn": ["tanh"]}[cell]
    act = [_NUMPY_ACTIVATIONS[name] for name in activations]

    def clipped(v):
        return np.clip(v, -clip, clip) if clip else v

    h, c, hs = h0.astype(np.float64), None if c0 is None else c0.astype(np.float64), []
    hidden = h0.shape[-1]
    for t in range(x.shape[1]):
        xt = x[:, t].astype(np.float64)
        if cell == "lstm":
            f, i, g, o = np.split(clipped(xt @ w.T + h @ r.T + b), 4, axis=-1)
            c = act[0](f) * c + act[0](i) * act[1](g)
            h = act[0](o) * act[2](c)
        elif cell == "gru":
            xz, xr, xh = np.split(xt @ w.T, 3, axis=-1)
            rz, rr, rh = np.split(r, 3, axis=0)
            z = act[0](clipped(xz + h @ rz.T + b[:hidden]))
            reset = act[0](clipped(xr + h @ rr.T + b[hidden:2 * hidden]))
            if linear_before_reset:
                cand = act[1](clipped(xh + b[2 * hidden:3 * hidden]
                                      + reset * (h @ rh.T + b[3 * hidden:])))
            else:
                cand = act[1](clipped(xh + (reset * h) @ rh.T + b[2 * hidden:]))
            h = (1 - z) * cand + z * h
        else:
            h = act[0](clipped(xt @ w.T + h @ r.T + b))
        hs.append(h)
    return h, np.stack(hs, axis=1), c


def steps_spy(kernel_name, xs_at):
    """(spy, calls): `spy` calls the cells' steps kernel `kernel_name` (kernels/recurrent/cells.py,
    taking xs as its argument `xs_at` and `staged` last) and records each call in `calls` as
    (steps, staged, taken: not declined); a test puts it in the kernel's place."""
    from cyloop.kernels.recurrent import cells

    real, calls = getattr(cells, kernel_name), []

    def spy(*args):
        done = real(*args)
        calls.append((len(args[xs_at]), args[-1], done is not None))
        return done

    return spy, calls
