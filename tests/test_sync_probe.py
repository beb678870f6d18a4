"""bench.sync_probe: the group commit breakdown counts what the store did."""

from bench import sync_probe


def test_probe_round_accounts_for_every_released_put(tmp_path):
    result = sync_probe.probe_round(4, 0.3, str(tmp_path))
    assert result["messages"] > 0
    assert result["syncs"] >= 1
    # every put released by a sync is one of the puts measured (some find their bytes already flushed)
    assert 0 < result["released"] <= result["messages"]
    assert result["group_mean"] > 0
    assert result["kib_per_sync"] > 0
    assert result["sync_ms_p50"] > 0
    assert set(sync_probe.FIELDS) <= set(result)
    assert list(tmp_path.iterdir()) == []   # the scratch store is removed
