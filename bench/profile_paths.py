"""Where the time goes: cProfile of the put path and of the dispatch (reput) path, separately.

The store is opened with its services stopped, so the puts run without the reput thread competing for
the GIL; then one synchronous `do_reput()` dispatches everything (consume queues + index). Prints the
top functions by own time (tottime) with their share of the profiled total, and by cumulative time.

    python -m bench.profile_paths [--size smoke|full] [--body 1024] [--batch 1]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time

from bench import common


def top_lines(profile: cProfile.Profile, key: str, limit: int) -> list[str]:
    stats = pstats.Stats(profile, stream=io.StringIO())
    total = stats.total_tt
    rows = []
    for (path, line, func), (_cc, calls, tottime, cumtime, _callers) in stats.stats.items():
        rows.append((tottime if key == "tottime" else cumtime, calls, tottime, cumtime,
                     f"{path.replace(common.REPO_ROOT + '/', '')}:{line}({func})"))
    rows.sort(reverse=True)
    out = ["| function | calls | own s | own % | cumulative s | cumulative % |", "|---|---|---|---|---|---|"]
    for _, calls, tottime, cumtime, name in rows[:limit]:
        out.append(f"| `{name}` | {calls:,} | {tottime:.3f} | {100 * tottime / total:.1f} | "
                   f"{cumtime:.3f} | {100 * cumtime / total:.1f} |")
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=("smoke", "full"), default="full")
    parser.add_argument("--body", type=int, default=1024)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args(argv)
    if common.REPO_ROOT not in sys.path:
        sys.path.insert(0, common.REPO_ROOT)
    from store.message_store import MessageStore
    count = 512 if args.size == "smoke" else 20_000
    messages = common.make_messages(count, args.body)
    with common.scratch_dir(args, "profile") as root:
        store = MessageStore.open(common.store_config(root), start_services=False)
        try:
            put_profile = cProfile.Profile(time.process_time)   # CPU time: robust to a busy machine
            started = time.perf_counter()
            put_profile.enable()
            if args.batch == 1:
                for message in messages:
                    store.put_message(message)
            else:
                for first in range(0, count, args.batch):
                    group = messages[first:first + args.batch]
                    queue_id = group[0].queue_id
                    from store.api import Message
                    store.put_messages([Message(m.topic, m.body, queue_id, m.tags, m.keys, m.properties)
                                        for m in group])
            put_profile.disable()
            put_s = time.perf_counter() - started
            dispatch_profile = cProfile.Profile(time.process_time)
            started = time.perf_counter()
            dispatch_profile.enable()
            dispatched = store.services.reput.do_reput()
            dispatch_profile.disable()
            dispatch_s = time.perf_counter() - started
            assert dispatched == count, (dispatched, count)
        finally:
            store.close()
    print(f"# Profile: {count:,} puts of {args.body} B (batch {args.batch}), then dispatch\n")
    print(f"Put path: {put_s:.2f} s under cProfile ({count / put_s:,.0f} msg/s profiled).\n")
    print("\n".join(["By own time:", ""] + top_lines(put_profile, "tottime", args.top)))
    print("\n".join(["", "By cumulative time:", ""] + top_lines(put_profile, "cumtime", args.top // 2)))
    print(f"\nDispatch path: {dispatch_s:.2f} s under cProfile ({count / dispatch_s:,.0f} msg/s "
          f"profiled).\n")
    print("\n".join(["By own time:", ""] + top_lines(dispatch_profile, "tottime", args.top)))
    print("\n".join(["", "By cumulative time:", ""] + top_lines(dispatch_profile, "cumtime",
                                                                 args.top // 2)))


if __name__ == "__main__":
    main()
