"""Pipeline: run the Spark jobs (stats, verify, export, rebuild) on the current store's files in the
background; without Spark (the `spark` extra not installed), the pandas stats."""

import dataclasses

import pandas as pd
import streamlit as st

from app.pipeline_runner import SPARK_INSTALL, PipelineRun, available_jobs, jobs_available, spark_available
from app.times import human_ms
from app.ui.state import EXPECTED_ERRORS, current_handle, get_registry, user_error
from app.ui.widgets import frame, plain

st.title("Pipeline")
handle = current_handle()
if not jobs_available():
    st.info("The pipeline jobs (store/pipeline/jobs_*.py) are not available in this checkout.")
    st.stop()
if spark_available():
    st.write("Runs a Spark job (local mode, one core) over the store's files. A hosted store is read "
             "as it is on disk at the moment the job starts.")
else:
    st.info(f"Spark is not installed, so the pandas path runs here (same decoders, one process); "
            f"add Spark with `{SPARK_INSTALL}`.")
c1, c2 = st.columns([2, 1])
job = c1.selectbox("Job", available_jobs(), key="pipe_job")
run = getattr(handle, "pipeline_run", None)
if c2.button("Run", key="pipe_run", disabled=run is not None and not run.done):
    try:
        output = get_registry().scratch_dir("export")
        handle.pipeline_run = run = PipelineRun(job, handle.root, output)
    except EXPECTED_ERRORS as error:
        user_error(error)


def _human(table: pd.DataFrame) -> pd.DataFrame:
    """Store times as text with their zone (the raw milliseconds stay in the job's own output)."""
    table = table.copy()
    for column in table.columns:
        if str(column).endswith(("_timestamp", "_ms")) and pd.api.types.is_numeric_dtype(table[column]):
            table[column] = table[column].map(lambda v: human_ms(None if pd.isna(v) else int(v)))
    return table


@st.fragment(run_every=1 if run is not None and not run.done else None)
def progress() -> None:
    current = getattr(handle, "pipeline_run", None)
    if current is None:
        st.caption("No job run yet.")
        return
    st.text(f"{current.job}: {current.phase} ({current.elapsed_s:.0f} s)")
    if not current.done:
        tasks = current.tasks()  # Spark's status tracker: tasks of the active stages
        if tasks:
            st.progress(tasks[0] / tasks[1], text=f"{tasks[0]}/{tasks[1]} tasks")
        else:
            st.progress(min(0.95, current.elapsed_s / 120), text="running…")
        return
    if current.error:
        st.error(plain(current.error))
    elif isinstance(current.result, dict):
        for name, table in current.result.items():
            st.subheader(plain(name))
            frame(_human(table if isinstance(table, pd.DataFrame) else pd.DataFrame(table)))
    elif dataclasses.is_dataclass(current.result):
        summary = getattr(current.result, "summary", None)
        st.text(summary() if callable(summary) else str(current.result))
        frame([{"field": k, "value": str(v)} for k, v in dataclasses.asdict(current.result).items()])


progress()
