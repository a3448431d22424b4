"""Print the Markdown table of a pytest-benchmark JSON run: median per peer and peer/memci ratio."""

from __future__ import annotations

import json
import sys
from collections import defaultdict


def main(path: str) -> None:
    data = json.load(open(path))  # noqa: SIM115
    groups: dict[str, dict[str, float]] = defaultdict(dict)
    memory: list[str] = []
    for b in data["benchmarks"]:
        peer = b["name"].split("[", 1)[1].split("-")[0] if "[" in b["name"] else b["name"]
        peer = b["params"].get("peer", peer) if b.get("params") else peer
        if b["extra_info"]:
            info = b["extra_info"]
            memory.append(
                f"| {b['group']} | {info['memci_bytes_per_message']:.0f} | "
                f"{info['list_of_dicts_bytes_per_message']:.0f} | "
                f"{info['memci_bytes_per_message'] / info['list_of_dicts_bytes_per_message']:.2f}x | "
                f"{info['snapshots_over_history']:.3f}x |"
            )
            continue
        groups[b["group"]][peer] = b["stats"]["median"]
    print("| workload | memci median | peer | peer median | peer / memci |")
    print("|---|---|---|---|---|")
    for group, peers in groups.items():
        base = peers.get("memci")
        for peer, median in peers.items():
            if peer == "memci" or base is None:
                continue
            print(f"| {group} | {base * 1e3:.3f} ms | {peer} | {median * 1e3:.3f} ms | {median / base:.1f}x |")
    if memory:
        print()
        print("| memory | memci bytes/msg | list of dicts bytes/msg | ratio | 100 snapshots / history |")
        print("|---|---|---|---|---|")
        print("\n".join(memory))


if __name__ == "__main__":
    main(sys.argv[1])
