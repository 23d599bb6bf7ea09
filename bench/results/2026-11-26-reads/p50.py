import json,glob,sys,statistics
base=sys.argv[1]
rows={}
for f in sorted(glob.glob(base+'/*.json')):
    side=f.split('/')[-1].split('-')[0]
    d=json.load(open(f))
    for r in d['results']:
        for run in r['runs']:
            rows.setdefault((r['benchmark'],r['threads']),{}).setdefault(side,[]).append((run['p50_us'],run['cpu_us_per_op'],run['ops_per_sec']))
for k,v in sorted(rows.items()):
    o=v.get('old',[]); n=v.get('new',[])
    print(k, 'p50 old',[x[0] for x in o],'new',[x[0] for x in n], '| median p50 new/old %.3f'%(statistics.median([x[0] for x in n])/statistics.median([x[0] for x in o])), '| cpu/op old',[x[1] for x in o],'new',[x[1] for x in n])
