"""Evaluation studies of the classifier and OPS (``python -m opsel_eval``); see ``__main__``."""
