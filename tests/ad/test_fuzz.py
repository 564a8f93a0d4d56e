"""The program fuzzer's quick profile (tests/ad/fuzz.py): random programs, every derivative API
against finite differences and against each other, on first and repeated calls."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.ad.fuzz import HypothesisDraw, RandomDraw, generate, run_program

pytestmark = pytest.mark.ad        # run again on the reference route (see conftest.py)


def _verdict(program_source: str, kind: str, detail: str) -> None:
    assert kind in ("ok", "skip"), f"{kind}:\n{detail}\n--- the program:\n{program_source}"


@settings(max_examples=60, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data(), st.integers(0, 2**31))
def test_random_programs_shrink_to_what_disagrees(tmp_path_factory: pytest.TempPathFactory,
                                                 data: st.DataObject, point: int) -> None:
    program = generate(HypothesisDraw(data))
    directory = tmp_path_factory.mktemp("fuzz")
    outcome = run_program(program, Path(directory), f"fuzz_h_{point}", point)
    _verdict(program.source, outcome.kind, outcome.detail)


@pytest.mark.parametrize("block", range(6))
def test_a_fixed_sweep_of_programs(tmp_path: Path, block: int) -> None:
    # 300 programs, the same on every run: seed 0, programs 50*block ... 50*block + 49.
    failures = []
    for index in range(50 * block, 50 * block + 50):
        program = generate(RandomDraw(index))
        outcome = run_program(program, tmp_path, f"fuzz_sweep_{index}", index)
        if outcome.kind not in ("ok", "skip"):
            failures.append(f"program {index}: {outcome.kind}\n{outcome.detail}\n"
                            + "\n".join(program.lines))
    assert not failures, "\n\n".join(failures[:3]) + f"\n\n({len(failures)} in all)"
