"""What the warm sandbox parent imports besides torch: what the notebooks of the run's assignments import
(autograder.running.sandbox.zygote.warm_imports); matplotlib.pyplot only where one of them imports matplotlib. That
the grades are the same either way: the whole corpus graded both ways (tests/test_cell_skipping.py, through
autograder.tools.selftest.grade_plan) and a student who plots (tests/test_sandbox_fontlist.py)."""

import json

import pytest

from autograder import REPO_ROOT
from autograder.assignments import assignment_ids
from autograder.engine import GradingOptions
from autograder.jobs.executors import Executor, _settings
from autograder.running.sandbox.zygote import WARM_IMPORTS, Zygote, warm_imports, warm_imports_of

# the assignments whose source notebooks plot (`import matplotlib.pyplot as plt`), read off the notebooks
PLOTTING = {"gradient_flow", "rope", "swiglu"}
WITHOUT_MATPLOTLIB = tuple(n for n in WARM_IMPORTS if n != "matplotlib.pyplot")


@pytest.mark.parametrize("assignment_id", assignment_ids())
def test_each_assignment_s_warm_parent_imports_matplotlib_only_where_its_notebook_does(assignment_id):
    expected = WARM_IMPORTS if assignment_id in PLOTTING else WITHOUT_MATPLOTLIB
    assert warm_imports_of([assignment_id], REPO_ROOT) == expected


def test_a_run_of_several_assignments_imports_what_any_of_them_imports():
    assert warm_imports_of(["rmsnorm", "mla"], REPO_ROOT) == WITHOUT_MATPLOTLIB
    assert warm_imports_of(["rmsnorm", "rope"], REPO_ROOT) == WARM_IMPORTS
    assert warm_imports_of(assignment_ids(), REPO_ROOT) == WARM_IMPORTS


@pytest.mark.parametrize("source, plots", [
    ("import matplotlib.pyplot as plt", True),
    ("import numpy as np, matplotlib.pyplot as plt", True),
    ("import torch\n    from matplotlib import pyplot", True),
    ("import matplotlib", True),
    ("x = 1  # import matplotlib.pyplot as plt", False),
    ("# import matplotlib.pyplot as plt", False),
    ("print('import matplotlib')", False),
    ("import matplotlib_inline", False),
    ("from mpl_toolkits import mplot3d", False),
    ("import numpy as np", False),
])
def test_an_import_of_matplotlib_is_read_in_the_ways_a_cell_writes_it(source, plots):
    assert ("matplotlib.pyplot" in warm_imports(["x = 0", source])) == plots


def test_a_warm_parent_imports_everything_unless_told_otherwise():
    from autograder.running.sandbox import environment

    assert Zygote(environment.locate(), "rlimits").imports == WARM_IMPORTS


def test_a_local_worker_is_told_what_its_warm_parent_imports_for_the_run_s_assignments():
    """The first line a worker reads (executors._settings) carries the imports of the assignments it grades."""
    def imports(ids):
        return tuple(json.loads(_settings(GradingOptions(), ids, Executor()))["imports"])

    assert imports(["rmsnorm"]) == WITHOUT_MATPLOTLIB
    assert imports(["rmsnorm", "swiglu"]) == WARM_IMPORTS
