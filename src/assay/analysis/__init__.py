"""Analysis: reads the store (DESIGN "analysis/"), never writes it.

``replay`` re-grades stored traces with the stored suite; ``registry`` holds
the registry's rules (states from ``agent`` entries, the start rule, the audit).
"""
