"""CUDA-event timing shared by the PyTorch sides of the backend benchmarks (run beside Rusty's on the GPU machine)."""
import torch


def timed(fn, reps):
    """Seconds per call of fn: 3 warm-up calls, then the best of 3 CUDA-event timings of `reps` calls each."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = float("inf")
    for _ in range(3):
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        torch.cuda.synchronize()
        best = min(best, start.elapsed_time(end) / reps / 1e3)
    return best
