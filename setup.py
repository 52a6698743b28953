"""Builds the Cython extensions of the matcher; everything else is in pyproject.toml."""

import os
from glob import glob

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

# CAESAR_DEBUG=1 turns bounds checks on (CI builds can use it to catch indexing bugs).
DEBUG = os.environ.get("CAESAR_DEBUG") == "1"

extensions = [
    Extension(
        os.path.relpath(path, "src")[:-4].replace(os.sep, "."),
        [path],
        include_dirs=[numpy.get_include()],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        extra_compile_args=["-O3"] if not DEBUG else ["-O0", "-g"],
    )
    for path in sorted(glob("src/caesar/**/*.pyx", recursive=True))
]

# Both steps use every core: the engine's C is large and a clean CI builds it.
JOBS = os.cpu_count() or 1

# scripts/setup.sh compiles in place first (that also leaves build/ to the
# wheel build), then installs editable with this set: no second compile.
BUILT_IN_PLACE = os.environ.get("CAESAR_BUILT_IN_PLACE") == "1"

setup(
    options={"build_ext": {"parallel": JOBS}},
    ext_modules=[] if BUILT_IN_PLACE else cythonize(
        extensions,
        language_level="3",
        compiler_directives={
            "boundscheck": DEBUG,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": DEBUG,
        },
        nthreads=JOBS,
    ),
)
