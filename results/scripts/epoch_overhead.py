"""What a training run spends between epochs (evaluation, checkpoint, and the wait for the next epoch's first batch),
read from a mimetic_vit.py log alone. Usage:

    python results/scripts/epoch_overhead.py results/gpu-h100-table1-authors-partial/log-*.txt

Each step line's img/s is the mean since the estimate, so step S was reached S * batch / (img/s) seconds after it
(to about 0.1 s: img/s is printed to 4 digits). Two step lines in one epoch give the time a step takes; two that
straddle an epoch's end give that time for their steps plus the time between epochs. The first five epochs are left
out (compilation, warmup of the loader).
"""
import statistics
import sys


def step_times(log):
    """[(step, epoch, seconds since the estimate)] of the step lines; the batch size and the steps an epoch."""
    lines = open(log).read().splitlines()
    config = dict(word.split("=", 1) for word in lines[0].split()[1:])
    points = []
    for line in lines:
        if line.startswith("step "):
            fields = line.split(" | ")
            step, epoch = int(fields[0].split()[1].split("/")[0]), int(fields[1].split()[1])
            rate = float(next(f for f in fields if f.endswith(" img/s")).split()[0])
            points.append((step, epoch, step * int(config["batch_size"]) / rate))
            total = int(fields[0].split("/")[1])
    return points, int(config["batch_size"]), total // int(config["epochs"])


def main(logs):
    for log in logs:
        points, batch, steps = step_times(log)
        pairs = list(zip(points, points[1:]))
        per_step = {}  # epoch: [seconds a step, between two lines within it]
        for (s0, e0, t0), (s1, e1, t1) in pairs:
            if e0 == e1:
                per_step.setdefault(e0, []).append((t1 - t0) / (s1 - s0))
        between = []
        for (s0, e0, t0), (s1, e1, t1) in pairs:
            if e1 == e0 + 1 and e0 > 5 and e0 in per_step:
                between.append(t1 - t0 - statistics.median(per_step[e0] + per_step.get(e1, [])) * (s1 - s0))
        ends = [(s, t) for s, e, t in points if s == e * steps and e > 5]  # the last step line of each epoch
        (s0, t0), (s1, t1) = ends[0], ends[-1]
        epoch = (t1 - t0) * steps / (s1 - s0)  # whole epochs, steps and all between them
        gap = statistics.median(between)
        print(f"{log}: {len(between)} epoch ends; between epochs {gap:.2f} s (median; mean {statistics.mean(between):.2f}, "
              f"range {min(between):.2f}-{max(between):.2f}); an epoch of {steps} steps of {batch} takes {epoch:.2f} s "
              f"in all (epochs {s0 // steps + 1}-{s1 // steps}): {100 * gap / epoch:.1f}% of it")


if __name__ == "__main__":
    main(sys.argv[1:])
