"""From probe75.json, the rules probe77 tries: for each batch, the launches (shares, warps) that
meet the op's targets (<= 3.5 µs at 128 keys, <= 5 at 1024), the fastest at 128 keys first;
where none meets them, those nearest. Prints one JSON rule a line: the best of each batch
together, then the second of each. The package's own rule is run beside them."""
import json
import re
import statistics
import sys

points = json.load(open(sys.argv[1]))["points"]
ranked = {}
for B in (1, 8):
    short, long = points[f"batch {B}, 128 keys"], points[f"batch {B}, 1024 keys"]
    rows = []
    for name, p in short.items():
        if name == "package" or long[name]["max_diff"] > 0.05 or p["max_diff"] > 0.05:
            continue
        s, w = map(int, re.findall(r"\d+", name))
        a, b = statistics.median(p["op"]), statistics.median(long[name]["op"])
        rows.append((max(a - 3.5, b - 5.0, 0), a + b / 4, [s, w], a, b))
    rows.sort()
    ranked[B] = rows
    print(f"batch {B}:", [(r[2], r[3], r[4]) for r in rows[:4]], file=sys.stderr)
for i in range(2):
    print(json.dumps({str(B): ranked[B][i][2] for B in (1, 8)}, separators=(",", ":")))
