"""Tests of the project rather than a package: packaging, layering, docs, examples, benchmarks."""
