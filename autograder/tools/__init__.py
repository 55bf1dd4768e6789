"""The tools beside the pipeline: selftest, bench, the demo class, the students' checker, the solution sync."""
