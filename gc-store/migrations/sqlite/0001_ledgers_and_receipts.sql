-- The observation ledger of each cluster and namespace, and the archive receipts.

-- One row per cluster and namespace: the ledger's JSON text exactly as it was written
-- (`{uid: {"first": number, "name": name}}`), never reformatted, so ints stay ints.
CREATE TABLE gc_ledgers (
    cluster_id TEXT NOT NULL,
    namespace  TEXT NOT NULL,
    ledger     TEXT NOT NULL,
    -- RFC 3339 UTC, from the database's clock.
    updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (cluster_id, namespace)
) STRICT;

-- One row per archived Pod: where its archive is and the archive's digest and size.
CREATE TABLE gc_receipts (
    cluster_id TEXT    NOT NULL,
    uid        TEXT    NOT NULL,
    namespace  TEXT    NOT NULL,
    name       TEXT    NOT NULL,
    uri        TEXT    NOT NULL,
    sha256     TEXT    NOT NULL,
    bytes      INTEGER NOT NULL CHECK (bytes >= 0),
    created_at TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (cluster_id, uid)
) STRICT;
