"""Instrument standard-library code you did not write: textwrap and statistics, traced and counted.

    python examples/trace_stdlib.py

Nothing in textwrap or statistics is changed or decorated: TraceContext records the call tree of
textwrap.fill (every call and operator, here filtered to textwrap's own functions and cut to a
depth), CountContext counts what statistics.mean calls.  The command line does the same without
code: python -m overdub trace textwrap:fill "'The quick brown fox'" width=15 --module textwrap
(see docs/cli.md).
"""

import statistics
import textwrap

from overdub import overdub
from overdub.contexts import CountContext, TraceContext, describe

TEXT = "The quick brown fox jumps over the lazy dog"

# How textwrap.fill works, as (depth, function) pairs: the outline main() finds in the trace.
FILL_OUTLINE = [
    (0, "textwrap.fill"),
    (1, "textwrap.TextWrapper"),                   # fill builds a TextWrapper(width=15)...
    (2, "textwrap.TextWrapper.__init__"),
    (1, "textwrap.TextWrapper.fill"),              # ...and calls its fill method,
    (2, "textwrap.TextWrapper.wrap"),              # which wraps:
    (3, "textwrap.TextWrapper._split_chunks"),     # split the text into chunks,
    (4, "textwrap.TextWrapper._munge_whitespace"),  # (tabs and newlines become spaces)
    (4, "textwrap.TextWrapper._split"),
    (3, "textwrap.TextWrapper._wrap_chunks"),      # then pack the chunks into lines
]


def outline(rendered):
    """``(depth, function)`` for each line of a rendered trace."""
    rows = []
    for line in rendered.splitlines():
        name = line.strip().split("(", 1)[0]
        rows.append(((len(line) - len(line.lstrip())) // 2, name))
    return rows


def trace_fill(width):
    tracer = TraceContext()
    wrapped = overdub(tracer, textwrap.fill, TEXT, width=width)
    assert wrapped == textwrap.fill(TEXT, width=width)  # the context changes nothing
    return tracer, wrapped


def count_mean(data):
    counter = CountContext()
    assert overdub(counter, statistics.mean, data) == statistics.mean(data)
    return counter


def main():
    tracer, wrapped = trace_fill(15)
    print(f"1. textwrap.fill(TEXT, width=15) -> {wrapped!r}")
    print("   its own functions (render(modules=['textwrap'])):")
    mine = tracer.render(modules=["textwrap"])
    print("   " + mine.replace("\n", "\n   "))
    assert outline(mine) == FILL_OUTLINE
    # The trace is data: the top call, with the keyword argument as given.
    (call, subtrace), = tracer.trace
    assert call == (textwrap.fill, (TEXT,), {"width": 15}) and len(subtrace) >= 2
    # Arguments are recorded by reference: _wrap_chunks pops the chunk list it is given, so the
    # trace shows that list as it is now, empty.
    assert "      textwrap.TextWrapper._wrap_chunks([])" in mine.splitlines()

    full = tracer.render()
    shallow = tracer.render(max_depth=2)
    print(f"   the whole tree has {len(full.splitlines())} calls and operators; "
          f"the top two levels ({len(shallow.splitlines())} lines):")
    print("   " + shallow.replace("\n", "\n   "))
    assert shallow.splitlines()[0] == f"textwrap.fill({TEXT!r}, width=15)"
    assert all(line.startswith("  ") and not line.startswith("    ")
               for line in shallow.splitlines()[1:])
    assert "  textwrap.TextWrapper(width=15)" in shallow.splitlines()
    dot = tracer.to_dot(modules=["textwrap"])
    assert dot.count("[label=") == len(FILL_OUTLINE) and dot.count("->") == len(FILL_OUTLINE) - 1

    data = [2.5, 3.25, 1.0, 4.75, 3.5] * 40
    counter = count_mean(data)
    print(f"\n2. statistics.mean of {len(data)} floats: {counter.total} calls and operators; "
          f"the five most frequent:")
    for fn, n in counter.counts.most_common(5):
        print(f"   {n:6}  {describe(fn)}")
    ratio = counter.counts[statistics._exact_ratio]
    print(f"   statistics._exact_ratio ran {ratio} times: mean is exact because it turns every "
          f"value into a fraction")
    assert ratio == len(data)   # called through C's map, and still seen
    assert counter.counts[float.as_integer_ratio] == len(data)


if __name__ == "__main__":
    main()
