"""The grading engine and the `autograde` command line for the chapter's assignments (the steps in order: autograder.pipeline)."""

import sys
from pathlib import Path

# jsonschema (under nbformat) imports rfc3987_syntax, if installed, only to check the "iri" string format,
# which no notebook schema uses; building its grammar costs about a second in every grading process.
sys.modules.setdefault("rfc3987_syntax", None)  # jsonschema treats the None as "not installed"

__version__ = "0.1.0"

# The course repository: the folder that holds assignments/, release/ and solutions/.
REPO_ROOT = Path(__file__).resolve().parent.parent
