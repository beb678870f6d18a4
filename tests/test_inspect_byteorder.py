"""No big-endian numpy array leaves the inspection API (store/inspect/).

The files are big-endian and the codecs' dtypes say so (`>i8`, `>i4`); pandas, Arrow and Streamlit
refuse such columns ("Byte-swapped arrays not supported", the Tour's step-4 crash). Every output of
`StoreInspector` and of the raw dump functions is walked on every real RocketMQ fixture (copied first),
and every array and numpy scalar found must be in this machine's byte order.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from store import MessageStore
from store.inspect.live import native
from store.inspect.raw import dump_index_entries, dump_queue_units, dump_records
from tests.fixtures_util import copy_store, fixture_dirs, fixture_id, load_dump, store_config

MAX_RECORDS_WALKED = 300


def non_native(value, where: str = "") -> list[str]:
    """Paths of every non-native numpy array, dtype or scalar inside `value` (recursively)."""
    if isinstance(value, np.ndarray):
        return [] if value.dtype.isnative else [f"{where}: {value.dtype}"]
    if isinstance(value, np.generic):
        return [] if value.dtype.isnative else [f"{where}: {value.dtype}"]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [p for f in dataclasses.fields(value)
                for p in non_native(getattr(value, f.name), f"{where}.{f.name}")]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in non_native(v, f"{where}[{k!r}]")]
    if isinstance(value, (list, tuple)):
        return [p for i, v in enumerate(value) for p in non_native(v, f"{where}[{i}]")]
    return []


def test_native_swaps_big_endian_structured_arrays():
    big = np.array([(1, 2)], dtype=[("a", ">i8"), ("b", ">i4")])
    assert not big.dtype.isnative
    with pytest.raises((ValueError, pa.ArrowException, TypeError)):
        pa.array(big["b"])            # what the dashboard hit before the fix
    swapped = native(big)
    assert swapped.dtype.isnative and swapped.tolist() == [(1, 2)]
    assert pa.array(swapped["b"]).to_pylist() == [2]
    already = np.arange(3, dtype=np.int32)
    assert native(already) is already and native(None) is None


@pytest.mark.parametrize("fixture", fixture_dirs(), ids=fixture_id)
def test_no_non_native_dtype_leaves_the_inspection_api(fixture, tmp_path):
    root = copy_store(fixture, str(tmp_path))
    config = store_config(fixture, root)
    dump = load_dump(fixture)
    outputs: dict[str, object] = {}
    with MessageStore.open(config, read_only=True) as store:
        inspect = store.inspect
        segments = inspect.segments()
        outputs["segments"] = segments
        outputs["layouts"] = [inspect.segment_layout(s.name) for s in segments]
        records = []
        start = store.pointers()["min_phy_offset"]
        for phy_offset, result in inspect.records(start, check_crc=True,
                                                  max_records=MAX_RECORDS_WALKED):
            records.append((phy_offset, result))
        assert records, "the fixture has records"
        outputs["records"] = records
        outputs["record_bytes"] = inspect.record_bytes(records[0][0])
        outputs["dispatch"] = inspect.dispatch_state()
        outputs["recovery"] = inspect.recovery
        queues = [(q["topic"], q["queueId"]) for q in dump["queues"]]
        for topic, queue_id in queues:
            units = inspect.queue_units(topic, queue_id, 0, 64)
            outputs[f"units {topic}/{queue_id}"] = units
            outputs[f"unit {topic}/{queue_id}"] = inspect.queue_unit(topic, queue_id, 0)
            if units is not None and len(units):
                frame = pd.DataFrame({name: units[name] for name in units.dtype.names})
                pa.Table.from_pandas(frame)      # Arrow accepts every column
        if inspect.has_index and inspect.index_headers():
            outputs["index headers"] = inspect.index_headers()
            for name, _ in inspect.index_headers():
                entries = inspect.index_entries(name)
                outputs[f"entries {name}"] = entries
                outputs[f"slots {name}"] = inspect.index_slots(name)
                pa.Table.from_pandas(pd.DataFrame({n: entries[n] for n in entries.dtype.names}))
            for query in dump["queries"]:
                outputs[f"chain {query['key']}"] = inspect.index_chain(query["topic"], query["key"])
    outputs["raw records"] = dump_records(config, limit=50, verify=True)
    for topic, queue_id in queues[:4]:
        outputs[f"raw units {topic}/{queue_id}"] = dump_queue_units(config, topic, queue_id,
                                                                   limit=20, verify=True)
    outputs["raw index"] = dump_index_entries(config, limit=50)
    leaks = [p for name, value in outputs.items() for p in non_native(value, name)]
    assert not leaks, leaks[:10]
    assert any(isinstance(v, np.ndarray) for v in outputs.values()), "arrays were walked"
