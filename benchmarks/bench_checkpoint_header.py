"""ember.load against the `safetensors` package on headers near the format's limit
(100,000,000 bytes): time and peak memory, each load in a fresh process.

    python benchmarks/bench_checkpoint_header.py            # the three files, ~100 MB headers
    python benchmarks/bench_checkpoint_header.py --scale 0.1  # headers of ~10 MB

Files: "many" (about 1.4 million small tensors), "meta" (one huge metadata string),
"shape" (one tensor whose shape lists 50 million dimensions: both must refuse it).
"header" rows parse and check the header only (safetensors: safe_open); "load" rows
build every array (safetensors: safetensors.numpy.load_file).
"""
import argparse
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile

LIMIT = 100_000_000

_RUN = {      # reader: (imports, untimed; the timed load)
    "ember load": ("import ember", "r = len(ember.load(P))"),
    "ember header": ("from ember import serialization as s, _checkpoint_io as c",
                     "fh, n = c.open_regular(P); r = len(s._read_layout(P, n, fh)[0])"),
    "safetensors load": ("from safetensors.numpy import load_file", "r = len(load_file(P))"),
    "safetensors header": ("from safetensors import safe_open",
                           "with safe_open(P, 'np') as f: r = len(f.keys())"),
}
_WRAP = """
import resource, sys, time
{setup}
P = sys.argv[1]
t = time.perf_counter()
try:
{body}
except Exception as e:
    r = type(e).__name__
print(round(time.perf_counter() - t, 2), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024, r)
"""


def write_files(folder, scale):
    size = int(LIMIT * scale) - 1000
    paths = {}
    parts, off, total, i = [], 0, 2, 0
    while total < size - 200:
        s = '"t%d":{"dtype":"F32","shape":[1],"data_offsets":[%d,%d]}' % (i, off, off + 4)
        parts.append(s)
        total += len(s) + 1
        off += 4
        i += 1
    files = {
        "many": (("{" + ",".join(parts) + "}").encode(), b"\0" * off),
        "meta": (json.dumps({"__metadata__": {"k": "x" * (size - 100)},
                             "a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode(),
                 b"\0" * 4),
        "shape": (('{"a":{"dtype":"U8","shape":[' + ",".join(["1"] * ((size - 200) // 2))
                   + '],"data_offsets":[0,1]}}').encode(), b"\0"),
    }
    for name, (raw, data) in files.items():
        raw += b" " * (-(len(raw) + 8) % 8)
        paths[name] = os.path.join(folder, name + ".safetensors")
        with open(paths[name], "wb") as f:
            f.write(struct.pack("<Q", len(raw)) + raw + data)
    return paths


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--scale", type=float, default=1.0, help="header size / 100,000,000")
    ap.add_argument("--files", default="many,meta,shape", help="which files (comma-separated)")
    ap.add_argument("--repeat", type=int, default=3,
                    help="runs of each reader, interleaved; the median is shown")
    ap.add_argument("--write-to", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.write_to:
        write_files(a.write_to, a.scale)
        return
    with tempfile.TemporaryDirectory() as folder:
        # written by a child: a process's peak RSS survives exec, so this one stays small
        subprocess.run([sys.executable, __file__, "--scale", str(a.scale), "--write-to", folder],
                       check=True)
        paths = {n: os.path.join(folder, n + ".safetensors") for n in a.files.split(",")}
        print(f"{'file':6} {'reader':20} {'seconds':>8} {'peak MB':>8}  result   "
              f"(median of {a.repeat}, interleaved)")
        for name, path in paths.items():
            runs = {reader: [] for reader in _RUN}
            for _ in range(a.repeat):
                for reader, (setup, body) in _RUN.items():
                    code = _WRAP.format(setup=setup,
                                        body="\n".join("    " + ln for ln in body.splitlines()))
                    out = subprocess.run([sys.executable, "-c", code, path], capture_output=True,
                                         text=True).stdout.split()
                    runs[reader].append((out + ["nan", "nan", "?"])[:3])
            for reader, got in runs.items():
                secs = statistics.median(float(g[0]) for g in got)
                mb = statistics.median(float(g[1]) for g in got)
                print(f"{name:6} {reader:20} {secs:8.2f} {mb:8.0f}  {got[-1][2]}", flush=True)


if __name__ == "__main__":
    main()
