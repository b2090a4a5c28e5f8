"""Analysis: reads the store (DESIGN "analysis/"), never writes it.

``replay`` re-grades stored traces with the stored suite.
"""
