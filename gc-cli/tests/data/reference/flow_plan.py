"""The Kestra flow's `plan` step (helper and script, verbatim), made runnable for parity tests.

Usage: flow_plan.py INVENTORY STATE with NAMESPACE, RETENTION, MAX_PODS, MAX_INVENTORY, MAX_BYTES
and NOW (float seconds, replacing the clock) in the environment. Prints the `::{"outputs":...}::`
line on success; exits non-zero on any exception, as the flow's task fails.
"""
import hashlib, json, os, re, sys, time
from datetime import datetime, timezone

time.time = lambda: float(os.environ['NOW'])

# --- helper (verbatim) ---
PIN = 'diagnostics.example.com/collector'
LABEL = 'diagnostics.example.com/collect'
def stamp(value):
    if not isinstance(value, str):
        raise ValueError('Missing timestamp')
    d = datetime.fromisoformat(value.replace('Z', '+00:00'))
    if d.tzinfo is None:
        raise ValueError('Timestamp has no timezone')
    return d.timestamp()
def eligible(meta, status, namespace):
    if meta.get('namespace') != namespace or status.get('phase') != 'Failed':
        return False
    if not meta.get('uid') or not meta.get('resourceVersion'):
        return False
    if (meta.get('labels') or {}).get(LABEL) != 'true' or meta.get('ownerReferences'):
        return False
    if 'kubernetes.io/config.mirror' in (meta.get('annotations') or {}):
        return False
    finals = meta.get('finalizers') or []
    if finals not in ([], [PIN]):
        return False
    if meta.get('deletionTimestamp') and finals != [PIN]:
        return False
    for field in ('containerStatuses', 'initContainerStatuses', 'ephemeralContainerStatuses'):
        for c in status.get(field) or []:
            if not isinstance(c, dict):
                raise ValueError('Malformed container status')
            state = c.get('state') or {}
            if 'running' in state or 'waiting' in state:
                return False
    return True
def anchor(status, first):
    containers = []
    for field in ('containerStatuses', 'initContainerStatuses', 'ephemeralContainerStatuses'):
        containers.extend(status.get(field) or [])
    times = [stamp(c['state']['terminated']['finishedAt']) for c in containers
             if isinstance(c.get('state', {}).get('terminated'), dict)
             and c['state']['terminated'].get('finishedAt')]
    if containers and len(times) == len(containers):
        return max(times), 'finishedAt'
    return first, 'observedFailed'
def pairs(payload):
    if payload.get('size') == 0:
        return []
    metas, statuses = payload.get('metadataItems'), payload.get('statusItems')
    if not isinstance(metas, list) or not isinstance(statuses, list) or len(metas) != len(statuses):
        raise ValueError('Incomplete native Pod inventory')
    return [(m, s.get('status') or {}) for m, s in zip(metas, statuses)]
def emit(**values):
    print('::' + json.dumps({'outputs': values}, separators=(',', ':')) + '::')

# --- plan script (verbatim but for file names) ---
payload = json.load(open(sys.argv[1]))
if isinstance(payload, dict) and 'items' in payload and 'metadataItems' not in payload:
    # `kubectl get pods -o json` output, in the shape the flow's list task returns.
    payload = {'size': len(payload['items']), 'metadataItems': [i['metadata'] for i in payload['items']],
               'statusItems': [{'status': i.get('status')} for i in payload['items']]}
previous = json.load(open(sys.argv[2]))
if not isinstance(previous, dict):
    raise ValueError('Malformed observation ledger')
rows = pairs(payload)
if len(rows) > int(os.environ['MAX_INVENTORY']):
    raise ValueError('Inventory ceiling exceeded')
now = time.time()
state, candidates, held = {}, [], 0
for meta, status in rows:
    if not eligible(meta, status, os.environ['NAMESPACE']):
        continue
    uid = meta['uid']
    first = previous.get(uid, {}).get('first', now)
    if not isinstance(first, (int, float)) or not 0 < first <= now:
        raise ValueError('Invalid observation timestamp')
    state[uid] = {'first': first, 'name': meta['name']}
    end, basis = anchor(status, first)
    if end <= 0 or end > now:
        raise ValueError('Invalid terminal timestamp')
    if now - end < int(os.environ['RETENTION']):
        held += 1
        continue
    if len(json.dumps({'metadata': meta, 'status': status}).encode()) > int(os.environ['MAX_BYTES']):
        raise ValueError('Diagnostic archive ceiling exceeded')
    candidates.append({'name': meta['name'], 'uid': uid, 'first': first, 'basis': basis, 'end': end})
candidates.sort(key=lambda x: (x['end'], x['uid']))
targets = candidates[:int(os.environ['MAX_PODS'])]
emit(targets=targets, target_count=len(targets), held=held, deferred=len(candidates)-len(targets), state=json.dumps(state))
