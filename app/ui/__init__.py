"""Streamlit glue shared by the pages: the cached registry, the sidebar store picker, safe display
helpers. Everything else under app/ is plain Python that never imports streamlit."""
