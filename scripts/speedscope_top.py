"""Where a py-spy speedscope profile's seconds went, as text (what `gpu_bench.sh
profile-learn` brings back is 2 MB of JSON for a viewer; this is the part a note cites).

    python scripts/speedscope_top.py PROFILE.json [--under FUNCTION] [--top N]

Per sampled thread: inclusive seconds by frame (function, file:line), then self seconds.
`--under concatenated_forward` keeps only the samples below that function. py-spy samples
only threads that are running, so a thread waiting on the GPU (a sync, a full launch
queue) shows as missing seconds, and autograd's backward runs on its own device thread.
"""

from __future__ import annotations

import argparse
import collections
import json


def frame_name(frame: dict) -> str:
    return f"{frame['name']} ({frame.get('file', '').rsplit('/', 1)[-1]}:{frame.get('line', '')})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profile")
    parser.add_argument("--under", default="", help="only samples below a frame whose name contains this")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--rate", type=float, default=50.0, help="py-spy's --rate (samples a second)")
    args = parser.parse_args()
    data = json.load(open(args.profile))
    frames = [frame_name(f) for f in data["shared"]["frames"]]
    for profile in data["profiles"]:
        inclusive, own, kept = collections.Counter(), collections.Counter(), 0
        for sample in profile["samples"]:
            names = [frames[i] for i in sample]
            if args.under:
                at = next((k for k, name in enumerate(names) if args.under in name), None)
                names = [] if at is None else names[at:]
            if not names:
                continue
            kept += 1
            inclusive.update(set(names))
            own[names[-1]] += 1
        if kept < 10:
            continue
        print(f"== {profile['name']}: {kept / args.rate:.1f} s sampled")
        for name, n in inclusive.most_common(args.top):
            print(f"{n / args.rate:8.1f} s  {name}")
        print("-- self")
        for name, n in own.most_common(min(args.top, 15)):
            print(f"{n / args.rate:8.1f} s  {name}")


if __name__ == "__main__":
    main()
