"""The core does not lean on its biggest client: it runs, tags and traces without NumPy.

Runs in a fresh interpreter so that no other test module has imported NumPy first.
"""

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent('''
    import math, statistics, sys
    from overdub import Context, metadata, overdub, tag, untag
    from overdub.contexts import CountContext, TraceContext

    def f(xs):
        return statistics.fmean(xs) + math.fsum(map(abs, xs))

    counts = CountContext()
    assert overdub(counts, f, [1.0, -2.0, 3.0]) == f([1.0, -2.0, 3.0])
    assert counts.counts[abs] == 3
    trace = TraceContext()
    overdub(trace, f, [1.0])
    assert trace.trace[0][0][0] is f

    ctx = Context()
    def store(v):
        box = {}
        box["k"] = v
        items = [v]
        items.append(box["k"])
        return items.pop()
    out = overdub(ctx, store, tag(1.5, ctx, "meta"))
    assert untag(out, ctx) == 1.5 and metadata(out, ctx) == "meta"
    assert "numpy" not in sys.modules, "the core imported numpy"
    print("ok")
''')


def test_core_runs_without_importing_numpy(tmp_path, child_env):
    script = tmp_path / "core_alone.py"  # a real file: overdub rewrites functions from source
    script.write_text(SCRIPT)
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                            timeout=120, env=child_env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
