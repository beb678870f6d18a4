"""Shared pytest configuration: the hypothesis profiles.

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

from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=200, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=60, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))
