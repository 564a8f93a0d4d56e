"""Tests of overdub_ad, and its program fuzzer (`python -m tests.ad.fuzz`)."""
