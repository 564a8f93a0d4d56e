"""``python -m overdub trace|count|log MODULE:FUNCTION [ARGS...]``: the reference contexts on code
you did not write, without writing a line.

The command imports the module, runs the function under :class:`~overdub.contexts.TraceContext`,
:class:`~overdub.contexts.CountContext` or :class:`~overdub.contexts.LogContext`, prints what the
context saw, then the function's return value.  A mistake on the command line (a target that
cannot be imported or called, an argument that is not a Python literal) is one line on stderr and
exit code 2; an exception raised by the function itself is the user's, so its traceback is shown
(overdub's own frames left out) and the exit code is 1.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import sys
import traceback
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from . import overdub
from ._frames import DISPATCHER_FILE, OVERDUB_DIR
from ._primitives import module_of
from .contexts import CountContext, LogContext, TraceContext, describe

_PROG = "python -m overdub"

_DESCRIPTION = """\
Run a function from an importable module inside one of overdub's reference contexts, print
every call and operator it makes (the call tree, the call counts, or a log), then its return
value (after "-> ").  The same as the Python API in overdub.contexts; see docs/cli.md.
"""

_EPILOG = """\
ARG is a Python literal, read with ast.literal_eval: 3, -0.5, 'text', [1, 3, 2], (1, 2),
{'a': 1}, None, True.  NAME=LITERAL passes a keyword argument.  The shell removes one level
of quotes, so a string needs two: "'text'".  Put -- before arguments that start with a dash
and are not plain numbers.

examples:
  python -m overdub trace colorsys:rgb_to_hsv 0.2 0.4 0.4
  python -m overdub trace textwrap:shorten "'The quick brown fox'" 12 --module textwrap --depth 3
  python -m overdub trace statistics:median "[1, 3, 2]" --dot median.dot
  python -m overdub count textwrap:fill "'The quick brown fox'" width=8 --top 5
  python -m overdub log fractions:Fraction 3 4

exit status: 0 when the function returned, 1 when it raised (its traceback is printed after
what the context saw until then), 2 for a bad command line (unknown module or function,
an argument that is not a literal, a --dot file that cannot be written).
"""


class _UsageError(Exception):
    """A bad command line that argparse cannot see: reported as one line, exit code 2."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=_PROG, formatter_class=argparse.RawDescriptionHelpFormatter, epilog=_EPILOG,
        usage="%(prog)s {trace,count,log} [OPTIONS] MODULE:FUNCTION [ARG ...]",
        description=_DESCRIPTION)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, summary: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, prog=f"{_PROG} {name}", help=summary,
                                  description=summary, epilog=_EPILOG,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
        sub.add_argument("target", metavar="MODULE:FUNCTION",
                         help="the function to run: an importable module, a colon, and a "
                              "(possibly dotted) attribute, e.g. textwrap:dedent or "
                              "pkg.mod:Class.method")
        sub.add_argument("args", nargs="*", metavar="ARG",
                         help="positional arguments as Python literals, or NAME=LITERAL "
                              "keyword arguments")
        return sub

    trace = command("trace", "print the nested call tree (TraceContext)")
    trace.add_argument("--depth", type=_positive_int, metavar="N",
                       help="show only the top N levels of the tree (1: just the call itself)")
    trace.add_argument("--module", action="append", metavar="PREFIX", dest="modules",
                       help="show only calls of callees whose module starts with PREFIX "
                            "(repeatable); a hidden call's callees move up to its place")
    trace.add_argument("--dot", metavar="FILE",
                       help="also write the tree (same --depth and --module) as a Graphviz "
                            "DOT digraph to FILE; render it with: dot -Tsvg FILE -o tree.svg")

    count = command("count", "print how often each function and operator was called, most "
                             "first (CountContext)")
    count.add_argument("--module", action="append", metavar="PREFIX", dest="modules",
                       help="show only callees whose module starts with PREFIX (repeatable)")
    count.add_argument("--top", type=_positive_int, metavar="N",
                       help="show only the N most called")

    command("log", "print each call with its arguments, as it happens (LogContext)")
    return parser


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _resolve(target: str) -> Callable[..., Any]:
    """The callable named by ``MODULE:ATTR[.ATTR...]``."""
    module_name, colon, path = target.partition(":")
    if not colon or not module_name or not path:
        raise _UsageError(f"target {target!r} is not MODULE:FUNCTION (e.g. textwrap:dedent)")
    if module_name.startswith("."):
        raise _UsageError(f"{module_name!r} is a relative module name: give the full one")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        hint = ""
        if module_name.endswith(".py") or "/" in module_name or "\\" in module_name:
            hint = " (give the module's import name, not a file path)"
        raise _UsageError(f"cannot import module {module_name!r}: {exc}{hint}") from None
    names = path.split(".")
    for i, name in enumerate(names):
        try:
            obj = getattr(obj, name)
        except AttributeError:
            owner = repr(f"{module_name}:{'.'.join(names[:i])}") if i else f"module {module_name!r}"
            raise _UsageError(f"{owner} has no attribute {name!r}") from None
    if not callable(obj):
        raise _UsageError(f"{target} is not callable (it is a {type(obj).__name__})")
    fn: Callable[..., Any] = obj
    return fn


