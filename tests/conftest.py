"""Shared pytest configuration: the hypothesis profiles, and the dashboard's stores closed after each
test module (a module that started the app without tests.app_util's registry_cleanup left the sample
store's services running into later modules: their reput thread then showed up in other tests).

Two profiles, chosen once here for the whole run:

| profile | max_examples | loaded when                                                   |
|---------|--------------|---------------------------------------------------------------|
| `ci`    | 200          | the environment variable `CI` is set (`.ci/run` exports CI=1) |
| `dev`   | 60           | otherwise (a developer's `python3 -m pytest`)                 |

`HYPOTHESIS_PROFILE=<name>` overrides the choice (e.g. `HYPOTHESIS_PROFILE=ci python3 -m pytest ...`
runs the CI depth locally). Both profiles drop the deadline and the too_slow health check: the machine
is shared, and a test's speed is not what it checks. A test that needs its own example count reads the
loaded profile's (`hypothesis.settings().max_examples`, as tests/test_fuzz_codecs.py does) rather than
hard-coding one, or the profile would not reach it: an explicit `@settings(max_examples=...)` wins
over the profile.
"""

import os
import sys

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=200, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=60, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


@pytest.fixture(scope="module", autouse=True)
def _dashboard_stores_closed():
    """After every module: close the stores the dashboard's registry holds, if the app was loaded."""
    yield
    state = sys.modules.get("app.ui.state")
    if state is not None:
        state.get_registry().close_all()
        state.get_registry.clear()
