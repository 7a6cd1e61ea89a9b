"""The classroom: the notebooks' figures, explorers, exercise checkers and set-up check.

Nothing in the book (tinyllm/) imports it; it uses only the book's public names.
"""
