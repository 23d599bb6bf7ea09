import json,sys,collections
d=json.load(open(sys.argv[1]))
agg=collections.defaultdict(lambda: collections.defaultdict(float))
for cell in d['results']:
    if cell.get('benchmark')!='readwhilewriting': continue
    for run in cell['runs']:
        k=(cell['engine'],cell['threads'])
        a=agg[k]; a['n']+=1; a['ops']+=run['ops_per_sec']; a['w']+=run['writer_ops']/run['seconds']
        for name,s in run['cpu_seconds_by_thread']: a[name.split('-')[1] if name.startswith('cairn-') else name]+=s
        a['found']+=run['found']/run['reads'] if run.get('reads') else 0
        a['blk']+=run.get('blocks_per_read') or 0
for k,a in sorted(agg.items()):
    n=a.pop('n'); print(k, {x:round(v/n,3) for x,v in a.items()})
