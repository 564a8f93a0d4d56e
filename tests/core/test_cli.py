"""``python -m overdub trace|count|log``: what it prints matches the Python API, its filters and
options work, and every mistake on the command line is one line on stderr with exit code 2."""

from __future__ import annotations

import colorsys
import io
import os
import statistics
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Callable, Iterator
from fractions import Fraction
from pathlib import Path

import pytest

import overdub
from overdub import overdub as run_in
from overdub._cli import main
from overdub.contexts import CountContext, LogContext, TraceContext, describe

Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Run:
    """``cli(*argv) -> (exit status, stdout, stderr)``, run in this process."""
    def run(*argv: str) -> tuple[int, str, str]:
        status = main(list(argv))
        out, err = capsys.readouterr()
        return status, out, err
    return run


@pytest.fixture
def user_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], str]]:
    """``user_module(source) -> name``: an importable module of the user's, fresh for each test."""
    monkeypatch.syspath_prepend(str(tmp_path))
    names = []

    def make(source: str) -> str:
        name = f"cli_user_{uuid.uuid4().hex}"
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source), encoding="utf-8")
        names.append(name)
        return name

    yield make
    for name in names:
        sys.modules.pop(name, None)


def _lines(text: str) -> list[str]:
    return text.splitlines()


# -- trace -------------------------------------------------------------------------------------

def test_trace_prints_the_tree_of_the_api_then_the_result(cli: Run) -> None:
    status, out, err = cli("trace", "colorsys:rgb_to_hsv", "0.2", "0.4", "0.4")
    assert status == 0 and err == ""
    ctx = TraceContext()
    want = run_in(ctx, colorsys.rgb_to_hsv, 0.2, 0.4, 0.4)
    assert want == colorsys.rgb_to_hsv(0.2, 0.4, 0.4)
    assert out == f"{ctx.render()}\n-> {want!r}\n"
    lines = _lines(out)
    assert lines[0] == "colorsys.rgb_to_hsv(0.2, 0.4, 0.4)"
    assert "  max(0.2, 0.4, 0.4)" in lines and "  operator.sub(0.4, 0.2)" in lines


def test_trace_depth_limits_the_tree(cli: Run) -> None:
    status, out, _ = cli("trace", "textwrap:shorten", "'The quick brown fox'", "12", "--depth", "1")
    assert status == 0
    assert _lines(out) == ["textwrap.shorten('The quick brown fox', 12)", "-> 'The [...]'"]
    status, out, _ = cli("trace", "textwrap:shorten", "'The quick brown fox'", "12", "--depth", "2")
    tree = _lines(out)[:-1]
    assert len(tree) > 2 and all(line.startswith("  ") for line in tree[1:])
    assert not any(line.startswith("    ") for line in tree)


def test_trace_module_filter_keeps_only_those_callees(cli: Run) -> None:
    status, out, _ = cli("trace", "textwrap:shorten", "'The quick brown fox'", "12",
                         "--module", "textwrap")
    assert status == 0
    tree = _lines(out)[:-1]
    assert tree[0] == "textwrap.shorten('The quick brown fox', 12)"
    assert "    textwrap.TextWrapper.wrap('The quick brown fox')" in tree
    assert all(line.lstrip().startswith("textwrap.") for line in tree)
    # operator functions live in _operator: the filter goes by the module users import
    status, out, _ = cli("trace", "colorsys:rgb_to_hsv", "0.2", "0.4", "0.4",
                         "--module", "operator", "--module", "builtins")
    tree = _lines(out)[:-1]
    assert "operator.truediv(0.2, 0.4)" in tree and "max(0.2, 0.4, 0.4)" in tree
    assert not any(line.startswith(("colorsys.", " ")) for line in tree)


def test_trace_module_filter_that_hides_everything_says_so(cli: Run) -> None:
    status, out, _ = cli("trace", "colorsys:rgb_to_hsv", "0.2", "0.4", "0.4", "--module", "json")
    assert status == 0
    assert _lines(out) == ["(no calls of functions from modules json)", "-> (0.5, 0.5, 0.4)"]


