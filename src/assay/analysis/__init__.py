"""Analysis: reads the store (DESIGN "analysis/") and decides on what it holds.

``replay`` re-grades stored traces with the stored suite; ``compare`` aligns two
runs on their facets; ``gate`` takes a release decision (its ``gate`` ledger
entry is the one thing here that writes); ``registry`` holds the registry's
rules (states from ``agent`` entries, the start rule, the audit). Each decision
is a pure function of what was read; the store is read around it.
"""
