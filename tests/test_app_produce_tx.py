"""Produce form: PREPARED then COMMIT, the COMMIT carrying the PREPARED record's offset (the
PREPARED TRANSACTION OFFSET field a broker's EndTransactionProcessor writes)."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")

from app.paths import InputError  # noqa: E402
from app.produce import ProduceForm, build_messages  # noqa: E402
from tests.test_app_pages import button, start_app, visit  # noqa: E402


def _form(**kw) -> ProduceForm:
    fields = dict(topic="TxTopic", queue_id=0, selector="queue id", queue_count=1, tags="", keys="",
                  properties_text="", body=b"tx", flag=0, batch_size=1)
    fields.update(kw)
    return ProduceForm(**fields)


def test_build_messages_sets_the_transaction_fields():
    [prepared] = build_messages(_form(transaction="prepared", prepared_offset=99))
    assert (prepared.sys_flag, prepared.prepared_transaction_offset) == (0x4, 0)
    [commit] = build_messages(_form(transaction="commit", prepared_offset=4321))
    assert (commit.sys_flag, commit.prepared_transaction_offset) == (0x8, 4321)
    [rollback] = build_messages(_form(transaction="rollback", prepared_offset=7))
    assert (rollback.sys_flag, rollback.prepared_transaction_offset) == (0xC, 7)
    with pytest.raises(InputError, match="batch size to 1"):
        build_messages(_form(transaction="commit", batch_size=2))
    with pytest.raises(InputError, match="Unknown transaction"):
        build_messages(_form(transaction="maybe"))


def test_prepared_then_commit_in_the_page():
    at = start_app()
    visit(at, "produce")
    at.text_input(key="pr_topic").input("TxTopic")
    at.selectbox(key="pr_tx").set_value("prepared")
    button(at, "Send").click()
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    prepared_at = at.session_state["pr_last"]
    assert any("PREPARED at physical offset" in i.value for i in at.info)
    at.run()                                   # the form's next run takes the offset
    offset = at.number_input(key="pr_prepared").value
    assert offset >= 0
    at.selectbox(key="pr_tx").set_value("commit")
    button(at, "Send").click()
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert prepared_at["topic"] == "TxTopic"
    rows = [f.value for f in at.dataframe][-1]
    commit_phy = int(rows["physical offset"].iloc[0])
    assert commit_phy > offset
    from app.ui.state import get_registry
    stores = [h.store for h in get_registry().handles() if not h.read_only]
    commit = next(r for r in (s.look_message_by_offset(commit_phy) for s in stores) if r is not None)
    assert commit.sys_flag & 0xC == 0x8
    assert commit.prepared_transaction_offset == offset
