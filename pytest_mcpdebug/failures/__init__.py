"""Failures: a snapshot of the failing frames for every failure, and a failing test held alive for an
agent (its live frames, evaluate)."""
