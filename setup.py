"""Build the optional compiled kernel (store/_kernel.c); everything else is in pyproject.toml.

`optional=True`: without a C compiler the install still succeeds and store/kernel.py uses its
pure-Python twins (same answers, slower). `.ci/run` sets RMQ_REQUIRE_KERNEL=1 so CI fails instead.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("store._kernel", ["store/_kernel.c"],
                             extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter"],
                             optional=True)])
