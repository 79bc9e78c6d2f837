"""Exceptions raised for bad input."""


class GraphInputError(ValueError):
    """Input that cannot be used as given: the message names the problem and the values."""
