"""The students' verdict service (`autograde serve`): a JupyterHub service where a student hands in a practice
attempt before the deadline and gets the hidden checks' verdict.

- identity from the hub only (HubOAuth; API calls with the token of the student's own server): autograder.service.app
- attempts stored before they are acknowledged, in SQLite or PostgreSQL (SQLAlchemy): autograder.service.store
- graded by the same engine and sandbox, in local worker processes or on Dask: autograder.service.grading
- hidden inputs from a seed domain of their own, derived one-way from the course secret: autograder.service.practice
- budgets, feedback level, due dates: the course's `c.AutogradeService` settings, autograder.service.settings

The final grading (`autograde grade`) reads nothing the service writes.
"""
