"""Analysis: reads the store (DESIGN "analysis/") and decides on what it holds.

``replay`` re-grades stored traces with the stored suite; ``compare`` aligns two
runs on their facets; ``gate`` takes a release decision, the one thing here that
writes: its ``gate`` ledger entry. Each decision is a pure function of
``run_facts``; the store is read around it.
"""
