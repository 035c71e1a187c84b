"""The native acceleration of the numpy kernels: what runs a kernel's work other than through
numpy's public calls, each path checked where it is used and declined where it does not apply
(`native`), with the values numpy's calls give.

- `gemm`: a product by a weight in the fastest of its formulations, on one core or two;
- `_two_core` (Cython, include/cyloop/two_core.h): a product cut in pieces that this thread and
  a helper thread take in turn, each a call of numpy's bundled BLAS (`blas` finds it);
- `_gate_passes` (Cython): a recurrent step's gate passes on numpy's own ufunc inner loops;
- `fused`: the kernels of the nodes the engine's fusion makes (engine/fuse.py);
- `measured`: choices between equivalent formulations, timed where they run;
- `aligned`: weights on a 64-byte boundary.
"""
