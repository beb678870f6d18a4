"""Scenario 8, Dashboard: time to first render of every page (streamlit's AppTest running app/main.py)
on a large store opened read-only through the sidebar, and the CPU used by a 1 Hz live refresh of the
Overview page (one full script run per second; CPU seconds of this process per wall second, so the
watchdog observer and the store's threads are counted too). Skipped, with a message, when streamlit or
app/main.py is absent.

Reference: the same pages on the small checked-in sample store (the hosted scratch copy the app opens
by default), so the ratio is "large store / sample store".

    python -m bench.dashboard [--size smoke|full]
"""

from __future__ import annotations

import os
import time

from bench import common
from bench.pull import build_store

MAIN = os.path.join(common.REPO_ROOT, "app", "main.py")
PAGES_DIR = os.path.join(common.REPO_ROOT, "pages")
PAGES = ["overview", "commitlog", "consumequeue", "index_files", "produce", "pull", "query",
         "recovery_lab", "health", "tour", "pipeline"]


def _visit_seconds(at, page: str) -> float:
    started = time.perf_counter()
    at.switch_page(f"../pages/{page}.py")
    at.run()
    seconds = time.perf_counter() - started
    if at.exception:
        raise RuntimeError(f"page {page}: {[e.value for e in at.exception][:1]}")
    return seconds


def _open_read_only(at, path: str) -> None:
    at.text_input(key="picker_path").input(path)
    at.radio(key="picker_mode").set_value("read-only")
    at.text_input(key="picker_props").input("")
    [b for b in at.button if b.label == "Open"][0].click()
    at.run()
    if at.exception:
        raise RuntimeError(f"open: {[e.value for e in at.exception][:1]}")


def run(args, report: common.Report) -> None:
    if not os.path.exists(MAIN):
        report.skipped = "app/main.py is not there yet"
        return
    try:
        from streamlit.testing.v1 import AppTest
    except ImportError:
        report.skipped = "streamlit is not installed"
        return
    pages = [p for p in PAGES if os.path.exists(os.path.join(PAGES_DIR, f"{p}.py"))]
    # full: 520,000 records of ~4.2 KiB = 2.2 GB, the "store of at least 2 GB".
    count, body_bytes = (1024, 1024) if args.size == "smoke" else (520_000, 4096)
    refresh_s = 2.0 if args.size == "smoke" else 10.0
    reps = common.reps_for(args)
    with common.scratch_dir(args, "dashboard") as root:
        build_store(root, count, body_bytes).close()
        store_bytes = common.dir_bytes(root)
        large: dict[str, list[float]] = {p: [] for p in pages}
        sample: dict[str, list[float]] = {p: [] for p in pages}
        cpu_share = []
        for rep in range(reps):
            at = AppTest.from_file(MAIN, default_timeout=600)
            at.run()
            for page in pages:                 # the default store: the sample's scratch copy
                sample[page].append(_visit_seconds(at, page))
            _open_read_only(at, root)
            for page in pages:
                large[page].append(_visit_seconds(at, page))
            _visit_seconds(at, "overview")
            cpu_before, wall_before = time.process_time(), time.perf_counter()
            next_tick = wall_before
            while time.perf_counter() - wall_before < refresh_s:
                at.run()
                next_tick += 1.0
                time.sleep(max(0.0, next_tick - time.perf_counter()))
            cpu_share.append((time.process_time() - cpu_before) / (time.perf_counter() - wall_before))
            from app.ui.state import get_registry
            get_registry().close_all()
            get_registry.clear()
    for page in pages:
        report.add(page, "first render", "s", large[page], sample[page],
                   reference_name="same page, sample store", higher_is_better=False)
    report.add("overview, 1 Hz rerun", "CPU share of one core", "%", [100 * c for c in cpu_share])
    report.notes.append(f"large store: {count:,} messages of {body_bytes:,} B in 8 queues "
                        f"({store_bytes / 1e9:.2f} GB on disk), opened read-only; the first visit of "
                        "each page is timed (AppTest, no browser).")


main = common.scenario_main("dashboard", __doc__.splitlines()[0], run)

if __name__ == "__main__":
    main()
