"""Render the tables of bench/results/<scenario>-<size>.json as Markdown (for docs/performance.md).

    python -m bench.report [--size full] > /tmp/tables.md
"""

from __future__ import annotations

import argparse
import json
import os

from bench import common
from bench.run_all import SCENARIOS


def render(size: str) -> str:
    lines = []
    for name in SCENARIOS:
        path = os.path.join(common.RESULTS_DIR, f"{name}-{size}.json")
        if not os.path.exists(path):
            lines += [f"## {name} ({size})", "", "No results (not run, skipped or failed).", ""]
            continue
        with open(path) as f:
            data = json.load(f)
        report = common.Report(name, size, data["command"], notes=data["notes"], skipped=data["skipped"])
        for row in data["rows"]:
            report.rows.append(common.Row(row["case"], row["metric"], row["unit"], row["ours"],
                                          row["reference"], row["reference_name"],
                                          row["higher_is_better"], row["goal"], row["goal_met"]))
        text = common.table_lines(report)
        text[2] = f"`{data['command']}` (engine at {data.get('engine_commit', '?')}, {data['host']['at']})"
        lines += text
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=("smoke", "full"), default="full")
    print(render(parser.parse_args().size))
