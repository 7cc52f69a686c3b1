"""GPUs inside a node: nvidia-smi topo -m / NVML readers, the link model, NVLink islands and pick_devices."""
