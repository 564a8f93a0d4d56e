"""Tests of the overdub core: rewriting, dispatch, tagging, contexts, the CLI, tracebacks."""
