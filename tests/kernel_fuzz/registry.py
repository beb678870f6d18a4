"""The fuzz driver's target groups added by issue #17, one entry each.

`tests/kernel_fuzz/driver.py` runs the original targets (scan, place, encode, hashes, index put,
encode put) itself and hands the remaining share of its steps to one of the groups below, picked
uniformly. Each group is a function of the fuzzer; it runs one input through the C kernel and, where
the target compares, through the Python twin, counts itself in `fuzzer.executions` (and
`fuzzer.compared`), and raises `Disagreement` when the two differ.

A new native path adds its target module beside the others and one line here; the driver needs no
change.
"""
from __future__ import annotations

from tests.kernel_fuzz import (
    cq_keys_target, crc_target, decode_target, fixed_target, group_commit_target, groups_target,
    lookup_targets, pull_target, pull_window_target, prefault_target, put_batch_target,
    put_fast_target, query_target, result_target)
from tests.kernel_fuzz.edges import Disagreement, outcome


def _lookup(fuzzer) -> None:
    name = fuzzer.rng.choice(["index_select", "cq_search_nearest", "cq_nearest_queue",
                              "cq_search_boundary", "read_message", "query_keys", "query_message"])
    target = query_target if name.startswith("query_") else lookup_targets
    compared = getattr(target, name)(fuzzer)
    fuzzer.executions[name] += 1
    fuzzer.compared[name] += compared


def _put_batch(fuzzer) -> None:
    name = fuzzer.rng.choice(["encode_batch", "place_batch"])
    getattr(put_batch_target, name)(fuzzer, outcome, Disagreement)


GROUPS = {
    "lookup": _lookup,                                           # lookup_targets.py, query_target.py
    "decode": lambda fuzzer: decode_target.decode_records(fuzzer, outcome, Disagreement),
    "pull": lambda fuzzer: pull_target.pull_unfiltered(fuzzer, outcome, Disagreement),
    "crc": lambda fuzzer: crc_target.crc32(fuzzer, Disagreement),
    "put_batch": _put_batch,
    "pull_window": lambda fuzzer: pull_window_target.pull_window(fuzzer, outcome, Disagreement),
    "span_groups": lambda fuzzer: groups_target.span_groups(fuzzer, Disagreement),
    "found_result": lambda fuzzer: result_target.found_result(fuzzer, outcome, Disagreement),
    "fixed_columns": lambda fuzzer: fixed_target.fixed_columns(fuzzer, outcome, Disagreement),
    "put_fast": lambda fuzzer: put_fast_target.put_fast(fuzzer, outcome, Disagreement),
    "prefault": lambda fuzzer: prefault_target.prefault(fuzzer, outcome, Disagreement),
    "sync_range": lambda fuzzer: prefault_target.sync_range(fuzzer, outcome, Disagreement),
    "group_commit": lambda fuzzer: group_commit_target.group_commit(fuzzer, outcome, Disagreement),
    "cq_keys": lambda fuzzer: cq_keys_target.cq_keys(fuzzer, outcome, Disagreement),
}
"""Group name -> step function. decode_columns and walk_headers ride on the driver's scan target."""


def step(fuzzer) -> None:
    """Run one input through one group, picked uniformly."""
    GROUPS[fuzzer.rng.choice(tuple(GROUPS))](fuzzer)
