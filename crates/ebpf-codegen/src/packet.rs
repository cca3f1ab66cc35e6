//! Raw frames for `BPF_PROG_TEST_RUN` (filled in by the next commit).
