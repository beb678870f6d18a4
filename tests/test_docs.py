"""Documentation stays true: every config setting is documented, the README's commands exist."""

from __future__ import annotations

import os

from scripts.gen_config_doc import render
from tests.fixtures_util import REPO_ROOT


def test_config_doc_is_up_to_date():
    with open(os.path.join(REPO_ROOT, "docs", "config.md"), encoding="utf-8") as handle:
        assert handle.read() == render(), "run: python scripts/gen_config_doc.py"


def test_readme_starts_with_the_two_commands():
    with open(os.path.join(REPO_ROOT, "README.md"), encoding="utf-8") as handle:
        head = handle.read(2000)
    assert "streamlit run app/main.py" in head
    assert "bash .ci/run" in head
    with open(os.path.join(REPO_ROOT, ".ci", "run"), encoding="utf-8") as handle:
        assert "python3 -m pytest -q" in handle.read()
