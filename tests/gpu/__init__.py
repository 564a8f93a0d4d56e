"""Tests of overdub_gpu: the swap table, array-backend contexts, derivatives on a backend."""
