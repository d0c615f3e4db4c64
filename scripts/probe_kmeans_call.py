#!/usr/bin/env python3
# Run on a GPU machine after `pip install .`, from outside the checkout: python3 scripts/probe_kmeans_call.py
# Where kmeans04's per-call fixed cost goes (device_persistent): host wall of the Python layers, the launcher alone,
# and measure() of 1- and 10-loop calls, with cProfile of the Python path.
import cProfile, pstats, time, numpy as np, gpuopt
from gpuopt._ext import cuda_module
from gpuopt.bench.harness import measure
_cuda = cuda_module()
rng = np.random.default_rng(0)
x = gpuopt.to_device(rng.uniform(0, 1, (488_565, 8)).astype(np.float32))
n, d, k = 488_565, 8, 3
call = lambda it: gpuopt.kmeans(x, k, threshold=0.0, max_iter=it, variant="device_persistent")
for it in (1, 10):
    st = measure(lambda: call(it), warmup=10, repeat=50, flush_l2=True)
    print(f"kmeans() device_persistent max_iter={it}: {st.median_ms * 1e3:.2f} us (hidden {st.overhead_hidden})", flush=True)
cent = gpuopt.to_device(np.zeros((k, d), np.float32)); mem = gpuopt.to_device(np.zeros(n, np.int32))
launcher = getattr(_cuda, "kmeans_device_persistent")
args = lambda it: _cuda.KMeansArgs(x.ptr, cent.ptr, mem.ptr, n, d, k, 0.0, it)  # noqa: E731
for it in (1, 10):
    st = measure(lambda: launcher(args(it), blocks=0, x_memory="auto", init_dev_ptr=0), warmup=10,
                 repeat=50, flush_l2=True)
    print(f"launcher alone max_iter={it}: {st.median_ms * 1e3:.2f} us", flush=True)
for it in (1, 10):
    call(it); t0 = time.perf_counter(); R = 2000
    for _ in range(R): call(it)
    print(f"host wall, kmeans() max_iter={it}: {(time.perf_counter() - t0) / R * 1e6:.1f} us a call", flush=True)
    t0 = time.perf_counter()
    for _ in range(R): launcher(args(it), blocks=0, x_memory="auto", init_dev_ptr=0)
    print(f"host wall, launcher max_iter={it}: {(time.perf_counter() - t0) / R * 1e6:.1f} us a call", flush=True)
pr = cProfile.Profile(); pr.enable()
for _ in range(2000): call(1)
pr.disable(); pstats.Stats(pr).sort_stats("tottime").print_stats(25)