def _literal(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        hint = f" (a string needs quotes: \"'{text}'\")" if text.isidentifier() else ""
        raise _UsageError(f"argument {text!r} is not a Python literal{hint}") from None


def _arguments(words: Sequence[str]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for word in words:
        name, equals, value = word.partition("=")
        if equals and name.isidentifier():
            if name in kwargs:
                raise _UsageError(f"keyword argument {name!r} given twice")
            kwargs[name] = _literal(value)
        elif kwargs:
            raise _UsageError(f"positional argument {word!r} follows a keyword argument")
        else:
            args.append(_literal(word))
    return tuple(args), kwargs


def _is_machinery(filename: str) -> bool:
    return (filename.startswith((OVERDUB_DIR, DISPATCHER_FILE, "<frozen importlib"))
            or filename == importlib.__file__)


def _user_traceback(exc: BaseException) -> str:
    """The traceback of ``exc`` as the user's code sees it: overdub's frames (this module's and
    the dispatchers') and the import machinery's left out, in the exception and in its causes
    and contexts."""
    shown = traceback.TracebackException.from_exception(exc)
    pending, seen = [shown], set()
    while pending:
        part = pending.pop()
        if id(part) in seen:
            continue
        seen.add(id(part))
        part.stack = traceback.StackSummary.from_list(
            [frame for frame in part.stack if not _is_machinery(frame.filename)])
        pending.extend(p for p in (part.__cause__, part.__context__) if p is not None)
        pending.extend(getattr(part, "exceptions", None) or ())
    return "".join(shown.format())


def _module_filter(modules: list[str] | None) -> Callable[[Any], bool]:
    if not modules:
        return lambda fn: True
    prefixes = tuple(modules)
    return lambda fn: module_of(fn).startswith(prefixes)


def _print_counts(ctx: CountContext, options: argparse.Namespace, out: TextIO) -> None:
    keep = _module_filter(options.modules)
    by_name: Counter[str] = Counter()  # (closures made at each call: one function, one line)
    for fn, n in ctx.counts.items():
        if keep(fn):
            by_name[describe(fn)] += n
    rows = by_name.most_common(options.top)
    for name, n in rows:
        print(f"{n:>8}  {name}", file=out)
    shown = sum(n for _, n in rows)
    if shown == ctx.total:
        print(f"{ctx.total:>8}  calls in all", file=out)
    else:
        print(f"{shown:>8}  shown, of {ctx.total} calls in all", file=out)


def _print_trace(ctx: TraceContext, options: argparse.Namespace, out: TextIO) -> None:
    text = ctx.render(options.depth, options.modules)
    if not text and options.modules:
        text = f"(no calls of functions from modules {', '.join(options.modules)})"
    print(text, file=out)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``); return the exit status."""
    try:
        options = _parser().parse_args(argv)
    except SystemExit as exit_:  # --help, or a usage error argparse has already printed
        return exit_.code if isinstance(exit_.code, int) else 2
    out = sys.stdout
    dot = getattr(options, "dot", None)
    try:
        fn = _resolve(options.target)
        args, kwargs = _arguments(options.args)
        if dot is not None:
            try:  # find out now, not after a long run, that the file cannot be written
                with open(dot, "w", encoding="utf-8"):
                    pass
            except OSError as exc:
                raise _UsageError(f"cannot write --dot file: {exc}") from None
    except _UsageError as error:
        print(f"{_PROG} {options.command}: error: {error}", file=sys.stderr)
        return 2
    except Exception as exc:  # importing the user's module ran its code, and that code raised
        print(_user_traceback(exc), end="", file=sys.stderr)
        return 1

    ctx = {"trace": TraceContext, "count": CountContext, "log": LogContext}[options.command]()
    failure = None
    try:
        result = overdub(ctx, fn, *args, **kwargs)
    except BrokenPipeError:  # the log's reader went away (`| head`): python -m stops quietly
        raise
    except Exception as exc:  # the user's own error: show what was seen, then its traceback
        failure = exc
    if isinstance(ctx, TraceContext):
        _print_trace(ctx, options, out)
        if dot is not None:
            with open(dot, "w", encoding="utf-8") as dot_file:
                dot_file.write(ctx.to_dot(options.depth, options.modules))
            print(f"{_PROG}: wrote {dot}", file=sys.stderr)
    elif isinstance(ctx, CountContext):
        _print_counts(ctx, options, out)
    if failure is not None:
        out.flush()
        print(_user_traceback(failure), end="", file=sys.stderr)
        return 1
    print(f"-> {result!r}", file=out)
    return 0