def test_trace_dot_writes_the_same_tree_as_graphviz(cli: Run, tmp_path: Path) -> None:
    path = tmp_path / "median.dot"
    status, out, err = cli("trace", "statistics:median", "[1, 3, 2]", "--depth", "2",
                           "--dot", str(path))
    assert status == 0 and str(path) in err
    tree = _lines(out)[:-1]
    dot = path.read_text(encoding="utf-8")
    assert dot.startswith("digraph trace {\n") and dot.endswith("}\n")
    labels = [line for line in _lines(dot) if "[label=" in line]
    edges = [line for line in _lines(dot) if "->" in line]
    assert len(labels) == len(tree) and len(edges) == len(tree) - 1   # one tree, one root
    assert labels[0] == '  n0 [label="statistics.median([1, 3, 2])"];'
    assert all(edge.startswith("  n0 -> ") for edge in edges)          # depth 2: all children of n0


def test_render_and_dot_share_the_module_filter() -> None:
    ctx = TraceContext()
    run_in(ctx, textwrap.shorten, "The quick brown fox", 12)
    kept = ctx.render(modules=["textwrap"]).splitlines()
    dot = ctx.to_dot(modules=["textwrap"])
    labels = [line.split('label="', 1)[1][:-3] for line in dot.splitlines() if "label=" in line]
    assert labels == [line.strip() for line in kept]
    # a hidden call's callees hang from the nearest shown caller
    wrap = labels.index("textwrap.TextWrapper.wrap('The quick brown fox')")
    fill = labels.index("textwrap.TextWrapper.fill('The quick brown fox')")
    assert f"  n{fill} -> n{wrap};" in dot


# -- count -------------------------------------------------------------------------------------

def test_count_prints_the_api_counts_most_first(cli: Run) -> None:
    status, out, err = cli("count", "statistics:median", "[1, 3, 2]")
    assert status == 0 and err == ""
    ctx = CountContext()
    assert run_in(ctx, statistics.median, [1, 3, 2]) == 2
    lines = _lines(out)
    assert lines[-1] == "-> 2"
    assert lines[-2].split() == [str(ctx.total), "calls", "in", "all"]
    rows = [line.split() for line in lines[:-2]]
    assert {name: int(n) for n, name in rows} == {describe(fn): n for fn, n in ctx.counts.items()}
    numbers = [int(n) for n, _ in rows]
    assert numbers == sorted(numbers, reverse=True) and sum(numbers) == ctx.total


def test_count_sees_the_calls_made_inside_map(cli: Run, user_module: Callable[[str], str]) -> None:
    name = user_module("""
        def numbers(last):
            return list(map(str, range(1, last + 1)))
    """)
    status, out, _ = cli("count", f"{name}:numbers", "10")
    assert status == 0
    assert _lines(out)[0].split() == ["10", "str"]
    assert _lines(out)[-1] == f"-> {[str(i) for i in range(1, 11)]!r}"


def test_count_gives_one_line_per_function_closures_included(
        cli: Run, user_module: Callable[[str], str]) -> None:
    """(found from outside) each closure made at a call was a line of its own."""
    name = user_module("""
        def apply(x):
            def inner():
                return x + 1
            return inner()

        def main(n):
            return [apply(i) for i in range(n)]
    """)
    status, out, _ = cli("count", f"{name}:main", "4")
    assert status == 0
    rows = {line.split()[1]: int(line.split()[0]) for line in _lines(out)[:-2]}
    assert rows[f"{name}.apply.<locals>.inner"] == 4 and rows[f"{name}.apply"] == 4


def test_count_top_and_module_filter(cli: Run) -> None:
    text = "'The quick brown fox jumps over the lazy dog'"
    status, out, _ = cli("count", "textwrap:fill", text, "width=12")
    total = int(_lines(out)[-2].split()[0])
    status, out, _ = cli("count", "textwrap:fill", text, "width=12", "--top", "3")
    assert status == 0
    lines = _lines(out)
    assert len(lines) == 3 + 2
    shown = sum(int(line.split()[0]) for line in lines[:3])
    assert lines[3].split() == [str(shown), "shown,", "of", str(total), "calls", "in", "all"]
    status, out, _ = cli("count", "textwrap:fill", text, "width=12", "--module", "textwrap")
    names = [line.split()[1] for line in _lines(out)[:-2]]
    assert "textwrap.fill" in names and "textwrap.TextWrapper._wrap_chunks" in names
    assert all(name.startswith("textwrap.") for name in names)


