"""DLPack for bfloat16 on the CPU.

NumPy's DLPack exchange knows no bfloat16 (ml_dtypes' dtype is kind 'V' to it),
while DLPack has the type code kDLBfloat.  ember exports a bfloat16 array as
NumPy's uint16 capsule of the same memory with the dtype tag rewritten to
(kDLBfloat, 16 bits), and imports a bfloat16 capsule by the reverse rewrite, so
the exchange with PyTorch stays zero-copy.
"""
import ctypes

import numpy as np

from ember._core.dtypes import BFLOAT16

_K_DL_UINT, _K_DL_BFLOAT = 1, 4

_api = ctypes.pythonapi
_api.PyCapsule_GetName.restype = ctypes.c_char_p
_api.PyCapsule_GetName.argtypes = [ctypes.py_object]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]

# offset of DLTensor.dtype: data (8) + device (8) + ndim (4); the versioned
# managed tensor puts its DLTensor after version, manager_ctx, deleter and flags (32)
_DTYPE_OFFSET = {b"dltensor": 20, b"dltensor_versioned": 32 + 20}


class CapsuleProducer:
    """Presents a bare DLPack capsule as a CPU DLPack producer (it can be consumed once)."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)


def _dtype_bytes(capsule):
    """The (code, bits) bytes of an unconsumed DLPack capsule's dtype, as a ctypes array."""
    name = _api.PyCapsule_GetName(capsule)
    if name not in _DTYPE_OFFSET:
        raise BufferError(f"from_dlpack: not an unconsumed DLPack capsule (name {name!r})")
    ptr = _api.PyCapsule_GetPointer(capsule, name)     # the (versioned) managed tensor
    return (ctypes.c_uint8 * 2).from_address(ptr + _DTYPE_OFFSET[name])


def _retag(capsule, src, dst):
    tag = _dtype_bytes(capsule)
    if (tag[0], tag[1]) != src:
        return False
    tag[0], tag[1] = dst
    return True


def retag_as_bfloat16(capsule):
    """Tag a uint16 DLPack capsule (of bfloat16 memory) as kDLBfloat, 16 bits."""
    if not _retag(capsule, (_K_DL_UINT, 16), (_K_DL_BFLOAT, 16)):
        raise BufferError("__dlpack__: expected a uint16 capsule to tag as bfloat16")
    return capsule


def export_bfloat16(view, **kwargs):
    """DLPack capsule of NumPy bfloat16 array `view` (tagged kDLBfloat, 16 bits)."""
    return retag_as_bfloat16(view.view(np.uint16).__dlpack__(**kwargs))


def import_bfloat16(obj):
    """A NumPy bfloat16 array over a CPU producer's (or bare capsule's) bfloat16
    memory, or None when its dtype is not bfloat16."""
    capsule = obj if type(obj).__name__ == "PyCapsule" else obj.__dlpack__()
    if not _retag(capsule, (_K_DL_BFLOAT, 16), (_K_DL_UINT, 16)):
        return None
    return np.from_dlpack(CapsuleProducer(capsule)).view(BFLOAT16)
