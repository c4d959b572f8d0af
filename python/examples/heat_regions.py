"""heat_regions.py: heat.py with its state protected in memory instead of
saved as files: the rod and the step counter are numpy arrays registered with
dlckpt.protect(); every checkpoint() stores them, and after a relaunch
dlckpt.recover() copies them back in place.
Run: dlckpt-run --nodes 4 --spares 1 --preload -- python3 heat_regions.py [STEPS EVERY SLEEP]
A run that loses a node (--kill-node vn1 --at checkpoint:3) prints the same checksum."""
import sys, time
import numpy as np
import dlckpt

args = [float(a) for a in sys.argv[1:4]] + [40, 5, 0.05][len(sys.argv[1:4]):]
steps, every, pause = int(args[0]), int(args[1]), args[2]
dlckpt.init()
x = np.linspace(0.0, 1.0, 4096)
u = np.exp(-200.0 * (x - 0.2 - 0.15 * dlckpt.rank()) ** 2)
step = np.zeros(1, dtype=np.int64)
dlckpt.protect(0, u)                             # the arrays themselves, updated in place
dlckpt.protect(1, step)
if dlckpt.restarted_epoch() > 0:                 # relaunched after a failure
    dlckpt.recover()
    print(f"rank {dlckpt.rank()}: restarted from step {int(step[0])}", flush=True)
lap = np.empty(u.size - 2)
while step[0] < steps:
    np.subtract(u[2:] + u[:-2], 2.0 * u[1:-1], out=lap)    # the explicit step, in place:
    u[1:-1] += 0.25 * lap                                  # u must stay the protected buffer
    u[[0, -1]] = u[[1, -2]]                                # insulated ends
    step += 1
    if step[0] % every == 0:
        dlckpt.checkpoint()                                # stores u and step as they are now
    time.sleep(pause)                                      # so that a kill lands mid-run
total = dlckpt.allreduce_sum(float(np.sum(u * np.arange(u.size))))
if dlckpt.rank() == 0:
    print(f"checksum: {total:.17g}", flush=True)
dlckpt.finalize()
