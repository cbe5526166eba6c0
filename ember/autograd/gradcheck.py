"""Finite-difference gradient checks. Being written."""


def gradcheck(*a, **k):
    raise NotImplementedError


def gradgradcheck(*a, **k):
    raise NotImplementedError
