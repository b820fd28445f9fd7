import collections, sys
c=collections.Counter(); tot=0; skipped=0
def classify(st):
    s=set(st)
    if 'kvf_registry_unmount' in s or 'sysmalloc' in s or '__mprotect' in s or '_int_malloc' in s or '_int_realloc' in s or 'clone3' in s: return None
    if 'prefault_main' in s: return 'record prefault thread (first fill)'
    if 'kvf_batch_put_start' in s:
        if 'kvf__place' in s: return 'put_start engine: placement'
        if 'make_record' in s: return 'put_start engine: record'
        if 'bucket_insert_since' in s or 'insert' in s: return 'put_start engine: index insert'
        return 'put_start engine: probe, hash, rest'
    if 'do_put_start' in s: return 'put_start master: answer, config'
    if 'kvf_batch_put_end' in s: return 'put_end engine'
    if 'do_finish' in s: return 'put_end master'
    if 'kvf_service_handle' in s: return 'handle other (decode, metrics)'
    if any(x in s for x in ('__libc_recv','__send','epoll_wait')): return 'syscalls: recv, send, epoll'
    return 'loop, conn, other'
stack=[]
pf=collections.Counter()
for line in open(sys.argv[1]):
    if not line.strip():
        if stack:
            k=classify(stack)
            if k:
                c[k]+=1; tot+=1
                if 'asm_exc_page_fault' in stack: pf[k]+=1
        stack=[]; continue
    if line[0] not in ' \t': stack=[]; continue
    p=line.split()
    if len(p)>=2: stack.append(p[1].split('+')[0])
for k,v in c.most_common(): print(f"| {k} | {100*v/tot:.1f}% | {100*pf[k]/tot:.1f}% |")
print(tot)
