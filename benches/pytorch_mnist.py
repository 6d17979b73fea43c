"""PyTorch's examples/mnist CNN, timed like `trainer bench mnist`: training and inference img/s
at batch 64 on the same data, warm-up excluded, and the cores each phase kept busy (process CPU
time over wall time). For comparing the trainer's backends with
PyTorch itself on the same cores:

    eval "$(scripts/setup-torch.sh)"   # PyTorch 2.9.0 venv
    python benches/pytorch_mnist.py [DATA_DIR] [--steps 30] [--warmup 5] [--threads N]
        [--device cpu|cuda] [--json]

On `--device cuda` the model and the data live on the GPU, the clock waits for the GPU
(torch.cuda.synchronize) at both ends, and inference copies each batch's predictions to the host,
as the trainer's does. `--feed host` keeps the images on the host as bytes and normalises and
copies each training batch to the device in the step (`.to(device)`), as a loader without pinned
memory does: the host-fed question, beside the GPU-resident one. `--feed graph` (CUDA only)
captures the whole training step once as a CUDA graph (`torch.cuda.graphs`'s whole-network
capture: warm-up on a side stream, Adam with `capturable=True`, static input buffers) and
replays it per step after copying the batch into those buffers: the ceiling of a launch-free
step, reported beside the eager reference.

`trainer bench mnist --pytorch PYTHON` runs this script (embedded in the binary) in the same
run as its own backends and adds PyTorch's row to its table.
"""
import argparse, gzip, json, os, time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = self.dropout1(F.max_pool2d(x, 2))
        x = self.dropout2(F.relu(self.fc1(torch.flatten(x, 1))))
        return self.fc2(x)


def read_idx(data_dir, name):
    """An IDX file's bytes, gzipped (`name.gz`) or raw, as the trainer reads them."""
    path = os.path.join(data_dir, name)
    if os.path.exists(path + ".gz"):
        with gzip.open(path + ".gz") as f:
            return f.read()
    with open(path, "rb") as f:
        return f.read()


def load(data_dir, n):
    raw = read_idx(data_dir, "train-images-idx3-ubyte")
    lab = read_idx(data_dir, "train-labels-idx1-ubyte")
    n = min(n, (len(raw) - 16) // 784)
    x = torch.frombuffer(bytearray(raw[16:16 + n * 784]), dtype=torch.uint8).float().view(n, 1, 28, 28)
    y = torch.frombuffer(bytearray(lab[8:8 + n]), dtype=torch.uint8).long()
    return ((x / 255.0) - 0.1307) / 0.3081, y


def cpu_capability():
    """The SIMD level of ATen's CPU kernels (AVX512, AVX2, ...), or None on an old PyTorch."""
    try:
        return torch.backends.cpu.get_cpu_capability()
    except AttributeError:
        return None


def captured_step(model, opt, x0, y0, dev):
    """The training step captured once as a CUDA graph; returns `step(xb, yb)`, which copies the
    batch into the graph's static inputs and replays it (torch.cuda.graphs, whole-network
    capture). Three eager steps on a side stream first, as capture requires."""
    static_x, static_y = x0.clone(), y0.clone()
    side = torch.cuda.Stream(dev)
    side.wait_stream(torch.cuda.current_stream(dev))
    with torch.cuda.stream(side):
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            F.cross_entropy(model(static_x), static_y).backward()
            opt.step()
    torch.cuda.current_stream(dev).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        F.cross_entropy(model(static_x), static_y).backward()
        opt.step()

    def step(xb, yb):
        static_x.copy_(xb)
        static_y.copy_(yb)
        graph.replay()
    return step


def main():
    p = argparse.ArgumentParser()
    p.add_argument("data_dir", nargs="?", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--synthetic", action="store_true", help="random images instead of DATA_DIR")
    p.add_argument("--device", default="cpu", help="cpu or cuda[:N]")
    p.add_argument("--json", action="store_true", help="print one JSON line")
    p.add_argument("--feed", default="device", choices=["device", "host", "graph"],
                   help="training batches from data on the device, normalised and copied per "
                        "step, or the whole step replayed as a CUDA graph")
    a = p.parse_args()
    dev = torch.device(a.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit(f"--device {a.device}: torch {torch.__version__} sees no CUDA device")
    if a.feed == "graph" and dev.type != "cuda":
        raise SystemExit(f"--feed graph: CUDA graphs need a CUDA device, not --device {a.device}")
    sync = (lambda: torch.cuda.synchronize(dev)) if dev.type == "cuda" else (lambda: None)
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    bs, total = a.batch_size, a.steps + a.warmup
    if a.synthetic:
        x, y = torch.randn(bs * total, 1, 28, 28), torch.randint(0, 10, (bs * total,))
    else:
        x, y = load(a.data_dir, bs * total)
        reps = -(-bs * total // len(y))  # fewer images than steps need: wrap, as the trainer does
        x, y = x.repeat(reps, 1, 1, 1)[:bs * total], y.repeat(reps)[:bs * total]
    host_x, host_y = (x * 0.3081 + 0.1307) * 255.0, y  # the bytes, to normalise per step
    x, y = x.to(dev), y.to(dev)
    model = Net().to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, capturable=a.feed == "graph")
    model.train()
    step = captured_step(model, opt, x[:bs], y[:bs], dev) if a.feed == "graph" else None
    for i in range(total):
        if i == a.warmup:
            sync()
            t0, c0 = time.perf_counter(), time.process_time()
        if a.feed == "host":
            sl = slice(i * bs, (i + 1) * bs)
            xb = (((host_x[sl] / 255.0) - 0.1307) / 0.3081).to(dev)
            yb = host_y[sl].to(dev)
        else:
            xb, yb = x[i * bs:(i + 1) * bs], y[i * bs:(i + 1) * bs]
        if step is not None:
            step(xb, yb)
            continue
        opt.zero_grad()
        F.cross_entropy(model(xb), yb).backward()
        opt.step()
    sync()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    train, train_threads = bs * a.steps / wall, cpu / wall
    model.eval()
    with torch.no_grad():
        for i in range(total):
            if i == a.warmup:
                sync()
                t0, c0 = time.perf_counter(), time.process_time()
            model(x[i * bs:(i + 1) * bs]).argmax(1).cpu()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    infer, infer_threads = bs * a.steps / wall, cpu / wall
    if a.json:
        print(json.dumps({"torch": torch.__version__, "threads": a.threads, "device": str(dev),
                          "cpu_capability": cpu_capability(),
                          "gpu": torch.cuda.get_device_name(dev) if dev.type == "cuda" else None,
                          "interop_threads": torch.get_num_interop_threads(), "feed": a.feed,
                          "train_img_per_s": train, "infer_img_per_s": infer,
                          "train_threads_used": train_threads,
                          "infer_threads_used": infer_threads}))
    else:
        print(f"pytorch {torch.__version__} on {dev}, threads {a.threads}: train {train:.1f} img/s "
              f"({train_threads:.2f} cores busy), infer {infer:.1f} img/s ({infer_threads:.2f})")


if __name__ == "__main__":
    main()
