"""conv2d variants of the CS6235 report (registered on import by gpuopt.conv)."""
