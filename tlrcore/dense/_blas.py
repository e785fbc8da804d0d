"""BLAS on one thread for the duration of a call.

Measured on the 2-core development machine (shared, OpenBLAS): at n = 2000 every
factorization here ran 4-7 times faster on one BLAS thread than on two, because the
per-column matrix-vector products are too small to amortize thread synchronization.
"""

import functools

from threadpoolctl import ThreadpoolController

_controller = None


def one_blas_thread(func):
    """Decorator: run `func` with BLAS limited to one thread."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        global _controller
        if _controller is None:
            _controller = ThreadpoolController()
        with _controller.limit(limits=1, user_api="blas"):
            return func(*args, **kwargs)

    return wrapper
