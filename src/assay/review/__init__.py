"""People reviewing (SPEC §10): the annotation queue (``queue``), its screen (``screen``,
``detail``) and who may see a hidden case's items (``reveal``). Judge calibration reads
the decisions (``analysis.calibration``); online sampling is ``sampling/`` and drafting
cases is ``drafting/``."""
