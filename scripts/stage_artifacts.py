"""Reads cargo's --message-format=json from stdin; copies each executable artifact, stripped, into
the folder argv[1] as <kind>-<target name> (scripts/stage.sh)."""
import json, os, shutil, subprocess, sys

stage = sys.argv[1]
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") != "compiler-artifact" or not m.get("executable"):
        continue
    kind, name = m["target"]["kind"][0], m["target"]["name"]
    dst = os.path.join(stage, f"{kind}-{name}")
    shutil.copyfile(m["executable"], dst)
    os.chmod(dst, 0o755)
    if os.environ.get("STRIP", "1") != "0":
        subprocess.run(["strip", dst], check=False)
    print("staged", dst, os.path.getsize(dst) // 1024, "KiB")
