"""Drafting cases (SPEC §10, cold start): ``promote`` turns a stored trace into a case,
``synth`` asks a model for cases; both write YAML a person reviews (``case_yaml``), every
synthetic case marked ``synthetic: true``. Beside ``suites/``, where cases are read;
nothing here writes the store or prints."""
