#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdatomic.h>
#include <time.h>
#include <sched.h>
static _Atomic long flag __attribute__((aligned(64)));
#define N 2000000
static void pin(int c){cpu_set_t s;CPU_ZERO(&s);CPU_SET(c,&s);pthread_setaffinity_np(pthread_self(),sizeof s,&s);}
void* other(void*a){pin(1);for(long i=0;i<N;i++){while(atomic_load_explicit(&flag,memory_order_acquire)!=2*i+1);atomic_store_explicit(&flag,2*i+2,memory_order_release);}return 0;}
int main(){for(int r=0;r<15;r++){atomic_store(&flag,0);pthread_t t;pin(0);pthread_create(&t,0,other,0);struct timespec a,b;clock_gettime(CLOCK_MONOTONIC,&a);
for(long i=0;i<N;i++){while(atomic_load_explicit(&flag,memory_order_acquire)!=2*i);atomic_store_explicit(&flag,2*i+1,memory_order_release);}
pthread_join(t,0);clock_gettime(CLOCK_MONOTONIC,&b);double ns=((b.tv_sec-a.tv_sec)*1e9+(b.tv_nsec-a.tv_nsec))/N;printf("round trip %.1f ns\n",ns);fflush(stdout);struct timespec s={1,0};nanosleep(&s,0);}}
