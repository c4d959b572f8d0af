"""heat.py: every rank diffuses heat along its own rod (numpy), checkpoints
its state through dlckpt every EVERY steps, and rank 0 prints the sum over all
rods. Run: dlckpt-run --nodes 4 --spares 1 --preload -- python3 heat.py [STEPS EVERY SLEEP]
A run that loses a node (--kill-node vn1 --at checkpoint:3) prints the same checksum."""
import sys, time
import numpy as np
import dlckpt

args = [float(a) for a in sys.argv[1:4]] + [40, 5, 0.05][len(sys.argv[1:4]):]
steps, every, pause = int(args[0]), int(args[1]), args[2]
dlckpt.init()
if dlckpt.restarted_epoch() > 0:                 # relaunched after a failure
    state = dlckpt.load_arrays("heat")
    u, step = state["u"], int(state["step"])
    print(f"rank {dlckpt.rank()}: restarted from step {step}", flush=True)
else:
    x = np.linspace(0.0, 1.0, 4096)
    u, step = np.exp(-200.0 * (x - 0.2 - 0.15 * dlckpt.rank()) ** 2), 0
while step < steps:
    u[1:-1] += 0.25 * (u[2:] - 2.0 * u[1:-1] + u[:-2])     # explicit diffusion step
    u[0], u[-1] = u[1], u[-2]                              # insulated ends
    step += 1
    if step % every == 0:
        dlckpt.save_arrays("heat", u=u, step=step)         # /dlckpt/python/heat.r<rank>.npz
        dlckpt.checkpoint()
    time.sleep(pause)                                      # so that a kill lands mid-run
total = dlckpt.allreduce_sum(float(np.sum(u * np.arange(u.size))))
if dlckpt.rank() == 0:
    print(f"checksum: {total:.17g}", flush=True)
dlckpt.finalize()
