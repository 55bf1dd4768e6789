"""Reporting: the student's page (Chinese), the class summary (English), copied hand answers, the feedback
files nbgrader hands back."""
