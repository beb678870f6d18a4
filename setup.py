"""Build the optional compiled kernel (store/_kernel.c); everything else is in pyproject.toml.

`optional=True`: without a C compiler the install still succeeds and store/kernel.py uses its
pure-Python twins (same answers, slower). `.ci/run` sets RMQ_REQUIRE_KERNEL=1 so CI fails instead.
The CRC comes from zlib when its header is installed (about twice as fast), else from the kernel's
own slicing-by-8 tables.
"""

import os
import sysconfig

from setuptools import Extension, setup


def _has_zlib_header() -> bool:
    candidates = ["/usr/include", "/usr/local/include", sysconfig.get_paths()["include"]]
    return any(os.path.exists(os.path.join(directory, "zlib.h")) for directory in candidates)


ZLIB = _has_zlib_header()

setup(ext_modules=[Extension(
    "store._kernel", ["store/_kernel.c"],
    define_macros=[("RMQ_HAVE_ZLIB", "1")] if ZLIB else [],
    libraries=["z"] if ZLIB else [],
    extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter"],
    optional=True)])
