"""Recovery lab: crash a scratch copy of the current store, damage its tail, and watch recovery."""

import streamlit as st

from app import segment_figures
from app.recovery_lab import DAMAGES, MAX_CRASH_MESSAGES, crash, damage, lab_properties, recover
from app.ui.state import EXPECTED_ERRORS, current_handle, get_registry, select, user_error
from app.ui.widgets import frame

st.title("Recovery lab")
handle = current_handle()
registry = get_registry()
st.write("The lab never touches the store you are looking at: it copies it to a scratch directory, "
         "runs a child process that puts messages and dies without a clean shutdown, optionally "
         "damages the last record, and then opens the copy with the engine so recovery runs.")
if handle.store.inspect.is_dledger:
    st.caption("This store keeps a DLedger log (no commitlog/): the child appends entries as the "
               "group's only member, the damage hits the RocketMQ record inside the last entry, and "
               "recovery is DLedger's entry walk followed by RocketMQ's repair of the queues. A group "
               "of several members cannot append without a quorum: the child then fails and says so.")

with st.form("lab_form"):
    c1, c2 = st.columns(2)
    messages = c1.number_input("Messages to put before the crash", min_value=0,
                               max_value=MAX_CRASH_MESSAGES, value=20, key="lab_messages")
    kind = c2.selectbox("Damage after the crash", DAMAGES, key="lab_damage")
    run = st.form_submit_button("Copy, crash, damage, recover")

if run:
    properties = lab_properties(handle.store.config, registry.scratch_dir("lab-config"))
    try:
        with st.status("Running the experiment", expanded=True) as status:
            lab_root = registry.copy_to_scratch(handle.root, "lab")
            st.write(f"1. copied {handle.root} to {lab_root}")
            problem = crash(lab_root, properties, int(messages))
            if problem:
                raise RuntimeError(f"the crashing child failed: {problem}")
            st.write(f"2. a child process put {int(messages)} messages and exited without shutdown")
            st.write(f"3. {damage(lab_root, properties, kind)}")
            result = recover(lab_root, properties)
            st.write("4. opened the copy with the engine: recovery ran")
            status.update(label="Done", state="complete")
        st.session_state.lab = {"root": lab_root, "properties": properties, "result": result}
    except (RuntimeError, *EXPECTED_ERRORS) as error:
        user_error(error)

lab = st.session_state.get("lab")
if lab is not None:
    result = lab["result"]
    st.subheader("Before and after")
    st.caption(f"abort file before recovery: {'present' if result.abort_before else 'absent'}; "
               f"checkpoint before: {result.checkpoint_before}")
    st.plotly_chart(segment_figures.recovery_segments_figure(
        result.segments_before, result.segments_after, result.before, result.after,
        cut_bytes=result.report_fields.get("truncated_bytes")), key="lab_fig")
    frame([{"pointer": k, "before": result.before.get(k), "after": result.after.get(k)}
           for k in sorted(set(result.before) | set(result.after))])
    st.subheader("What recovery did, step by step")
    frame(result.steps)
    frame([{"field": k, "value": str(v)} for k, v in result.report_fields.items()])
    if st.button("Open the recovered copy in the picker", key="lab_open"):
        try:
            opened = registry.open(lab["root"], "hosted", properties_path=lab["properties"],
                                   label="recovery lab copy", scratch=True)
            select(opened)
            st.rerun()
        except EXPECTED_ERRORS as error:
            user_error(error)
