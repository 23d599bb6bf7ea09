import sys, time
for line in sys.stdin:
    sys.stdout.write("%.6f %s" % (time.clock_gettime(time.CLOCK_MONOTONIC), line)); sys.stdout.flush()
