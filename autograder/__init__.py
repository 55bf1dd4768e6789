"""The grading engine and the `autograde` command line for the chapter's six assignments."""

from pathlib import Path

__version__ = "0.1.0"

# The course repository: the folder that holds assignments/, release/ and solutions/.
REPO_ROOT = Path(__file__).resolve().parent.parent
