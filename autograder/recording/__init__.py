"""Recording: typed results, the files of OUT (written so that nothing is lost half-way), nbgrader's
gradebook and autograded notebooks, the regrade cache's key, the run's settings and locks."""
