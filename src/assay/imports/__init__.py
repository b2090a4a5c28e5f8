"""Formats people already have, turned into assay's (SPEC §13): ``assay import``."""
