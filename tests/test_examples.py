"""Every script in examples/ runs to completion as a user would run it, and prints what it promises."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import overdub

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = sorted((ROOT / "examples").glob("*.py"))

# Lines (stripped) that a script's output must contain; scripts not listed must just exit 0.
EXPECTED = {
    "quickstart.py": [
        "wave(1.0)",
        "math.sin(1.0)",
        "operator.mul(2.0, 0.8414709848078965)",
        "str      called 10 times",
        "-> the 10 str calls happen inside C's map, and are seen",
        "f(1, 2, 3)",
        "operator.mul(1, 2)",
        "operator.mul(2, 3)",
        "operator.add(2, 6)",
        "overdub(Degrees(), wave, 30.0) = 16.000000  (sin(30 deg) = 0.5)",
        "wave(30.0)                     = 13.023937  (sin(30 rad), untouched)",
        "D(x * D(y -> x*y)(3))(5)       = 10.0",
        "D(wave)(1.0)                   = 1.580605  (2 cos 1 + 1/2)",
        "grad(loss)(ones(3))            = [0.31985 0.31985 0.31985]",
    ],
}


def test_examples_exist() -> None:
    assert "quickstart.py" in {script.name for script in SCRIPTS}
    assert set(EXPECTED) <= {script.name for script in SCRIPTS}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda script: script.name)
def test_example_runs(script: Path) -> None:
    # The script must use the same overdub as this test run (installed or from the checkout).
    env = dict(os.environ)
    source_root = str(Path(overdub.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [source_root, env.get("PYTHONPATH")]))
    done = subprocess.run([sys.executable, str(script)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, f"{script.name} failed:\n{done.stdout}\n{done.stderr}"
    lines = {line.strip() for line in done.stdout.splitlines()}
    missing = [line for line in EXPECTED.get(script.name, []) if line not in lines]
    assert not missing, f"{script.name} did not print {missing}; it printed:\n{done.stdout}"
    # The quickstart's promise: it fits on one screen.
    if script.name == "quickstart.py":
        assert len(done.stdout.splitlines()) <= 40
