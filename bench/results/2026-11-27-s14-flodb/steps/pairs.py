import re,sys,statistics
# consecutive interleaved phases of one benchmark/thread count form pairs (on, off order alternates)
for t in (1,2):
    rows=[]
    for line in open(sys.argv[1]):
        m=re.search(r'(cairn-\w+) readwhilewriting t=%d: (\d+) ops/s.*cross-core (\d+)/(\d+)'%t,line)
        if m: rows.append((m.group(1),int(m.group(2)),m.group(3)+'/'+m.group(4)))
    ratios=[]
    for i in range(0,len(rows)-1,2):
        a,b=rows[i],rows[i+1]
        on=a if a[0]=='cairn-membuffer' else b; off=b if on is a else a
        ratios.append(on[1]/off[1])
    print(t, 'median %.3f'%statistics.median(ratios), ' '.join('%.2f'%r for r in ratios))
