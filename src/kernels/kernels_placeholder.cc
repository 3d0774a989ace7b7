// Replaced by the real kernels.
