"""Intake: finding the submissions (nbgrader's layout, a flat folder, an LMS download), who handed each in
and when, and reading a notebook into the code the sandbox will run, with every student-derived value validated."""
