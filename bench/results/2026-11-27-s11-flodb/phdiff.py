import re, subprocess, sys, collections
data = sys.argv[1]; log = sys.argv[2]
phases=[]
for line in open(log):
    m=re.match(r'([\d.]+)\s+rep 1/1 (\S+) \S+ t=\d+: (\d+) ops/s',line)
    if m: phases.append((float(m.group(1)), m.group(2), int(m.group(3))))
acc=collections.defaultdict(lambda: collections.defaultdict(float)); n=collections.Counter()
for t,e,ops in phases:
    win='%.6f,%.6f'%(t-4.9,t-0.05)
    out=subprocess.run(['perf','report','-i',data,'--time',win,'--no-children','--sort','symbol','--stdio'],capture_output=True,text=True).stdout
    ev=float(re.search(r'Event count \(approx.\): (\d+)',out).group(1))
    opsn=ops*4.85
    n[e]+=1
    for line in out.splitlines():
        m=re.match(r'\s*([\d.]+)%\s+\[(.)\]\s+(.*?)\s{2,}',line)
        if m: acc[e][m.group(3)[:100]]+=float(m.group(1))/100*ev/opsn
    acc[e]['__total__']+=ev/opsn
engines=list(n)
a,b=engines[0],engines[1]
keys=set(acc[a])|set(acc[b])
rows=sorted(keys,key=lambda k: -(abs(acc[a][k]/n[a]-acc[b][k]/n[b])))
print('ns/op   %s  %s  diff'%(a,b))
for k in rows[:40]:
    x=acc[a][k]/n[a]; y=acc[b][k]/n[b]
    print('%8.0f %8.0f %+8.0f  %s'%(x,y,x-y,k))
