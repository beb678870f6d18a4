"""`pull_unfiltered` (C: c/pull.c): the common unfiltered pull planned, sliced and checked in one call.

No Python twin here: store/commitlog/read_path.py's Python path is its twin. The C answers only when
it is sure to give that path's answer and says None otherwise (then the Python path runs); None
here when the kernel is not compiled. tests/test_kernel_pull.py compares both paths' results.
"""

from __future__ import annotations

from store.kernel import COMPILED, _native

pull_unfiltered = _native.pull_unfiltered if COMPILED else None
