//! Utility-based CCA selection with online learning (document 002, DPS).
