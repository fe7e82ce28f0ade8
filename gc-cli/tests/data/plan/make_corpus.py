"""Writes the planner's fixture corpus: one JSON file per case, {args, ledger?, inventory}.

Run from this folder: python3 make_corpus.py. Every case is also checked against the reference
flow's plan step by the test suite, so a fixture here can never encode a wrong expectation.
"""
import json

NOW = '2026-11-29T12:00:00Z'
LABEL = 'diagnostics.example.com/collect'
PIN = 'diagnostics.example.com/collector'
DAY = '2026-11-27T10:00:00Z'       # over two days before NOW: past the default retention
RECENT = '2026-11-29T11:00:00Z'    # an hour before NOW: held


def term(name, finished=DAY, exit_code=1):
    t = {'exitCode': exit_code, 'reason': 'Error', 'startedAt': '2026-11-27T09:00:00Z'}
    if finished is not None:
        t['finishedAt'] = finished
    return {'name': name, 'state': {'terminated': t}, 'ready': False, 'restartCount': 0}


def pod(name, uid=None, ns='work', phase='Failed', labels=None, containers=None, **meta):
    m = {'name': name, 'namespace': ns, 'uid': f'uid-{name}' if uid is None else uid, 'resourceVersion': '100',
         'labels': {LABEL: 'true'} if labels is None else labels,
         'creationTimestamp': '2026-11-27T08:00:00Z'}
    for k, v in meta.items():
        if v is None:
            m.pop(k, None)
        else:
            m[k] = v
    s = {'phase': phase, 'containerStatuses': [term('main')] if containers is None else containers}
    return m, s


def native(pods):
    return {'size': len(pods), 'metadataItems': [m for m, _ in pods],
            'statusItems': [{'status': s} for _, s in pods]}


def podlist(pods):
    return {'apiVersion': 'v1', 'kind': 'List', 'metadata': {'resourceVersion': ''},
            'items': [{'apiVersion': 'v1', 'kind': 'Pod', 'metadata': m,
                       'spec': {'containers': [{'name': 'main', 'image': 'busybox'}]}, 'status': s}
                      for m, s in pods]}


CASES = {}


def case(name, inventory, ledger=None, **args):
    args.setdefault('now', NOW)
    args.setdefault('namespace', 'work')
    CASES[name] = {'args': args, 'inventory': inventory, **({'ledger': ledger} if ledger is not None else {})}


# Every clause of the eligibility rule, one Pod each.
clauses = [
    pod('eligible'),
    pod('other-namespace', ns='elsewhere'),
    pod('running-phase', phase='Running'),
    pod('succeeded', phase='Succeeded'),
    pod('no-uid', uid=''),
    pod('no-resource-version', resourceVersion=None),
    pod('unlabelled', labels={}),
    pod('label-false', labels={LABEL: 'false'}),
    pod('owned', ownerReferences=[{'apiVersion': 'batch/v1', 'kind': 'Job', 'name': 'j', 'uid': 'j1'}]),
    pod('mirror', annotations={'kubernetes.io/config.mirror': 'abc'}),
    pod('foreign-finalizer', finalizers=['example.com/other']),
    pod('pin-and-foreign', finalizers=[PIN, 'example.com/other']),
    pod('pinned', finalizers=[PIN]),
    pod('pinned-deleting', finalizers=[PIN], deletionTimestamp='2026-11-29T11:59:00Z'),
    pod('deleting-unpinned', deletionTimestamp='2026-11-29T11:59:00Z'),
    pod('running-container', containers=[term('a'), {'name': 'b', 'state': {'running': {'startedAt': DAY}}}]),
    pod('waiting-container', containers=[{'name': 'a', 'state': {'waiting': {'reason': 'CrashLoopBackOff'}}}]),
    pod('empty-owner-list', ownerReferences=[]),
]
m, s = pod('labels-null')
m['labels'] = None
clauses.append((m, s))
m, s = pod('init-running')
s['initContainerStatuses'] = [{'name': 'init', 'state': {'running': {}}}]
clauses.append((m, s))
m, s = pod('ephemeral-waiting')
s['ephemeralContainerStatuses'] = [{'name': 'debug', 'state': {'waiting': {}}}]
clauses.append((m, s))
case('eligibility-clauses', native(clauses), max_pods=50)
case('eligibility-clauses-podlist', podlist(clauses), max_pods=50)

# Both anchor bases.
m, s = pod('init-and-main')
s['initContainerStatuses'] = [term('init', '2026-11-27T09:30:00Z')]
anchors = [
    pod('all-finished', containers=[term('a', '2026-11-27T10:00:00Z'), term('b', '2026-11-27T11:00:00.250Z')]),
    pod('one-without-finished-at', containers=[term('a'), term('b', None)]),
    pod('no-container-statuses', containers=[]),
    pod('state-empty', containers=[{'name': 'a', 'state': {}}]),
    pod('no-state', containers=[{'name': 'a'}]),
    pod('offset-timestamp', containers=[term('a', '2026-11-27T12:00:00+02:00')]),
    (m, s),
]
case('anchor-bases', native(anchors), ledger={
    'uid-one-without-finished-at': {'first': 1795700000, 'name': 'one-without-finished-at'},
    'uid-no-container-statuses': {'first': 1795700000.5, 'name': 'no-container-statuses'},
}, max_pods=50)

