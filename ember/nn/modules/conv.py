"""(placeholder: filled by its owner)"""
__all__ = []
