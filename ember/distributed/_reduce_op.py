"""``ReduceOp``: how the collectives combine the ranks' values (shared by the MPI
process group, ember/distributed/_c10d.py, and the NCCL backend, _nccl.py, which
_c10d imports).
"""
import enum

__all__ = ["ReduceOp"]


class ReduceOp(enum.Enum):
    """How ``all_reduce`` / ``reduce`` / ``reduce_scatter`` combine the ranks' values.

    >>> from ember.distributed import ReduceOp
    >>> ReduceOp.SUM, ReduceOp("max")
    (<ReduceOp.SUM: 'sum'>, <ReduceOp.MAX: 'max'>)
    """
    SUM = "sum"
    AVG = "avg"
    PRODUCT = "prod"
    MIN = "min"
    MAX = "max"
    BAND = "band"
    BOR = "bor"
    BXOR = "bxor"

    @classmethod
    def _missing_(cls, value):
        if isinstance(value, str):
            v = value.lower()
            if v == "product":
                return cls.PRODUCT
            if v == "mean":
                return cls.AVG
            for m in cls:
                if m.value == v:
                    return m
        return None
