#!/usr/bin/env bash
# Builds the workspace's release binaries here and copies them, debug info stripped, into a stage
# folder (default .gpu/) for the device machine, which has no cargo: tests as test-<name> (a
# library's unit tests as test-<library>), benches as bench-<name>, examples as example-<name>,
# binaries as bin-<name>. Beside them: targets.tsv (file, kind, harness, package: run.sh runs the
# harness = false tests ("custom": this repository's libtest-mimic ones) with --include-ignored) and
# commit.txt (what was built). The peer scripts need no staging: they travel with the working tree
# (scripts/device/peers/).
#
# Usage: bash scripts/device/stage.sh [--into DIR] [--commit REV] [--pack] [-- CARGO_BUILD_ARGS...]
#   --into DIR    stage into DIR instead of .gpu (e.g. .gpu-before for run.sh's `ab`)
#   --commit REV  build REV from a temporary git worktree (same CARGO_TARGET_DIR) instead of the
#                 working tree, e.g. `--into .gpu-before --commit HEAD~1`
#   --pack        also pack DIR as DIR.tar.xz (~10x smaller): carry that instead of DIR
#   CARGO_BUILD_ARGS  replace the default target selection `--workspace --all-targets`, e.g.
#                 `-- -p fuse-gpu --test rows --bench anchors`
# The device carries at most 64 MiB with the working tree: carry [".gpu"] or [".gpu.tar.xz"].
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
dest=.gpu rev="" pack=0
cargo_args=(--workspace --all-targets)
while [ $# -gt 0 ]; do
    case $1 in
    --into) dest=${2:?--into needs a folder}; shift 2 ;;
    --commit) rev=${2:?--commit needs a revision}; shift 2 ;;
    --pack) pack=1; shift ;;
    --) shift; [ $# -gt 0 ] && cargo_args=("$@"); break ;;
    *) echo "unknown option $1 (see the head of $0)" >&2; exit 2 ;;
    esac
done
dest=${dest%/}
case $dest in /* | ../*) echo "--into takes a folder inside the repository, not $dest" >&2; exit 2 ;; esac

# Neither the stage nor its archive is ever committed.
exclude=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")"
for pattern in "/$dest/" "/$dest.tar.xz"; do
    grep -qxF "$pattern" "$exclude" 2>/dev/null || echo "$pattern" >>"$exclude"
done

src=$root
if [ -n "$rev" ]; then
    src=$(mktemp -d "${TMPDIR:-/tmp}/fuse-stage.XXXXXX")
    trap 'git -C "$root" worktree remove --force "$src" >/dev/null 2>&1 || rm -rf "$src"' EXIT
    git worktree add --detach "$src" "$rev" >/dev/null
    # the same target folder as the working tree's, so that the dependencies are built once
    export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target}
fi

rm -rf "$dest" "$dest.tar.xz"
mkdir -p "$dest"
(cd "$src" && cargo build --release "${cargo_args[@]}" --message-format=json-render-diagnostics) >"$dest/.build.json"
python3 - "$dest" <<'PY'
import json, os, shutil, subprocess, sys, tomllib

dest = sys.argv[1]
seen, rows, manifests = set(), [], {}


def manifest(path):
    if path not in manifests:
        with open(path, "rb") as f:
            manifests[path] = tomllib.load(f)
    return manifests[path]


def harness(path, section, name):
    """The target's `harness` setting in its Cargo.toml (true unless the manifest says false)."""
    toml = manifest(path)
    entries = [toml.get("lib", {})] if section == "lib" else toml.get(section, [])
    for e in entries:
        if section == "lib" or e.get("name") == name:
            return "custom" if e.get("harness", True) is False else "libtest"
    return "libtest"


for line in open(os.path.join(dest, ".build.json")):
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") != "compiler-artifact" or not m.get("executable"):
        continue
    if not m["package_id"].startswith("path+"):
        continue  # only this workspace's own targets
    t = m["target"]
    kind = t["kind"][0]
    if kind in ("test", "bench"):
        prefix, h = kind, harness(m["manifest_path"], kind, t["name"])
    elif m["profile"]["test"]:  # a library's (or binary's) unit tests
        prefix, h = "test", harness(m["manifest_path"], "lib", t["name"]) if kind in ("lib", "proc-macro") else "libtest"
    else:
        prefix, h = kind, "-"
    name = f"{prefix}-{t['name']}"
    if name in seen:
        continue  # a library's unit tests come once in test and once in bench mode: the same tests
    seen.add(name)
    out = os.path.join(dest, name)
    shutil.copy2(m["executable"], out)
    subprocess.run(["strip", "--strip-debug", out], check=False)
    rows.append(f"{name}\t{prefix}\t{h}\t{manifest(m['manifest_path'])['package']['name']}")
    print(f"{out}  {os.path.getsize(out) / 2**20:.1f} MiB")
with open(os.path.join(dest, "targets.tsv"), "w") as f:
    f.write("# file\tkind\tharness\tpackage\n" + "\n".join(sorted(rows)) + "\n")
PY
rm -f "$dest/.build.json"
{
    git -C "$src" log -1 --format='%H %cs %s'
    [ -z "$rev" ] && [ -n "$(git status --porcelain --untracked-files=no)" ] && echo "plus uncommitted changes"
} >"$dest/commit.txt" || true
echo "staged $(du -sm "$dest" | cut -f1) MiB in $dest ($(head -1 "$dest/commit.txt" | cut -c1-12))"
if [ "$pack" = 1 ]; then
    tar -C "$(dirname "$dest")" -cf - "$(basename "$dest")" | xz -T0 -6 >"$dest.tar.xz"
    echo "packed $dest.tar.xz: $(du -sm "$dest.tar.xz" | cut -f1) MiB (run.sh unpacks it where $dest is missing)"
fi
echo "On the device: bash scripts/device/run.sh MODE ...   (carry [\"$dest$([ "$pack" = 1 ] && echo .tar.xz)\"]; scripts/device/README.md)"