# -- log ---------------------------------------------------------------------------------------

def test_log_prints_what_log_context_prints(cli: Run) -> None:
    status, out, err = cli("log", "colorsys:rgb_to_hsv", "0.2", "0.4", "0.4")
    assert status == 0 and err == ""
    log = io.StringIO()
    want = run_in(LogContext(file=log), colorsys.rgb_to_hsv, 0.2, 0.4, 0.4)
    assert out == f"{log.getvalue()}-> {want!r}\n"
    assert _lines(out)[:3] == ["colorsys.rgb_to_hsv(0.2, 0.4, 0.4)", "max(0.2, 0.4, 0.4)",
                               "min(0.2, 0.4, 0.4)"]


# -- arguments and targets ---------------------------------------------------------------------

def test_keyword_arguments_and_literals(cli: Run) -> None:
    status, out, _ = cli("log", "textwrap:fill", "'The quick brown fox'", "width=8")
    assert status == 0
    assert _lines(out)[0] == "textwrap.fill('The quick brown fox', width=8)"
    assert _lines(out)[-1] == f"-> {textwrap.fill('The quick brown fox', width=8)!r}"
    status, out, _ = cli("trace", "math:fabs", "-2.5")              # a negative number is an ARG
    assert (status, _lines(out)) == (0, ["math.fabs(-2.5)", "-> 2.5"])


def test_dotted_module_and_dotted_attribute(cli: Run) -> None:
    status, out, _ = cli("trace", "os.path:join", "'a'", "'b'", "--depth", "1")
    assert (status, _lines(out)[-1]) == (0, f"-> {os.path.join('a', 'b')!r}")
    status, out, _ = cli("trace", "fractions:Fraction.from_float", "0.5", "--depth", "1")
    assert status == 0 and _lines(out)[-1] == f"-> {Fraction(1, 2)!r}"
    assert _lines(out)[0] == "fractions.Fraction.from_float(0.5)"


@pytest.mark.parametrize("argv, message", [
    (["trace", "textwrap"], "target 'textwrap' is not MODULE:FUNCTION (e.g. textwrap:dedent)"),
    (["trace", "no_such_module_xyz:f"],
     "cannot import module 'no_such_module_xyz': No module named 'no_such_module_xyz'"),
    (["count", "examples/quickstart.py:main"], "give the module's import name, not a file path"),
    (["count", ".contexts:describe"], "'.contexts' is a relative module name: give the full one"),
    (["trace", "textwrap:no_such"], "module 'textwrap' has no attribute 'no_such'"),
    (["log", "textwrap:TextWrapper.nope"], "'textwrap:TextWrapper' has no attribute 'nope'"),
    (["trace", "string:ascii_letters"], "string:ascii_letters is not callable (it is a str)"),
    (["trace", "statistics:median", "data"],
     "argument 'data' is not a Python literal (a string needs quotes: \"'data'\")"),
    (["trace", "statistics:median", "[1, 2"], "argument '[1, 2' is not a Python literal"),
    (["trace", "statistics:median", "__import__('os')"], "is not a Python literal"),
    (["trace", "textwrap:fill", "width=8", "'text'"],
     "positional argument \"'text'\" follows a keyword argument"),
    (["trace", "textwrap:fill", "'a'", "width=8", "width=9"],
     "keyword argument 'width' given twice"),
    (["trace", "statistics:median", "[1]", "--dot", "/no/such/dir/t.dot"],
     "cannot write --dot file"),
])
def test_bad_command_line_is_one_line_and_exit_2(cli: Run, argv: list[str], message: str) -> None:
    status, out, err = cli(*argv)
    assert status == 2 and out == ""
    assert len(err.splitlines()) == 1 and message in err, err
    assert err.startswith(f"python -m overdub {argv[0]}: error: ")


