"""nbgrader's own Autograde (formgrader's button, `nbgrader autograde`) refused on this course: it runs student code
with no sandbox.

The course's nbgrader_config.py puts `RefuseUnsandboxed` first in `c.Autograde.autograde_preprocessors`: it runs
after nbgrader has sanitized the notebook and before its Execute step, and refuses with a message that names
`autograde grade`, so no student code runs outside the sandbox. The gradebook's scores are untouched (the refused
submission's autograded/ folder is removed by nbgrader's failure handling; the next `autograde grade` writes it
again). `c.Autograde.allow_unsandboxed_nbgrader = True` in nbgrader_config.py lets nbgrader's Autograde run as
nbgrader has it (its kernel, no sandbox); the next `autograde grade` puts our scores back.

Imported by nbgrader's process: nothing here imports more than nbconvert (it is nbgrader's own dependency) and
autograder.course (no third-party import).
"""

from nbconvert.preprocessors import Preprocessor

from autograder.course import UNSANDBOXED_NBGRADER_FLAG as FLAG

SECTION = "Autograde"
MESSAGE = ("nbgrader's Autograde is turned off on this course: it would run the student's code with no sandbox. "
           "Grade with `autograde grade` (it runs student code only in its sandbox and writes the scores into this "
           "gradebook, where formgrader shows them). To run nbgrader's own Autograde anyway, set "
           f"c.{SECTION}.{FLAG} = True in nbgrader_config.py.")


class UnsandboxedAutogradeRefused(RuntimeError):
    pass


def allowed(config) -> bool:
    """Whether the course's config lets nbgrader's Autograde run student code (only a literal True does)."""
    section = config[SECTION] if SECTION in config else {}
    return section.get(FLAG, False) is True


class RefuseUnsandboxed(Preprocessor):
    """First of `c.Autograde.autograde_preprocessors`: stop before nbgrader's Execute, unless the course allows it."""

    def __call__(self, nb, resources):  # whatever `enabled` says (nbconvert's default for it is False)
        return self.preprocess(nb, resources)

    def preprocess(self, nb, resources):
        if not allowed(self.config):
            self.log.error(MESSAGE)
            raise UnsandboxedAutogradeRefused(MESSAGE)
        return nb, resources

