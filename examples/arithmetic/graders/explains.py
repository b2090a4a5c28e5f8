"""A grader script: reads the trace as JSON on stdin, prints {"outcome", "note"}."""

import json
import sys

trace = json.load(sys.stdin)
explanation = (trace.get("output") or {}).get("explanation", "")
ok = "=" in explanation and str((trace.get("output") or {}).get("answer")) in explanation
print(json.dumps({"outcome": "pass" if ok else "fail",
                  "note": "explanation shows the working" if ok else "no working shown"}))
