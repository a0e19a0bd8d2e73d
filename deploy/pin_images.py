"""Re-resolves the digest of every pinned image of the deployments from its registry and
rewrites it in place (deploy/Dockerfile, docker-compose.yml, the kustomizations' `images:`),
tags unchanged. Run where a registry is reachable, with crane or docker buildx; review the diff.
    python3 deploy/pin_images.py"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INLINE = [ROOT / "deploy" / "Dockerfile", ROOT / "docker-compose.yml"]
KUSTOMIZATIONS = sorted((ROOT / "deploy" / "k8s").glob("**/kustomization.yaml"))
REF = re.compile(r"([a-z0-9./-]+:[A-Za-z0-9._-]+)@(sha256:[0-9a-f]{64})")
# A kustomization entry: `- name: X` then `newTag: T` then `digest: sha256:...`.
ENTRY = re.compile(r"(- name: (\S+)\n(?:\s+newName: \S+\n)?\s+newTag: (\S+)\n\s+digest: )(sha256:[0-9a-f]{64})")


def digest(image: str) -> str:
    if shutil.which("crane"):
        cmd = ["crane", "digest", image]
    else:
        cmd = ["docker", "buildx", "imagetools", "inspect", image, "--format", "{{json .Manifest.Digest}}"]
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().strip('"')


def main() -> int:
    for path in INLINE:
        text = path.read_text()
        for image, old in sorted(set(REF.findall(text))):
            new = digest(image)
            print(f"{image}: {old} -> {new}")
            text = text.replace(f"{image}@{old}", f"{image}@{new}")
        path.write_text(text)
    for path in KUSTOMIZATIONS:
        text = path.read_text()

        def repin(m: re.Match[str]) -> str:
            new = digest(f"{m.group(2)}:{m.group(3)}")
            print(f"{m.group(2)}:{m.group(3)}: {m.group(4)} -> {new}")
            return m.group(1) + new

        path.write_text(ENTRY.sub(repin, text))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
