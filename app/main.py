"""Entry script: `streamlit run app/main.py`. Builds the navigation; the pages do the rest."""

import os
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)

import streamlit as st  # noqa: E402

from app.ui.sidebar import store_picker  # noqa: E402

PAGES = [
    ("overview.py", "Overview", ":material/monitoring:"),
    ("commitlog.py", "CommitLog", ":material/storage:"),
    ("consumequeue.py", "ConsumeQueue", ":material/list:"),
    ("index_files.py", "Index", ":material/tag:"),
    ("produce.py", "Produce", ":material/send:"),
    ("pull.py", "Pull", ":material/download:"),
    ("scheduled.py", "Scheduled", ":material/schedule:"),
    ("query.py", "Query", ":material/search:"),
    ("browse.py", "Browse", ":material/manage_search:"),
    ("topics.py", "Topics", ":material/topic:"),
    ("consumer_groups.py", "Consumer groups", ":material/groups:"),
    ("recovery_lab.py", "Recovery lab", ":material/healing:"),
    ("health.py", "Health", ":material/health_and_safety:"),
    ("tour.py", "Tour", ":material/tour:"),
    ("pipeline.py", "Pipeline", ":material/account_tree:"),
]

st.set_page_config(page_title="RocketMQ Store Inspector", layout="wide")
navigation = st.navigation([
    st.Page(os.path.join(REPO_ROOT, "pages", file_name), title=title, icon=icon,
            default=(file_name == "overview.py"))
    for file_name, title, icon in PAGES
    if os.path.exists(os.path.join(REPO_ROOT, "pages", file_name))
])
store_picker()
navigation.run()
