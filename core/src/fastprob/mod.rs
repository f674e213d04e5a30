//! Early-stopping throughput prediction (document 004, FastProb).
