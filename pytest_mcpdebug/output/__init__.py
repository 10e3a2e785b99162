"""Captured output: what a test writes, read live from pytest's capture and cut into bounded lines."""
