"""Planning a pull: which units of a window of consume-queue units a `get_message` takes.

RocketMQ's scan rules (spec §10.1-10.2) on a whole window at once: the transfer limits (count and bytes,
in memory or on disk), the caller's byte cap, tag filters and expired records. `_plan_unfiltered` plans
the common unfiltered pull on tuples, `_plan_window` a tag-filtered one with numpy, `_plan_scan` the
general case; store/commitlog/read_path.py reads the planned records and falls back to its unit-by-unit loop
wherever a plan cannot prove RocketMQ's answer (tests/test_read_path.py checks them against it).
"""

from __future__ import annotations

import struct
import sys
from dataclasses import dataclass
from operator import itemgetter

import numpy as np

_LIST_REDUCE_MAX = 256      # _plan_window reduces over Python lists below this many units
_UNIT_STRUCTS: dict[int, struct.Struct] = {}
# A unit with the low 32 bits of tagsCode as their own field (Java's (int) cast for free), read
# as a native unsigned int: compared with the tag hashes' bytes read the same way, no byte swap.
_PULL_DTYPE = np.dtype({"names": ["phy_offset", "size", "tags_low"],
                        "formats": [">i8", ">i4", "=u4"], "offsets": [0, 8, 16], "itemsize": 20})
_RAW_CODES: dict = {}   # hash codes of a filter -> the same as numpy scalars of "tags_low"


def _raw_codes(hash_codes: frozenset) -> tuple:
    raw = _RAW_CODES.get(hash_codes)
    if raw is None:
        if len(_RAW_CODES) >= 1024:
            _RAW_CODES.clear()
        raw = _RAW_CODES[hash_codes] = tuple(
            np.uint32(int.from_bytes((code & 0xFFFFFFFF).to_bytes(4, "big"), sys.byteorder))
            for code in sorted(hash_codes))
    return raw


@dataclass(frozen=True)
class TransferLimits:
    max_transfer_bytes_in_memory: int = 262144
    max_transfer_count_in_memory: int = 32
    max_transfer_bytes_in_disk: int = 65536
    max_transfer_count_in_disk: int = 8
    access_message_in_memory_max_ratio: int = 40
    physical_memory_bytes: int = 0


def _is_batch_full(size: int, max_msg_nums: int, buffer_total: int, message_total: int,
                   in_disk: bool, limits: TransferLimits, max_total_bytes: int | None) -> bool:
    if buffer_total == 0 or message_total == 0:
        return False
    if max_msg_nums <= message_total:
        return True
    if max_total_bytes is not None and buffer_total + size > max_total_bytes:
        return True
    if in_disk:
        return (buffer_total + size > limits.max_transfer_bytes_in_disk or
                message_total > limits.max_transfer_count_in_disk - 1)
    return (buffer_total + size > limits.max_transfer_bytes_in_memory or
            message_total > limits.max_transfer_count_in_memory - 1)


def _unit_struct(count: int) -> struct.Struct:
    """A Struct unpacking `count` units at once (count <= SMALL_WINDOW_UNITS: a bounded cache)."""
    unpacker = _UNIT_STRUCTS.get(count)
    if unpacker is None:
        unpacker = _UNIT_STRUCTS[count] = struct.Struct(">" + "qiq" * count)
    return unpacker


def _plan_unfiltered(phys, sizes, max_msg_nums, limits, max_total_msg_size, commit_log_max,
                     in_memory_bytes) -> int | None:
    """How many units an unfiltered scan takes (= scans), when that is cheap to prove; else None.

    Without a filter every unit scanned is taken, so the scan stops at the first unit whose
    check "is the batch full?" says yes. When all units sit on the same side of the in-memory
    line, the count limit is one number; when the sizes are positive and the taken ones fit in
    the byte limit together, no byte limit fires before it.
    """
    if commit_log_max - min(phys) <= in_memory_bytes:
        limit_bytes = limits.max_transfer_bytes_in_memory
        limit_count = limits.max_transfer_count_in_memory
    elif commit_log_max - max(phys) > in_memory_bytes:
        limit_bytes = limits.max_transfer_bytes_in_disk
        limit_count = limits.max_transfer_count_in_disk
    else:
        return None
    if max_total_msg_size is not None and max_total_msg_size < limit_bytes:
        limit_bytes = max_total_msg_size
    wanted = min(limit_count, max_msg_nums)
    taken = len(phys)
    if wanted < taken:
        taken = max(1, wanted)
    if taken > 1:
        if taken < len(sizes):
            sizes = sizes[:taken]
        if min(sizes) <= 0 or sum(sizes) > limit_bytes:
            return None
    return taken


