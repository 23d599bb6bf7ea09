import sys,re,glob,statistics as st,collections
# per binary: per workload/threads: list of (on/off) ratios per repetition (paired by rep index)
res=collections.defaultdict(lambda: collections.defaultdict(list))
for log in sorted(glob.glob(sys.argv[1]+'/*.log')):
    b=log.split('/')[-1].rsplit('-r',1)[0]
    vals=collections.defaultdict(dict)
    for l in open(log):
        m=re.search(r'rep (\d+)/\d+ (\S+) (\S+) t=(\d+): (\d+) ops/s',l)
        if m and m.group(3)!='compact':
            vals[(m.group(3),m.group(4),m.group(1))][m.group(2)]=int(m.group(5))
    for (w,t,rep),d in vals.items():
        if 'cairn-membuffer' in d and 'cairn-nomembuffer' in d:
            res[b][(w,t)].append(d['cairn-membuffer']/d['cairn-nomembuffer'])
for b in res:
    print(b)
    for k in sorted(res[b]):
        r=res[b][k]; print(f"  {k[0]:18} t={k[1]}  median {st.median(r):.3f}  all {' '.join(f'{x:.2f}' for x in r)}")
