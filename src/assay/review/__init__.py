"""People in the loop (SPEC §10): the annotation queue, judge calibration,
online sampling, the MCP proxy, and drafting cases from traces or a model."""
