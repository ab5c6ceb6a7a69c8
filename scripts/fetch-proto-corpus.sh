#!/usr/bin/env bash
# Fetches a corpus of real-world .proto files for cornflakes-codegen's corpus test
# (crates/cornflakes-codegen/tests/corpus.rs), never committed:
#   DIR/googleapis/  the 63 files of the PyPI wheel `googleapis-common-protos` (google/api,
#                    google/rpc, google/type, ...), downloaded with pip;
#   DIR/wkt/         protobuf's well-known types (google/protobuf/*.proto, descriptor.proto
#                    included), copied from the ones cornflakes-codegen ships.
# Usage: scripts/fetch-proto-corpus.sh DIR   (exits non-zero, saying why, when it cannot)
set -euo pipefail
dir=${1:?usage: fetch-proto-corpus.sh DIR}
version=1.76.0
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
if [ -f "$dir/.complete" ]; then exit 0; fi
pip=$(command -v pip3 || command -v pip || true)
[ -n "$pip" ] || { echo "pip is not installed" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$pip" download --quiet --no-deps --only-binary=:all: "googleapis-common-protos==$version" -d "$tmp" >&2
python3 - "$tmp" "$dir/googleapis" <<'PY'
import glob, os, sys, zipfile
wheel = glob.glob(os.path.join(sys.argv[1], "googleapis_common_protos-*.whl"))[0]
with zipfile.ZipFile(wheel) as z:
    for n in z.namelist():
        if n.endswith(".proto"):
            z.extract(n, sys.argv[2])
PY
src="$root/crates/cornflakes-codegen/protos"
[ -d "$src/google/protobuf" ] || { echo "$src/google/protobuf not found" >&2; exit 1; }
mkdir -p "$dir/wkt/google"
cp -r "$src/google/protobuf" "$dir/wkt/google/"
touch "$dir/.complete"