@pytest.mark.parametrize("argv", [[], ["bogus", "math:fabs"], ["trace"],
                                  ["trace", "math:fabs", "1", "--depth", "0"],
                                  ["count", "math:fabs", "1", "--top", "x"]])
def test_usage_errors_exit_2(cli: Run, argv: list[str]) -> None:
    status, out, err = cli(*argv)
    assert status == 2 and out == "" and "usage: python -m overdub" in err


def test_help_documents_the_commands_and_options(cli: Run) -> None:
    status, out, _ = cli("--help")
    assert status == 0
    for word in ["trace", "count", "log", "MODULE:FUNCTION", "NAME=LITERAL", "exit status"]:
        assert word in out
    status, out, _ = cli("trace", "--help")
    assert status == 0 and all(option in out for option in ["--depth", "--module", "--dot"])
    status, out, _ = cli("count", "--help")
    assert status == 0 and all(option in out for option in ["--module", "--top"])


# -- the user's own errors ---------------------------------------------------------------------

def test_an_exception_in_the_function_is_the_users_traceback_and_exit_1(
        cli: Run, user_module: Callable[[str], str]) -> None:
    name = user_module("""
        import statistics

        def middle(data):
            return statistics.median(data) + 1
    """)
    status, out, err = cli("trace", f"{name}:middle", "[]")
    assert status == 1
    lines = _lines(out)
    assert lines[0] == f"{name}.middle([])" and "  statistics.median([])" in lines  # seen so far
    assert not any(line.startswith("->") for line in lines)
    assert err.startswith("Traceback (most recent call last):\n")
    assert err.rstrip().endswith("statistics.StatisticsError: no median for empty data")
    assert f"{name}.py\", line 5, in middle" in err and "statistics.py" in err
    overdub_dir = str(Path(overdub.__file__).parent)
    assert overdub_dir not in err and "overdub dispatcher" not in err


def test_an_exception_while_importing_the_module_is_exit_1(
        cli: Run, user_module: Callable[[str], str]) -> None:
    name = user_module("""
        SETTING = 1 / 0

        def f():
            return SETTING
    """)
    status, out, err = cli("log", f"{name}:f")
    assert status == 1 and out == ""
    assert f"{name}.py\", line 2, in <module>" in err and "ZeroDivisionError" in err
    assert "importlib" not in err and str(Path(overdub.__file__).parent) not in err


# -- as users run it ---------------------------------------------------------------------------

def _python_m_overdub(env: dict[str, str], cwd: Path, *argv: str
                       ) -> subprocess.CompletedProcess[str]:
    # Run outside the checkout: `-m` puts the working directory first on sys.path.
    return subprocess.run([sys.executable, "-m", "overdub", *argv], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=120, check=False)


def test_python_m_overdub_runs_and_fails_as_documented(child_env: dict[str, str],
                                                       tmp_path: Path) -> None:
    done = _python_m_overdub(child_env, tmp_path, "trace", "statistics:median", "[1, 3, 2]",
                             "--module", "statistics")
    assert done.returncode == 0, done.stderr
    assert _lines(done.stdout) == ["statistics.median([1, 3, 2])", "-> 2"]
    done = _python_m_overdub(child_env, tmp_path, "count", "colorsys:rgb_to_hsv",
                             "0.2", "0.4", "0.4")
    assert done.returncode == 0 and _lines(done.stdout)[-1] == "-> (0.5, 0.5, 0.4)"
    done = _python_m_overdub(child_env, tmp_path, "trace", "math:no_such", "1")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == ("python -m overdub trace: error: module 'math' has no attribute "
                           "'no_such'\n")


def test_output_piped_into_a_reader_that_stops_early_ends_quietly(child_env: dict[str, str],
                                                                   tmp_path: Path) -> None:
    # `python -m overdub log ... | head`: the log is far bigger than a pipe's buffer, the reader
    # is gone before it is written, and the command stops without a traceback.
    text = repr("word " * 2000)
    child = subprocess.Popen([sys.executable, "-m", "overdub", "log", "textwrap:fill", text],
                             env=child_env, cwd=tmp_path, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stderr is not None
    child.stdout.close()
    err = child.stderr.read()
    assert child.wait(timeout=120) == 1
    assert err == ""