# Ledger carry-over (int and float firsts kept), pruning (gone and ineligible Pods dropped),
# and new observations (first = now, held).
case('ledger-carry-and-prune', native([
    pod('kept-int', containers=[]),
    pod('kept-float', containers=[]),
    pod('new-one', containers=[]),
    pod('now-ineligible', phase='Running', containers=[]),
    pod('entry-without-first', containers=[]),
]), ledger={
    'uid-kept-int': {'first': 1795000000, 'name': 'kept-int'},
    'uid-kept-float': {'first': 1795900000.25, 'name': 'old-name'},
    'uid-gone': {'first': 1790000000, 'name': 'gone'},
    'uid-now-ineligible': {'first': 1790000000, 'name': 'now-ineligible'},
    'uid-entry-without-first': {'name': 'x'},
})

# Sort ties on the anchor are broken by uid; the cap defers the rest.
case('sort-ties-and-cap', native([
    pod('c', uid='uid-c'), pod('a', uid='uid-a'), pod('b', uid='uid-b'),
    pod('older', uid='uid-z', containers=[term('main', '2026-11-26T10:00:00Z')]),
    pod('d', uid='uid-d'), pod('held', containers=[term('main', RECENT)]),
]), max_pods=3)

case('retention-boundary', native([
    pod('exactly-due', containers=[term('main', '2026-11-29T11:00:00Z')]),
    pod('one-second-short', containers=[term('main', '2026-11-29T11:00:01Z')]),
]), retention_seconds=3600)

case('empty-size-zero', {'size': 0})
case('empty-podlist', podlist([]))
case('unicode-name', native([pod('caf\u00e9-\U0001F600', uid='uid-unicode')]))

# Ceilings.
case('inventory-ceiling', native([pod(f'p{i}') for i in range(6)]), max_pods=5, max_inventory=5)
big = pod('big', annotations={'note': 'x' * 3000})
case('archive-ceiling', native([big]), max_archive_bytes=2048)
small = pod('small-enough', annotations={'note': 'x' * 1500})
case('archive-under-ceiling', native([small]), max_archive_bytes=2048)
held_big = pod('held-big', annotations={'note': 'x' * 3000}, containers=[term('main', RECENT)])
case('archive-ceiling-ignores-held', native([held_big]), max_archive_bytes=2048)

# Bad data: each fails the whole plan.
case('bad-malformed-container-status', native([pod('bad', containers=['oops'])]))
case('bad-timestamp-without-zone', native([pod('naive', containers=[term('main', '2026-11-27T10:00:00')])]))
case('bad-timestamp-text', native([pod('garbled', containers=[term('main', 'yesterday')])]))
case('bad-finished-at-not-string', native([pod('numeric', containers=[term('main', 1795000000)])]))
case('bad-anchor-in-future', native([pod('future', containers=[term('main', '2026-11-30T00:00:00Z')])]))
case('bad-first-in-future', native([pod('future-first', containers=[])]),
     ledger={'uid-future-first': {'first': 1900000000, 'name': 'future-first'}})
case('bad-first-not-number', native([pod('text-first', containers=[])]),
     ledger={'uid-text-first': {'first': 'yesterday', 'name': 'text-first'}})
case('bad-ledger-entry', native([pod('p', containers=[])]), ledger={'uid-p': 5})
case('bad-ledger-not-object', native([pod('p')]), ledger=[1, 2])
case('bad-state-null', native([pod('null-state', containers=[{'name': 'a', 'state': None}])]))
case('bad-labels-list', native([pod('labels-list', labels=['x'])]))
case('bad-metadata-not-object', {'size': 1, 'metadataItems': [None], 'statusItems': [{'status': {}}]})
case('bad-incomplete-inventory', {'size': 2, 'metadataItems': [pod('a')[0]], 'statusItems': []})
case('bad-missing-lists', {'size': 3})
m, s = pod('no-name')
del m['name']
case('bad-name-missing', native([(m, s)]))
# Bad data where the rules never look is no error, as in the flow.
case('ignored-bad-data-in-ineligible-pod', native([
    pod('other-ns-malformed', ns='elsewhere', containers=['oops']),
    pod('running-then-malformed', containers=[{'name': 'a', 'state': {'running': {}}}, 'oops']),
]))

for name, body in CASES.items():
    with open(f'{name}.json', 'w') as f:
        json.dump(body, f, indent=1, ensure_ascii=False)
        f.write('\n')
print(len(CASES), 'cases')
