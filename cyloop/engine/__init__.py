"""The engine: everything that runs a compiled graph.

``compile.py`` turns a `Graph` into a flat schedule; ``destinations.py`` decides where each loop
value lives; ``hoist.py`` and ``chunks.py`` take state-independent body work out of loops;
``control.py`` runs If, SequenceMap and batched Scan; ``_core.pyx`` (Cython) and ``reference.py``
(pure Python, the oracle) are the two drivers; ``plan.py`` prints what they did; ``settings.py``
holds the settings and constants all of them read.
"""
