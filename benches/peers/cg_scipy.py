#!/usr/bin/env python3
"""Peer for benches/cg.rs: scipy.sparse.linalg.cg with a matrix-free LinearOperator (7-point
Laplacian via numpy slicing, Dirichlet zero) on 128^3, 200 fixed iterations, f32 and f64.

Run: /work/venv/bin/python benches/peers/cg_scipy.py   -> ms per iteration (best of 3).
rtol = atol = 0 so that every one of the 200 iterations runs (scipy's test is norm(r) < tol).
"""
import time

import numpy as np
from scipy.sparse.linalg import LinearOperator, cg

N = 128
ITERS = 200


def laplacian(dtype):
    shape = (N, N, N)

    def matvec(v):
        u = v.reshape(shape)
        out = -6.0 * u
        out[1:, :, :] += u[:-1, :, :]
        out[:-1, :, :] += u[1:, :, :]
        out[:, 1:, :] += u[:, :-1, :]
        out[:, :-1, :] += u[:, 1:, :]
        out[:, :, 1:] += u[:, :, :-1]
        out[:, :, :-1] += u[:, :, 1:]
        return out.reshape(-1).astype(dtype, copy=False)

    n = N ** 3
    return LinearOperator((n, n), matvec=matvec, dtype=dtype)


def rhs(dtype):
    k = np.arange(N ** 3)
    return (((k % 977) / 977.0 - 0.5) + ((k * 7919) % 101) * 1e-3).astype(dtype)


def main():
    for dtype in (np.float32, np.float64):
        a, b = laplacian(dtype), rhs(dtype)
        best = float("inf")
        for _ in range(3):
            count = [0]

            def cb(_xk):
                count[0] += 1

            t = time.perf_counter()
            cg(a, b, rtol=0.0, atol=0.0, maxiter=ITERS, callback=cb)
            dt = time.perf_counter() - t
            assert count[0] == ITERS, count[0]
            best = min(best, dt)
        print(f"scipy cg {np.dtype(dtype).name}: {best * 1e3 / ITERS:.2f} ms/iteration "
              f"({ITERS} iterations, {N}^3, matrix-free 7-point LinearOperator)")


if __name__ == "__main__":
    main()
