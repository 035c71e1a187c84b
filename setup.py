"""Build the Cython core (`cyloop.engine._core`), the functional API's step loops
(`cyloop.engine._steps`), the products on two cores (`cyloop.accel._two_core`), a recurrent
step's gate passes (`cyloop.accel._gate_passes`), pairwise squared distances
(`cyloop.accel._distances`) and a TopK's selection (`cyloop.accel._selection`); everything else
is plain Python.

`CYLOOP_DEBUG_CYTHON=1` turns bounds checks, wraparound and division checks back on.
The sdist holds the tests, the headers, the benchmarks, the docs and the CI script as well as the
package (its tests run from the unpacked sdist after `pip install -e ".[test]"`), never generated
C.
"""

import os
from pathlib import Path

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.sdist import sdist

SDIST_TREES = ("include", "tests", "asv_benchmarks/benchmarks", ".ci", "docs")
SDIST_FILES = ("asv_benchmarks/asv.conf.json", "asv_benchmarks/compare.py")
GENERATED = ("cyloop/engine/_core.c", "cyloop/engine/_core.html", "cyloop/engine/_steps.c",
             "cyloop/engine/_steps.html", "cyloop/accel/_two_core.c", "cyloop/accel/_two_core.html",
             "cyloop/accel/_gate_passes.c", "cyloop/accel/_gate_passes.html",
             "cyloop/accel/_distances.c", "cyloop/accel/_distances.html",
             "cyloop/accel/_selection.c", "cyloop/accel/_selection.html")


class SDist(sdist):
    """The default sdist plus SDIST_TREES and SDIST_FILES, less GENERATED and bytecode (setuptools
    lists the files in egg_info; they are added to that list here, before the archive is made)."""

    def make_distribution(self):
        files = set(self.filelist.files) - set(GENERATED)
        for tree in SDIST_TREES:
            files.update(str(path) for path in Path(tree).rglob("*")
                         if path.is_file() and "__pycache__" not in path.parts
                         and path.suffix not in (".pyc", ".so"))
        files.update(SDIST_FILES)
        self.filelist.files = sorted(files)
        super().make_distribution()

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
        name,
        [source],
        include_dirs=[numpy.get_include(), "include"],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        extra_compile_args=["-O2"] if not DEBUG else ["-O0", "-g"],
    )
    for name, source in (("cyloop.engine._core", "cyloop/engine/_core.pyx"),
                         ("cyloop.engine._steps", "cyloop/engine/_steps.pyx"),
                         ("cyloop.accel._two_core", "cyloop/accel/_two_core.pyx"),
                         ("cyloop.accel._gate_passes", "cyloop/accel/_gate_passes.pyx"),
                         ("cyloop.accel._distances", "cyloop/accel/_distances.pyx"),
                         ("cyloop.accel._selection", "cyloop/accel/_selection.pyx"))
]

setup(ext_modules=cythonize(extensions, compiler_directives=COMPILER_DIRECTIVES),
      cmdclass={"sdist": SDist})
