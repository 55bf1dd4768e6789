"""The commands beside `autograde grade` (autograder.run) that work on a graded OUT or the course: `report`
(report.py), `forget`, `lms-grades` (lms_grades.py) and `roster`."""
