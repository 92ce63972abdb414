"""Code generation backends: ``llvm`` (the host CPU through llvmlite) and ``vta`` (instruction
streams for the accelerator)."""
