#!/usr/bin/env python3
# Run on a GPU machine after `pip install .`, from outside the checkout: python3 scripts/probe_clock.py
# The MNIST stage timings (notes/ece408-reports.md): the SM clock and power the H200 holds under sustained FFMA work (cuBLAS SGEMM, the MNIST `fast` stage),
# so the strict-FP32 floor can be stated at the clock the chip really runs, not the datasheet's boost clock.
import subprocess, time, numpy as np, torch, gpuopt
from gpuopt.models import MnistCNN
torch.backends.cuda.matmul.allow_tf32 = False; torch.backends.cudnn.allow_tf32 = False

def sample(fn, seconds, label, flops_per_call):
    log = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active",
                            "--format=csv,noheader,nounits", "-lms", "100"], stdout=subprocess.PIPE, text=True)
    torch.cuda.synchronize(); t0 = time.perf_counter(); calls = 0
    while time.perf_counter() - t0 < seconds:
        fn(); calls += 1
        if calls % 10 == 0: torch.cuda.synchronize()
    torch.cuda.synchronize(); dt = time.perf_counter() - t0
    log.terminate(); rows = [r.split(", ") for r in log.communicate()[0].strip().splitlines()]
    rows = rows[len(rows) // 4:]  # past the ramp
    clk = [float(r[0]) for r in rows]; pw = [float(r[1]) for r in rows]
    print(f"{label}: {dt / calls * 1e3:.4f} ms a call, {flops_per_call * calls / dt / 1e12:.1f} TFLOP/s; SM clock "
          f"median {np.median(clk):.0f} MHz (min {min(clk):.0f}, max {max(clk):.0f}), power median {np.median(pw):.0f} W; "
          f"throttle reasons {sorted(set(r[3] for r in rows))}; FFMA peak at that clock "
          f"{132 * 128 * 2 * np.median(clk) * 1e6 / 1e12:.1f} TFLOP/s", flush=True)

a = torch.randn(8192, 8192, device="cuda"); b = torch.randn(8192, 8192, device="cuda")
sample(lambda: torch.mm(a, b), 6, "cuBLAS SGEMM 8192^3 (TF32 off)", 2 * 8192 ** 3)
net = MnistCNN.from_file()
x = gpuopt.to_device(np.random.default_rng(0).random((10000, 28, 28), dtype=np.float32))
for stage in ("fast", "winograd"):
    sample(lambda: net.forward(x, variant=stage), 6, f"MNIST {stage} stage, 10,000 images, device-resident", 2 * 3.87e6 * 1e4)
