//! Seeded synthetic multi-day flow records (notes §10).
