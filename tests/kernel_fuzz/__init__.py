"""The native kernel's fuzz harness: the extension built with AddressSanitizer + UBSan, driven by a
mutator in Python (see driver.py), run by tests/test_kernel_fuzz.py. build.py compiles it in a temp
directory; make_corpus.py (re)writes the seed corpus tests/data/kernel_corpus/ from the fixtures."""
