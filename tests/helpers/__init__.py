"""Helpers of the reliability tests: a mixed workload, the writer the crash tests
kill, the contenders of the concurrency tests, and the checks run on a store."""
