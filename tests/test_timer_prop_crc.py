"""[5.x] Timer deliveries under enabledAppendPropCRC + forceVerifyPropCRC: the delivered copy carries a
valid `__CRC32#` trailer, so a restart's recovery (which checks that CRC instead of the body CRC) keeps it
and everything after it."""

from __future__ import annotations

from store import MessageStore
from store.api import Message
from store.codec import prop_crc
from tests.test_timer_host import T0_MS, Clock, _fresh, _queue, _step


def test_a_delivered_timer_copy_survives_a_prop_crc_recovery(tmp_path):
    clock = Clock(T0_MS)
    store = _fresh(tmp_path, clock, enabled_append_prop_crc=True, force_verify_prop_crc=True)
    config = store.config
    try:
        assert store.put_message(Message("Real", b"timed", queue_id=1, keys="k",
                                         properties={"TIMER_DELAY_MS": "2000"})).ok
        delivered = 0
        while clock.now_ms < T0_MS + 5_000:
            delivered += _step(store)
            clock.now_ms += 100
        assert delivered == 1
        (copy,) = _queue(store, "Real", 1)
        assert prop_crc.PROPERTY_CRC32 in copy.properties_raw.decode()
        after = store.put_message(Message("Real", b"after", queue_id=1))
        assert after.ok
        wrote = store.pointers()["wrote"]
    finally:
        store.crash()                 # abnormal recovery next: every record's CRC is checked
    with open(f"{config.store_path_root_dir}/abort", "wb"):
        pass
    with MessageStore.open(config, clock_ms=clock, start_services=False) as reopened:
        report = reopened.recovery_report
        assert report.process_offset == wrote, report.stop_reason
        assert [m.body for m in _queue(reopened, "Real", 1)] == [b"timed", b"after"]
