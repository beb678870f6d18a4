"""Scenario 5, Topic count: 8 -> 16,384 queues (topics of 8 queues each), with the file and the RocksDB
consume queues. Per point: put rate, end-to-end indexed rate and the dispatch lag when the last put
returned, pull rate (every queue to its end), time-lookup latency, open time after a clean shutdown,
recovery time (abnormal: the `abort` file is put back before opening), number of files.

Reference: `topics DIR shared N TOTAL_MB 500` (C, RocketMQ's layout: one shared log plus one index file
per partition, flushed every 500 ms like our flushIntervalCommitLog), the same number of 1 KiB records.

Writes docs/bench/topic_count.html (plotly) and a PNG next to it when kaleido can render one.

    python -m bench.topic_count [--size smoke|full]
"""

from __future__ import annotations

import math
import os
import random
import statistics
import time

from bench import common

BACKENDS = ("default", "defaultRocksDB")
BODY_BYTES = 1024
QUEUES_PER_TOPIC = 8
DOCS_DIR = os.path.join(common.REPO_ROOT, "docs", "bench")


def _queue_list(queue_count: int) -> list[tuple[str, int]]:
    return [(f"T{t:05d}", q) for t in range(max(1, queue_count // QUEUES_PER_TOPIC))
            for q in range(min(QUEUES_PER_TOPIC, queue_count))]


def one_point(args, backend: str, queue_count: int, count: int) -> dict:
    from store.api import Message
    from store.meta.lockfile import create_abort
    from store.message_store import MessageStore
    queues = _queue_list(queue_count)
    template = common.make_messages(count, BODY_BYTES, queues=1)
    messages = [Message(queues[n % len(queues)][0], m.body, queue_id=queues[n % len(queues)][1],
                        tags=m.tags, keys=m.keys, properties=m.properties)
                for n, m in enumerate(template)]
    out = {}
    with common.scratch_dir(args, f"topics-{backend}-{queue_count}") as root:
        config = common.store_config(root, store_type=backend)
        store = MessageStore.open(config)
        try:
            common.settle_heap()
            started = time.perf_counter()
            for message in messages:
                result = store.put_message(message)
                assert result.ok, result.error
            put_s = time.perf_counter() - started
            out["dispatch_lag_bytes"] = store.dispatch_behind_bytes()
            common.wait_dispatched(store)
            indexed_s = time.perf_counter() - started
            out["put"] = count / put_s
            out["indexed"] = count / indexed_s
            out["dispatch_lag_s"] = indexed_s - put_s
            pulled, started = 0, time.perf_counter()
            for topic, queue_id in queues:
                offset = 0
                for _ in range(count + 1):
                    result = store.get_message("bench", topic, queue_id, offset, 32)
                    pulled += len(result.messages)
                    if result.next_begin_offset <= offset:
                        break
                    offset = result.next_begin_offset
            out["pull"] = pulled / (time.perf_counter() - started)
            assert pulled == count, (pulled, count)
            rng = random.Random(7)
            now_ms = int(time.time() * 1000)
            lat = []
            for _ in range(200):
                topic, queue_id = rng.choice(queues)
                before = time.perf_counter()
                store.get_offset_in_queue_by_time(topic, queue_id, now_ms - rng.randrange(5000))
                lat.append((time.perf_counter() - before) * 1e6)
            out["time_p50_us"] = common.percentile(lat, 50)
            out["time_p99_us"] = common.percentile(lat, 99)
        finally:
            store.close()
        out["files"] = common.count_files(root)
        started = time.perf_counter()
        store = MessageStore.open(config)
        out["open_s"] = time.perf_counter() - started
        style = store.style
        store.close()
        create_abort(root, style)
        started = time.perf_counter()
        store = MessageStore.open(config)
        out["recovery_s"] = time.perf_counter() - started
        out["recovery_mode"] = store.recovery_report.mode
        store.close()
    return out


def reference_point(args, queue_count: int, count: int) -> float | None:
    total_mb = max(1, math.ceil(count * 1024 / (1 << 20)))
    with common.scratch_dir(args, "topics-c") as root:
        out = common.run_reference("topics", [root, "shared", queue_count, total_mb, 500])
    return None if out is None else out["rec_per_s"]


METRICS = (("put", "put rate", "msg/s"), ("indexed", "end-to-end indexed", "msg/s"),
           ("dispatch_lag_s", "dispatch lag after last put", "s"), ("pull", "pull rate", "msg/s"),
           ("time_p50_us", "time lookup p50", "us"), ("time_p99_us", "time lookup p99", "us"),
           ("open_s", "open (clean)", "s"), ("recovery_s", "open after crash (abort file)", "s"),
           ("files", "files in store", "files"))


def run(args, report: common.Report) -> None:
    counts = (8, 32) if args.size == "smoke" else (8, 256, 4096, 16384)
    count = 128 if args.size == "smoke" else 24_576
    reps = common.reps_for(args, full=1)   # one 16,384-queue file-CQ point takes minutes
    points: dict[tuple[str, int], list[dict]] = {}
    refs: dict[int, list[float]] = {}
    for queue_count in counts:
        fns = {backend: (lambda b=backend: one_point(args, b, queue_count, count)) for backend in BACKENDS}
        fns["reference"] = lambda: reference_point(args, queue_count, count)
        results = common.interleaved(reps, fns)
        refs[queue_count] = [r for r in results["reference"] if r is not None]
        for backend in BACKENDS:
            points[(backend, queue_count)] = results[backend]
            for key, label, unit in METRICS:
                reference = refs[queue_count] if key == "put" else None
                report.add(f"{backend} {queue_count} queues", label, unit,
                           [r[key] for r in results[backend]], reference or None,
                           reference_name="C topics shared" if reference else None,
                           higher_is_better=unit in ("msg/s",))
        print(f"  {queue_count} queues done", flush=True)
    for backend in BACKENDS:
        first = statistics.median(r["indexed"] for r in points[(backend, counts[0])])
        last = statistics.median(r["indexed"] for r in points[(backend, counts[-1])])
        row = report.add(f"{backend} {counts[-1]} vs {counts[0]} queues",
                         "indexed throughput ratio", "x", [last / first])
        if backend == "defaultRocksDB":
            report.goal(row, ">= 0.9x at 16,384 queues", counts[-1] == 16384 and last / first >= 0.9)
        else:
            lag = max(r["dispatch_lag_s"] for r in points[(backend, counts[-1])])
            report.goal(row, "dispatch not minutes behind", lag < 60)
    report.notes.append(f"{count:,} single puts of {BODY_BYTES} B per point, round-robin over the queues "
                        f"(topics of {QUEUES_PER_TOPIC} queues), fresh store per repetition.")
    report.notes.append(write_figure(counts, points, refs, args.size))


def write_figure(counts, points, refs, size: str) -> str:
    try:
        import plotly.graph_objects as go
        from plotly.subplots import make_subplots
    except ImportError:
        return "figure not written: plotly is not installed"
    panels = (("indexed", "end-to-end indexed msg/s"), ("put", "put msg/s"), ("pull", "pull msg/s"),
              ("time_p99_us", "time lookup p99 us"), ("open_s", "open s"), ("files", "files"))
    fig = make_subplots(rows=2, cols=3, subplot_titles=[title for _, title in panels])
    for index, (key, _title) in enumerate(panels):
        row, col = index // 3 + 1, index % 3 + 1
        for backend, color in zip(BACKENDS, ("#1f77b4", "#d62728")):
            ys = [statistics.median(r[key] for r in points[(backend, q)]) for q in counts]
            fig.add_trace(go.Scatter(x=list(counts), y=ys, name=backend, legendgroup=backend,
                                     showlegend=index == 0, line={"color": color}), row=row, col=col)
        if key == "put" and any(refs.values()):
            ys = [statistics.median(refs[q]) if refs[q] else None for q in counts]
            fig.add_trace(go.Scatter(x=list(counts), y=ys, name="C topics (shared log)",
                                     line={"dash": "dot", "color": "gray"}), row=row, col=col)
        fig.update_xaxes(type="log", title_text="queues", row=row, col=col)
    fig.update_layout(title=f"Topic count: 8 -> {counts[-1]:,} queues ({size})", height=700, width=1200)
    if size != "full":
        return "figure: written for --size full only (smoke runs must not touch docs/)"
    os.makedirs(DOCS_DIR, exist_ok=True)
    suffix = "" if size == "full" else f"_{size}"
    html = os.path.join(DOCS_DIR, f"topic_count{suffix}.html")
    fig.write_html(html, include_plotlyjs="cdn")
    try:
        fig.write_image(os.path.join(DOCS_DIR, f"topic_count{suffix}.png"))
        return f"figure: {os.path.relpath(html, common.REPO_ROOT)} and the .png next to it"
    except Exception as error:   # kaleido missing or no browser for it: the HTML is still there
        return f"figure: {os.path.relpath(html, common.REPO_ROOT)} (no PNG: {type(error).__name__})"


main = common.scenario_main("topic_count", __doc__.splitlines()[0], run)

if __name__ == "__main__":
    main()
