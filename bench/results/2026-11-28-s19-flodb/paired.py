import json,sys,statistics
d=json.load(open(sys.argv[1]))
ref=sys.argv[2]
cells=[c for c in d["results"] if c.get("runs")]
for c in cells:
    r=next((x for x in cells if x["engine"]==ref and x["benchmark"]==c["benchmark"] and x["threads"]==c["threads"]),None)
    if not r or c["engine"]==ref: continue
    ratios=[a["ops_per_sec"]/b["ops_per_sec"] for a,b in zip(c["runs"],r["runs"])]
    print(f'{c["benchmark"]:18} t={c["threads"]} {c["engine"]:26} / {ref}: {statistics.median(ratios):.2f}  [{min(ratios):.2f}-{max(ratios):.2f}]')
