"""Build store.kernel._kernel from store/kernel/c/*.c with AddressSanitizer + UBSan into a directory.

The same sources and the same entry points as the installed extension (pyproject.toml's ext-modules),
compiled with `-fsanitize=address,undefined -fno-sanitize-recover=all`: any out-of-bounds access or
undefined behaviour aborts the process with a report. Such a module must run in a Python started with
the ASan runtime preloaded (`sanitizer_env`): ASan has to be the first library loaded.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sysconfig

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOURCES_DIR = os.path.join(REPO_ROOT, "store", "kernel", "c")
SANITIZE_FLAGS = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all",
                  "-fno-omit-frame-pointer"]


def compiler() -> str | None:
    """The C compiler to use (CC, else gcc on PATH), or None when there is none."""
    return shutil.which(os.environ.get("CC", "gcc"))


def build(out_dir: str, *, sources_dir: str = SOURCES_DIR) -> str:
    """Compile the sanitized extension into `out_dir`; returns the path of the shared object.
    Raises RuntimeError with the compiler's output when the build fails."""
    cc = compiler()
    if cc is None:
        raise RuntimeError("no C compiler (set CC or install gcc)")
    sources = sorted(glob.glob(os.path.join(sources_dir, "*.c")))
    target = os.path.join(out_dir, "_kernel" + sysconfig.get_config_var("EXT_SUFFIX"))
    # RMQ_CRC_NO_ZLIB: CRC-32 in the instrumented C tables, not in the system libz (not instrumented).
    command = [cc, "-shared", "-fPIC", "-O1", "-g", "-std=c11", "-Wall", "-Wextra", "-DRMQ_CRC_NO_ZLIB",
               "-Wno-unused-parameter", *SANITIZE_FLAGS, "-I", sysconfig.get_paths()["include"],
               *sources, "-o", target, "-ldl"]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)}\n{done.stdout}{done.stderr}")
    return target


def runtime_library(name: str) -> str | None:
    """The path of the compiler's sanitizer runtime `name` (libasan.so), or None when absent."""
    cc = compiler()
    if cc is None:
        return None
    path = subprocess.run([cc, f"-print-file-name={name}"], capture_output=True,
                          text=True).stdout.strip()
    return path if os.path.isabs(path) and os.path.exists(path) else None


def sanitizer_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment to run the sanitized module in: ASan preloaded, Python's small-object allocator
    off (so every bytes object is its own malloc block with red zones around it), leaks not reported
    (the interpreter keeps its objects at exit), and the first report aborts."""
    asan = runtime_library("libasan.so")
    if asan is None:
        raise RuntimeError("the compiler has no libasan.so")
    env = dict(os.environ if base is None else base)
    env.update({
        "LD_PRELOAD": asan,
        "PYTHONMALLOC": "malloc",
        "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=1:halt_on_error=1:quarantine_size_mb=64:"
                        "malloc_context_size=10:"
                        # the group commit's waiters live on their producers' stacks
                        "detect_stack_use_after_return=1",
        "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1",
        "RMQ_KERNEL": "python",        # store.kernel keeps to its twins; the driver loads the build
        "PYTHONFAULTHANDLER": "1",     # the Python stack too when a report aborts
    })
    return env
