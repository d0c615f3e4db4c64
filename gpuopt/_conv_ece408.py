"""conv2d variants of the ECE408 Fashion-MNIST report (registered on import by gpuopt.conv)."""
