"""Random Pod inventories that exercise every clause, type oddity and error of the plan step.

Usage: random_inventory.py FIRST_SEED COUNT DIR. Writes, for each seed, DIR/SEED/inventory.json,
DIR/SEED/state.json and DIR/SEED/args.json (flag values). The parity test plans each with gc-cli and with the reference flow and requires the
same output line or the same failure.
"""
import json, random, sys

LABEL = 'diagnostics.example.com/collect'
PIN = 'diagnostics.example.com/collector'
NOW = 1795953600  # 2026-11-29T12:00:00Z
rng = random.Random()
out = None
RARE = 0.015


def pick(*weighted):
    """pick((weight, value), ...) with values that may be callables."""
    total = sum(w for w, _ in weighted)
    r = rng.uniform(0, total)
    for w, v in weighted:
        r -= w
        if r <= 0:
            return v() if callable(v) else v
    v = weighted[-1][1]
    return v() if callable(v) else v


def stamp(offset):
    t = NOW - offset
    import datetime
    d = datetime.datetime.fromtimestamp(t, datetime.timezone.utc)
    return pick((6, d.strftime('%Y-%m-%dT%H:%M:%SZ')),
                (1, d.strftime('%Y-%m-%dT%H:%M:%S.') + '%06dZ' % rng.randrange(10**6)),
                (1, (d + datetime.timedelta(hours=2)).strftime('%Y-%m-%dT%H:%M:%S+02:00')),
                (1, d.strftime('%Y-%m-%d %H:%M:%SZ')),
                (RARE, d.strftime('%Y-%m-%dT%H:%M:%S')),
                (RARE, 'not a time'),
                (RARE, t))


def finished_at():
    return pick((10, lambda: stamp(rng.choice([10, 3000, 50000, 90000, 200000, 700000]))),
                (1, None), (0.5, ''), (RARE, lambda: stamp(-5000)))


def container(i):
    state = pick((2, lambda: {'running': {'startedAt': stamp(100)}}),
                 (1, lambda: {'waiting': {'reason': 'CrashLoopBackOff'}}),
                 (8, lambda: {'terminated': dict({'exitCode': 1}, **({'finishedAt': finished_at()} if rng.random() < 0.9 else {}))}),
                 (0.5, {}), (0.3, 'terminated'), (0.2, 'xrunningx'), (0.2, ['waiting']), (0.2, []),
                 (RARE, None), (RARE, 7))
    c = {'name': f'c{i}', 'ready': False, 'restartCount': 0}
    if rng.random() < 0.95:
        c['state'] = state
    return c


def containers():
    n = pick((1, 0), (6, 1), (2, 2), (1, 3))
    lst = [container(i) for i in range(n)]
    if rng.random() < RARE:
        lst.append('oops')
    return pick((20, lst), (1, None), (RARE, {'c': 1}), (RARE, 'list'))


def pod(i):
    uid = f'uid-{i:03d}-{rng.randrange(1000):03d}'
    m = {'name': pick((20, f'pod-{i}'), (1, f'caf\u00e9-{i}'), (RARE, 17)),
         'namespace': pick((12, 'work'), (1, 'other')),
         'uid': pick((30, uid), (1, '')),
         'resourceVersion': pick((30, str(rng.randrange(1, 99999))), (1, ''), (0.5, 5)),
         'labels': pick((12, {LABEL: 'true', 'app': 'x'}), (1, {LABEL: 'false'}), (1, {}), (0.5, None),
                        (RARE, ['x']), (RARE, 'labels')),
         'ownerReferences': pick((12, []), (1, [{'kind': 'Job', 'name': 'j', 'uid': 'j1'}]), (1, None)),
         'annotations': pick((10, {'note': 'n'}), (1, {'kubernetes.io/config.mirror': 'm'}), (1, None),
                             (0.5, ['kubernetes.io/config.mirror']), (0.5, 'xkubernetes.io/config.mirror'),
                             (0.5, 'plain'), (RARE, 5)),
         'finalizers': pick((10, []), (2, [PIN]), (1, [PIN, 'example.com/x']), (1, ['example.com/x']),
                            (0.5, None), (0.3, PIN)),
         'deletionTimestamp': pick((10, None), (1, lambda: stamp(30)), (0.3, ''))}
    for k in list(m):
        if rng.random() < 0.05 and k != 'name':
            del m[k]
    if rng.random() < RARE:
        del m['name']
    s = {'phase': pick((12, 'Failed'), (2, 'Running'), (2, 'Succeeded'), (0.5, None), (0.3, 3))}
    for field, w in (('containerStatuses', 1.0), ('initContainerStatuses', 0.3), ('ephemeralContainerStatuses', 0.1)):
        if rng.random() < w:
            s[field] = containers()
    status = pick((40, s), (1, None), (1, {}), (RARE, 'bad'), (RARE, [1]))
    return uid, m, status


def main():
    n = rng.randrange(0, 25)
    pods = [pod(i) for i in range(n)]
    ledger = {}
    for uid, _, _ in pods:
        if rng.random() < 0.4:
            ledger[uid] = pick((6, lambda: {'first': NOW - rng.choice([100, 5000, 90000, 800000]), 'name': 'p'}),
                               (3, lambda: {'first': NOW - rng.choice([100, 5000, 90000]) + 0.5, 'name': 'p'}),
                               (1, {'name': 'no-first'}), (0.3, {'first': True, 'name': 'b'}),
                               (RARE, {'first': 'x', 'name': 'p'}), (RARE, {'first': NOW + 100, 'name': 'p'}),
                               (RARE, 5))
    for i in range(rng.randrange(3)):
        ledger[f'gone-{i}'] = {'first': NOW - 100000, 'name': 'gone'}
    if rng.random() < 0.5:
        inv = {'size': n, 'metadataItems': [m for _, m, _ in pods],
               'statusItems': [{'status': st} if rng.random() > RARE else 'bad' for _, _, st in pods]}
        if rng.random() < RARE * 3:
            inv['statusItems'] = inv['statusItems'][1:]
    else:
        items = []
        for _, m, st in pods:
            item = {'apiVersion': 'v1', 'kind': 'Pod', 'metadata': m, 'spec': {'containers': []}}
            if st is not None or rng.random() < 0.5:
                item['status'] = st
            items.append(item)
        inv = {'apiVersion': 'v1', 'kind': 'List', 'items': items, 'metadata': {}}
    args = {'retention_seconds': rng.choice([1, 3600, 86400, 604800]), 'max_pods': rng.randrange(1, 8),
            'max_inventory': rng.choice([25, 25, 25, 10])}
    indent = rng.choice([None, 1])
    json.dump(inv, open(f'{out}/inventory.json', 'w'), indent=indent, ensure_ascii=rng.random() < 0.5)
    json.dump(ledger, open(f'{out}/state.json', 'w'))
    json.dump(args, open(f'{out}/args.json', 'w'))


if __name__ == '__main__':
    import os
    first, count, root = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    for seed in range(first, first + count):
        rng.seed(seed)
        out = os.path.join(root, str(seed))
        os.makedirs(out, exist_ok=True)
        main()