def _plan_window(data, count, max_msg_nums, hash_codes, limits, max_total_msg_size,
                 commit_log_max, in_memory_bytes):
    """(phys, sizes of the taken units, scanned, max_phy_pulling, the taken units' indices in
    the window) in a few numpy steps, when that is cheap to prove; else None (then `_plan_scan`
    decides).

    The reasoning of `_plan_unfiltered`, with a filter: if every unit up to the one that ends
    the scan lies on one side of the in-memory line, the count limit ends the scan at the unit
    after the k-th accepted one, and no byte limit fires before it if the sizes are positive and
    the accepted bytes plus the largest unit fit in the byte limit. The scanned part is usually
    a few dozen units: reductions over Python lists cost less than numpy calls then.
    """
    # Over 60 lines on purpose: every filtered pull runs it; helpers for its steps cost 1-2% a pull.
    if count == 0:
        return None
    units = np.frombuffer(data, _PULL_DTYPE)
    if hash_codes is None:
        accepted = None
    else:
        tags = units["tags_low"]
        codes = _raw_codes(hash_codes)
        matches = tags == codes[0]
        for code in codes[1:]:   # "TagA || TagB": a few tags (np.isin costs ~50x more)
            matches |= tags == code
        accepted = matches.nonzero()[0]
    phy_column = units["phy_offset"]
    for in_disk in (False, True):
        if in_disk:
            limit_bytes = limits.max_transfer_bytes_in_disk
            limit_count = limits.max_transfer_count_in_disk
        else:
            limit_bytes = limits.max_transfer_bytes_in_memory
            limit_count = limits.max_transfer_count_in_memory
        wanted = max(min(max_msg_nums, limit_count), 1)
        if accepted is None:
            scanned = min(count, wanted)
            taken = list(range(scanned))
        elif len(accepted) >= wanted:
            taken = accepted[:wanted].tolist()
            scanned = taken[-1] + 1
        else:
            taken = accepted.tolist()
            scanned = count
        # The units whose side of the line matters: the scanned ones and the one that ends it.
        if scanned < _LIST_REDUCE_MAX:
            phys = phy_column[:scanned + 1].tolist()
            extreme = max(phys) if in_disk else min(phys)
        else:
            phys = phy_column
            extreme = int(phys[:scanned + 1].max() if in_disk else phys[:scanned + 1].min())
        if in_disk:
            if commit_log_max - extreme <= in_memory_bytes:
                return None
        elif commit_log_max - extreme > in_memory_bytes:
            continue
        break
    if not taken:
        return [], [], scanned, int(phy_column[scanned - 1]), taken
    # Units after the first taken one could hit a byte limit: none may push the taken bytes over
    # it (with positive sizes, the taken bytes before any unit are at most all the taken bytes).
    check_bytes = scanned > taken[0] + 1
    if max_total_msg_size is not None and max_total_msg_size < limit_bytes:
        limit_bytes = max_total_msg_size
    if scanned < _LIST_REDUCE_MAX:
        sizes = units["size"][:scanned].tolist()
        if len(taken) == 1:
            taken_phys, taken_sizes = [phys[taken[0]]], [sizes[taken[0]]]
        else:
            pick = itemgetter(*taken)
            taken_phys, taken_sizes = list(pick(phys)), list(pick(sizes))
        if check_bytes and (min(sizes) <= 0 or sum(taken_sizes) + max(sizes) > limit_bytes):
            return None
    else:
        sizes = units["size"][:scanned]
        taken_phys, taken_sizes = phys[taken].tolist(), sizes[taken].tolist()
        if check_bytes and (int(sizes.min()) <= 0 or
                            sum(taken_sizes) + int(sizes.max()) > limit_bytes):
            return None
    return taken_phys, taken_sizes, scanned, int(phy_column[scanned - 1]), taken


def _plan_scan(units, max_msg_nums, tag_filter, limits, max_total_msg_size, commit_log_max,
               in_memory_bytes):
    """The units a 4.9.7 scan takes, and how many it counts as scanned, computed with numpy.

    Before each unit the scan asks "is the batch full?" (given the messages taken so far and this
    unit's size and whether its data is on disk); the first "yes" ends the scan without counting
    that unit. Units the tag filter rejects are counted but not taken.
    """
    sizes = units["size"].astype(np.int64)
    count = len(sizes)
    if tag_filter.hash_codes is None:
        accepted = np.ones(count, dtype=bool)
    else:
        as_int32 = units["tags_code"].astype(np.int64).astype(np.int32)   # Java's (int) cast
        accepted = np.isin(as_int32, np.fromiter(tag_filter.hash_codes, dtype=np.int32))
    taken_before = np.cumsum(accepted) - accepted
    bytes_before = np.cumsum(np.where(accepted, sizes, 0)) - np.where(accepted, sizes, 0)
    in_disk = (commit_log_max - units["phy_offset"].astype(np.int64)) > in_memory_bytes
    limit_bytes = np.where(in_disk, limits.max_transfer_bytes_in_disk,
                           limits.max_transfer_bytes_in_memory)
    limit_count = np.where(in_disk, limits.max_transfer_count_in_disk,
                           limits.max_transfer_count_in_memory)
    full = (max_msg_nums <= taken_before) | (bytes_before + sizes > limit_bytes) | \
        (taken_before > limit_count - 1)
    if max_total_msg_size is not None:
        full |= bytes_before + sizes > max_total_msg_size
    full &= taken_before > 0
    stops = np.flatnonzero(full)
    scanned = int(stops[0]) if stops.size else count
    taken = np.flatnonzero(accepted[:scanned]).tolist()
    return taken, scanned
