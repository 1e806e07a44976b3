# The device's copy bandwidth in GB/s (bytes read + written), measured with PyTorch: the
# roofline's denominator for bench/cuda/run.sh and peer.sh. Prints the number alone.
import torch
x = torch.empty(4 << 30, dtype=torch.uint8, device="cuda"); y = torch.empty_like(x)
for _ in range(3): y.copy_(x)
s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
s.record()
for _ in range(10): y.copy_(x)
e.record(); torch.cuda.synchronize()
print("%.0f" % (2 * 10 * x.numel() / (s.elapsed_time(e) / 1e3) / 1e9))
