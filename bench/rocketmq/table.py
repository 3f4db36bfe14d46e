"""table.py OUT: the markdown table of docs/BENCHMARKS.md "RocketMQ beside
kdelay", from the JSON files bench/rocketmq/compare wrote into OUT."""
import json
import pathlib
import sys

out = pathlib.Path(sys.argv[1])
rows = []  # (system, group, p50, p99, max, early, delivered, sent)


def kdelay(path):
    r = json.loads(path.read_text())
    for m in r["modes"]:
        for g in m["groups"]:
            if g["name"].startswith("level=") or g["name"] == "floor":
                ms = lambda k: g[k] / 1e6
                rows.append((f"kdelay {m['mode']}", g["name"], ms("p50_ns"), ms("p99_ns"), ms("max_ns"),
                             g["early"], g["delivered"], g["sent"]))


def rocketmq(path):
    r = json.loads(path.read_text())
    for g in r["groups"]:
        what = "delay levels" if g["mode"] == "delay" else f"timer, timerPrecisionMs={r['timerPrecisionMs']}"
        rows.append((f"RocketMQ {what}", g["name"], g["p50_ms"], g["p99_ms"], g["max_ms"],
                     g["early"], g["delivered"], g["sent"]))


kdelay(out / "kdelay.json")
for p in sorted(out.glob("rocketmq-*.json"), key=lambda p: -int(p.stem.split("-")[1])):
    rocketmq(p)

print("| system | group | p50 ms | p99 ms | max ms | early | delivered |")
print("|---|---|---|---|---|---|---|")
for s, g, p50, p99, mx, early, got, sent in rows:
    print(f"| {s} | {g} | {p50:.3f} | {p99:.3f} | {mx:.3f} | {early} | {got} of {sent} |")
