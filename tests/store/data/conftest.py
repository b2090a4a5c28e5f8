"""Stored projects read by the tests beside this folder, not tests themselves.

Their ``*.suite.yaml`` files would otherwise be collected as suites (the
pytest plugin collects suites under any path named on the command line,
``pytest tests/store`` included) and run against agents not meant to pass.
"""

collect_ignore_glob = ["*/project"]
