"""RocketMQ 5.3.3's store-wide earliest message time throws when the first record's born host is IPv6
(store.commitlog.earliest): the facade raises EarliestTimeUnavailable as 5.3.3 throws, and the CLI's
brokerStatus, `inspect.broker_status()` and the dashboard's Overview say so in words, with the first
record's store time, instead of an error."""

from __future__ import annotations

import json
import os

import pytest

from store import Message, MessageStore
from store.errors import EarliestTimeUnavailable
from tests.engine_util import FakeClock, small_config

FIRST_STORE_MS = 1_795_668_845_836          # 2026-11-26 04:54:05.836 UTC


def _store(root, *, first_born_host: str, store_host: str = "127.0.0.1:10911",
           store_format: str = "5.x"):
    config = small_config(root, store_format=store_format, store_host=store_host)
    clock = FakeClock(start_ms=FIRST_STORE_MS)
    with MessageStore.open(config, clock_ms=clock) as store:
        assert store.put_message(Message("T", b"first", born_host=first_born_host)).ok
        assert store.put_message(Message("T", b"second", born_host="10.0.0.1:7")).ok
    return config


def test_the_facade_throws_like_5_3_3_on_an_ipv6_first_born_host(tmp_path):
    config = _store(tmp_path / "s", first_born_host="[::1]:50000")
    with MessageStore.open(config, read_only=True) as store:
        with pytest.raises(EarliestTimeUnavailable) as raised:
            store.get_earliest_message_time()
        # Per queue it works: 5.3.3 takes that time from the consume queue's unit and record.
        assert store.get_earliest_message_time("T", 0) == FIRST_STORE_MS
    assert raised.value.first_store_timestamp_ms == FIRST_STORE_MS
    assert "born host is IPv6" in str(raised.value) and "68..75" in str(raised.value)


@pytest.mark.parametrize("first_born_host, store_host, store_format", [
    ("127.0.0.1:50000", "127.0.0.1:10911", "5.x"),     # IPv4: the 64 bytes hold the store time
    ("[::1]:50000", "[::2]:10911", "5.x"),             # brokerIP1 IPv6: 5.3.3 reads 76 bytes
    ("[::1]:50000", "127.0.0.1:10911", "4.9"),         # 4.9.7 reads another way (no such bug)
])
def test_no_bug_elsewhere(tmp_path, first_born_host, store_host, store_format):
    config = _store(tmp_path / "s", first_born_host=first_born_host, store_host=store_host,
                    store_format=store_format)
    with MessageStore.open(config, read_only=True) as store:
        answer = store.get_earliest_message_time()
        status = store.inspect.broker_status()
    assert answer in (FIRST_STORE_MS, -1) and (answer == FIRST_STORE_MS or store_format == "4.9")
    assert status["earliest_message_time_note"] is None
    assert status["earliest_message_time_ms"] == FIRST_STORE_MS


def test_broker_status_says_it_in_words(tmp_path):
    config = _store(tmp_path / "s", first_born_host="[::1]:50000")
    with MessageStore.open(config, read_only=True) as store:
        status = store.inspect.broker_status()
    assert status["earliest_message_time_ms"] == FIRST_STORE_MS
    note = status["earliest_message_time_note"]
    assert note.startswith("RocketMQ 5.3.3 cannot compute this when the first record's born host "
                           "is IPv6 (its getEarliestMessageTime bug")
    assert "the first record's store time is 2026-11-26 04:54:05.836 UTC" in note


def test_cli_broker_status_prints_the_sentence_not_an_error(tmp_path, capsys):
    from store.cli import main
    config = _store(tmp_path / "s", first_born_host="[::1]:50000")
    (tmp_path / "store.properties").write_text(config.to_properties())
    root = config.store_path_root_dir
    assert main(["brokerStatus", "--store", root]) == 0
    out, err = capsys.readouterr()
    line = next(line for line in out.splitlines() if line.startswith("earliestMessageTime "))
    assert "RocketMQ 5.3.3 cannot compute this when the first record's born host is IPv6" in line
    assert "2026-11-26 04:54:05.836 UTC" in line and "Traceback" not in out + err
    assert "earliestMessageTimeNote" not in out
    assert main(["brokerStatus", "--store", root, "--json"]) == 0
    runtime = json.loads(capsys.readouterr().out)["runtime"]
    assert runtime["earliest_message_time_ms"] == FIRST_STORE_MS
    assert "IPv6" in runtime["earliest_message_time_note"]


def test_overview_status_row_says_it_in_words(tmp_path):
    pytest.importorskip("streamlit")
    from tests.test_app_pages import open_store, start_app, visit
    config = _store(tmp_path / "s", first_born_host="[::1]:50000")
    properties = tmp_path / "store.properties"
    properties.write_text(config.to_properties())
    at = start_app()
    open_store(at, config.store_path_root_dir, "read-only", str(properties))
    visit(at, "overview")
    assert not at.exception and not at.error, [e.value for e in at.error]
    values = [str(v) for frame in at.dataframe for column in frame.value.columns
              for v in frame.value[column]]
    sentence = [v for v in values if "cannot compute this when the first record's born host is IPv6"
                in v]
    assert sentence and "2026-11-26 04:54:05.836 UTC" in sentence[0], values
    from app.ui.state import get_registry
    get_registry().close(at.session_state["store_key"])
    assert os.path.isdir(config.store_path_root_dir)


def test_overview_data_on_a_plain_store(tmp_path):
    from app import overview_data
    config = _store(tmp_path / "s", first_born_host="127.0.0.1:1")
    with MessageStore.open(config, read_only=True) as store:
        assert overview_data.earliest_time_text(store) == "2026-11-26 04:54:05.836 UTC"
