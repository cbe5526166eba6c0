# cython: language_level=3
"""(placeholder: filled by its owner)"""
