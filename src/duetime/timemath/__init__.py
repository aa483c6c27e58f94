"""Time math: wall clock and UTC, durations, "when", recurrences, backoff and rates.

Pure functions of their arguments: nothing here reads a clock, a store or the network, so every
DST decision can be tested exhaustively. It imports nothing of duetime's but ``errors``.
"""
