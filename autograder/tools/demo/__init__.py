"""The bundled example class for `autograde demo`: about twenty students and their submissions.

    from autograder.tools.demo import build_demo_course
    course = build_demo_course(Path("/tmp/demo-course"))
    course.submitted        # submitted/<student>/<assignment>/<assignment>.ipynb, as `nbgrader collect` leaves it
    course.expected         # {(student, assignment): "full" | "partial" | "zero" | "error"}

A submitted notebook is the release notebook with the student's answers filled in
(`student_notebook`); what each student handed in is written down in `students.CLASS`, built from
the catalogued Mistakes and Alternatives of `autograder.examples`.
"""

from autograder.tools.demo.build import (
    DemoCourse,
    build_demo_course,
    expected_outcome,
    student_notebook,
    without_markers,
)
from autograder.tools.demo.students import CLASS, DemoStudent

__all__ = ["CLASS", "DemoCourse", "DemoStudent", "build_demo_course", "expected_outcome", "student_notebook",
           "without_markers"]
