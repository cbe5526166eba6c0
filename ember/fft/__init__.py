"""ember.fft: discrete Fourier transforms (``numpy.fft`` and the Array API fft extension).

Every function of ``numpy.fft`` with NumPy's signature (``n`` / ``s``, ``axis`` /
``axes``, ``norm`` "backward" / "ortho" / "forward", ``out=``), PyTorch's ``dim=``
spelling, and SciPy's / PyTorch's ``hfftn``, ``ihfftn``, ``hfft2``, ``ihfft2``.
float32 input gives complex64 / float32 results (float64: complex128 / float64);
integer and bool input computes in the default float dtype, float16 and bfloat16 in
float32.  On the host the work is SciPy's pocketfft (``scipy.fft``; transforms of 4M
points or more use ``ember.get_num_threads()`` workers) on zero-copy views; on
a GPU, cuFFT through CuPy.  Every transform is differentiable (to any order).

>>> import ember
>>> x = ember.asarray([1.0, 2.0, 3.0, 4.0])
>>> ember.fft.irfft(ember.fft.rfft(x), n=4).tolist()
[1.0, 2.0, 3.0, 4.0]
"""
from ember.fft._transforms import (fft, ifft, fftn, ifftn, fft2, ifft2, rfft, irfft,  # noqa: F401
                                   rfftn, irfftn, rfft2, irfft2, hfft, ihfft, hfftn,
                                   ihfftn, hfft2, ihfft2)
from ember.fft._helpers import fftfreq, rfftfreq, fftshift, ifftshift     # noqa: F401

__all__ = ["fft", "ifft", "fftn", "ifftn", "fft2", "ifft2", "rfft", "irfft", "rfftn", "irfftn",
           "rfft2", "irfft2", "hfft", "ihfft", "hfftn", "ihfftn", "hfft2", "ihfft2",
           "fftfreq", "rfftfreq", "fftshift", "ifftshift"]
