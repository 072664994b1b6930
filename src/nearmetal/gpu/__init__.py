"""GPUs in containers: one --gpus switch for every runtime and mode (docs/gpu.md).

select: what `--gpus all|N|ID,ID...` names among the GPUs found (discovery.gpu);
stage: the host's driver libraries staged for a container, and the image's own checked;
plan: what a component's GPU request adds to its launch (runtime arguments, mounts,
devices, the per-rank CUDA_VISIBLE_DEVICES wrapper); report: doctor's GPU table;
witness: which libcuda, driver and GPU each rank used.
"""
