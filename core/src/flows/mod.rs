//! Alpha-flow identification from sampled flow records (document 003, HNTES/AFTES).
