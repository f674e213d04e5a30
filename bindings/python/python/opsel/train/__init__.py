"""Training helpers (scikit-learn baselines, model export)."""
