"""The grading engine and the `autograde` command line for the chapter's assignments (the steps in order: autograder.pipeline)."""

import sys
from pathlib import Path

# jsonschema (under nbformat) imports these, if installed, only to check string formats ("iri", "duration" with
# arrow, "uri", "color", "date-time", "uri-template", "json-pointer", "hostname") with a FormatChecker, which neither
# nbformat nor any of our processes uses: rfc3987_syntax's grammar costs about a second in every grading process, the
# others together about 20 ms of each process's start (the `autograde` process's and each worker's). Nothing else
# installed imports them.
for _name in ("rfc3987_syntax", "isoduration", "rfc3986_validator", "webcolors", "rfc3339_validator", "uri_template",
              "jsonpointer", "fqdn"):
    sys.modules.setdefault(_name, None)  # jsonschema treats the None as "not installed"
del _name

__version__ = "0.1.0"

# The course repository: the folder that holds assignments/, release/ and solutions/.
REPO_ROOT = Path(__file__).resolve().parent.parent
