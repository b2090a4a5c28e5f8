"""Settings for the whole test suite."""

from hypothesis import settings

# The throwaway PostgreSQL and the db_url fixture, for every test folder.
pytest_plugins = ["tests.postgres"]

# Property tests run beside real servers and subprocesses on a 2-core machine:
# a per-example deadline would turn a busy moment into a failure that says
# nothing about the code. The number of examples stays the same.
settings.register_profile("assay", deadline=None)
settings.load_profile("assay")
