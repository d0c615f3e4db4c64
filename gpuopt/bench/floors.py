"""Floors (rooflines) the studies share: a GPU's FP32 peak and DRAM bandwidth from its properties
(``gpuopt.device_info()`` or a results file's ``meta["gpu"]``), and the time floors of moving bytes at that
bandwidth and of doing FLOPs at that peak."""

from __future__ import annotations

from typing import Any, Mapping

__all__ = ["FP32_LANES_PER_SM", "fp32_peak", "dram_bandwidth", "memory_floor_us", "compute_floor_us"]

#: FP32 lanes (CUDA cores) per SM where it is not 128 (Pascal GP100, Volta, Turing, A100).
FP32_LANES_PER_SM: dict[tuple[int, int], int] = {(6, 0): 64, (7, 0): 64, (7, 2): 64, (7, 5): 64, (8, 0): 64}


def fp32_peak(gpu: Mapping[str, Any] | None) -> tuple[float | None, str]:
    """FP32 peak in GFLOP/s of a GPU (``gpuopt.device_info()`` or ``meta["gpu"]``) and how it was computed.

    peak = 2 (an FMA is two flops) x SMs x FP32 lanes per SM (128 from Ampere GA10x / Ada /
    Hopper on; 64 on GP100, Volta, Turing and A100) x ``clock_rate_khz`` (the boost clock
    the driver reports). An H200 SXM: 2 x 132 x 128 x 1.98 GHz = 66.9 TFLOP/s.
    """
    if not gpu:
        return None, "no GPU"
    sms, khz = gpu.get("multiprocessors"), gpu.get("clock_rate_khz")
    if not sms or not khz:
        return None, "unknown (device_info() has no multiprocessors / clock_rate_khz)"
    cc = gpu.get("compute_capability")
    try:
        major, minor = (int(x) for x in (str(cc).split(".") if isinstance(cc, str) else cc))
        lanes = FP32_LANES_PER_SM.get((major, minor), 128)
    except (TypeError, ValueError):
        lanes = 128
    peak = 2.0 * int(sms) * lanes * float(khz) * 1e3 / 1e9
    text = (f"2 x {int(sms)} SMs x {lanes} FP32 lanes x {float(khz) / 1e6:.3f} GHz (boost clock, "
            f"gpuopt.device_info() clock_rate_khz) = {peak / 1e3:.1f} TFLOP/s")
    return peak, text


def dram_bandwidth(gpu: Mapping[str, Any]) -> float:
    """DRAM bytes/s of a GPU from its properties: 2 (double data rate) x memory clock x bus width."""
    return 2 * gpu.get("memory_clock_rate_khz", 0) * 1e3 * gpu.get("memory_bus_width_bits", 0) / 8


def memory_floor_us(nbytes: float, bandwidth: float | None) -> float | None:
    """µs to move ``nbytes`` at ``bandwidth`` bytes/s (None without a bandwidth)."""
    return nbytes / bandwidth * 1e6 if bandwidth else None


def compute_floor_us(flops: float, gflops: float | None) -> float | None:
    """µs to do ``flops`` operations at ``gflops`` GFLOP/s (None without a peak)."""
    return flops / (gflops * 1e9) * 1e6 if gflops else None
