"""Build the Cython core (`cyloop.engine._core`); everything else is plain Python.

`CYLOOP_DEBUG_CYTHON=1` turns bounds checks, wraparound and division checks back on.
"""

import os

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

DEBUG = os.environ.get("CYLOOP_DEBUG_CYTHON", "") not in ("", "0")

COMPILER_DIRECTIVES = {
    "language_level": 3,
    "boundscheck": DEBUG,
    "wraparound": DEBUG,
    "cdivision": not DEBUG,
    "initializedcheck": DEBUG,
    "embedsignature": True,
}

extensions = [
    Extension(
        "cyloop.engine._core",
        ["cyloop/engine/_core.pyx"],
        include_dirs=[numpy.get_include(), "include"],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        extra_compile_args=["-O2"] if not DEBUG else ["-O0", "-g"],
    )
]

setup(ext_modules=cythonize(extensions, compiler_directives=COMPILER_DIRECTIVES))
