"""nbgrader configuration for this course repository.

Run nbgrader from the repository root: sources are read from assignments/<id>/<id>.ipynb and the
student versions written to release/<id>/<id>.ipynb. The exchange defaults to a folder inside the
course directory so that nothing needs root; on a shared server point NBGRADER_EXCHANGE at a
folder all students can reach (e.g. /srv/nbgrader/exchange, mode 777 with the sticky bit).
"""

import os

c = get_config()  # noqa: F821 (provided by nbgrader when it loads this file)

c.CourseDirectory.course_id = os.environ.get("NBGRADER_COURSE_ID", "gpt2-to-modern")
c.CourseDirectory.root = os.path.dirname(os.path.abspath(__file__))
c.CourseDirectory.source_directory = "assignments"
c.CourseDirectory.release_directory = "release"
c.Exchange.root = os.environ.get(
    "NBGRADER_EXCHANGE", os.path.join(os.path.dirname(os.path.abspath(__file__)), "exchange")
)

# What goes to students: every file of assignments/<id>/ but these (generate_assignment copies the others, e.g. the
# checker and the requirements `autograde student-checker` writes there, and release_assignment hands out release/<id>/).
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback"]

# nbgrader's own Autograde (formgrader's button, `nbgrader autograde`) would run student code with no sandbox: here it
# refuses, naming `autograde grade` (autograder/recording/nbgrader_guard.py), before nbgrader's Execute step. The rest
# is nbgrader 0.9.6's default list. `c.Autograde.allow_unsandboxed_nbgrader = True` lets it run as nbgrader has it.
c.Autograde.autograde_preprocessors = [
    "autograder.recording.nbgrader_guard.RefuseUnsandboxed",
    "nbgrader.preprocessors.Execute",
    "nbgrader.preprocessors.IgnorePattern",
    "nbconvert.preprocessors.ClearMetadataPreprocessor",
    "nbgrader.preprocessors.LimitOutput",
    "nbgrader.preprocessors.SaveAutoGrades",
    "nbgrader.preprocessors.AssignLatePenalties",
    "nbgrader.preprocessors.CheckCellMetadata",
]
